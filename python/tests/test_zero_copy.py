"""Inputs are used in place when they can be (C-contiguous, aligned, the model's dtype) and
copied once otherwise; outputs are handed over without a copy."""

import sys
import tracemalloc

import numpy as np

import opfuse


def peak_numpy_bytes(fn):
    """The most memory numpy allocated at once while fn ran (numpy reports its data buffers to
    tracemalloc)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_contiguous_inputs_are_not_copied(onnx_models):
    session = opfuse.InferenceSession(onnx_models["sum_rows"])
    x = np.random.default_rng(0).standard_normal((64, 256, 128)).astype(np.float32)  # 16 MiB
    want = x.sum(axis=(1, 2), dtype=np.float64)
    session.run(None, {"x": x})  # compiled, warm
    refs = sys.getrefcount(x)
    result = []
    in_place = peak_numpy_bytes(lambda: result.append(session.run(None, {"x": x})[0]))
    assert in_place < 1 << 20, f"running on a contiguous input allocated {in_place} bytes"
    np.testing.assert_allclose(result[0], want, rtol=1e-4)
    assert sys.getrefcount(x) == refs, "the session kept a reference to the input"

    # The same data through a transposed view: one contiguous copy, and the same result.
    xt = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    assert not xt.flags.c_contiguous
    copied = peak_numpy_bytes(lambda: result.append(session.run(None, {"x": xt})[0]))
    assert copied >= x.nbytes, f"a non-contiguous input should be copied once, numpy allocated {copied} bytes"
    np.testing.assert_allclose(result[1], want, rtol=1e-4)


def test_read_only_and_odd_layouts_give_the_same_results(resnet):
    model, session = resnet
    x = model.inputs["input"]
    want = session.run(None, {"input": x})[0]

    read_only = x.copy()
    read_only.flags.writeable = False
    np.testing.assert_array_equal(session.run(None, {"input": read_only})[0], want)

    # Every other element of a larger array: strided, not contiguous.
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=np.float32)
    wide[..., ::2] = x
    strided = wide[..., ::2]
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(session.run(None, {"input": strided})[0], want)

    # Fortran order, and a buffer starting off the float alignment (copied to an aligned one).
    np.testing.assert_array_equal(session.run(None, {"input": np.asfortranarray(x)})[0], want)
    raw = np.zeros(x.nbytes + 2, dtype=np.uint8)
    unaligned = np.ndarray(x.shape, dtype=np.float32, buffer=raw, offset=2)
    unaligned[...] = x
    assert not unaligned.flags.aligned
    np.testing.assert_array_equal(session.run(None, {"input": unaligned})[0], want)

    # The session read its input without writing to it.
    np.testing.assert_array_equal(read_only, x)


def test_outputs_are_handed_over_without_a_copy(resnet):
    model, session = resnet
    (out,) = session.run(None, model.inputs)
    assert not out.flags.owndata  # the memory belongs to the tensor the base capsule holds
    assert type(out.base).__name__ == "PyCapsule"
    assert out.flags.c_contiguous and out.flags.writeable
    out[...] = 0  # the caller's to change; the next run returns fresh memory
    assert np.any(session.run(None, model.inputs)[0] != 0)
