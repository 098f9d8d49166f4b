"""Code written for onnxruntime runs with `import opfuse as ort`: the session constructor with
providers and SessionOptions, NodeArg's name/shape/type, run(None, feeds) and run(names, feeds)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import opfuse

SCRIPT = Path(__file__).with_name("ort_style_script.py")


def test_an_onnxruntime_script_runs_unchanged(zoo, tmp_path):
    model = zoo("bert_tiny")
    out = tmp_path / "out.npz"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), model.path, str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # What the script printed about the inputs, spelled as onnxruntime spells it.
    assert "input ['batch', 32, 128] tensor(float)" in done.stdout
    assert "attention_mask ['batch', 32] tensor(int64)" in done.stdout
    saved = np.load(out)
    feeds = {name: saved[name] for name in ("input", "attention_mask")}
    want = opfuse.InferenceSession(model.path).run(None, feeds)[0]
    assert saved["output"].shape == (1, 32, 128)
    np.testing.assert_array_equal(saved["output"], want)


def test_node_args_describe_inputs_and_outputs(bert, resnet):
    _, session = bert
    inputs = session.get_inputs()
    assert [(i.name, i.shape, i.type) for i in inputs] == [
        ("input", ["batch", 32, 128], "tensor(float)"),
        ("attention_mask", ["batch", 32], "tensor(int64)"),
    ]
    assert repr(inputs[1]) == "NodeArg(name='attention_mask', type='tensor(int64)', shape=['batch', 32])"
    _, session = resnet
    assert [(o.name, o.shape, o.type) for o in session.get_outputs()] == [("logits", [1, 10], "tensor(float)")]


def test_outputs_come_in_the_order_asked(onnx_models):
    session = opfuse.InferenceSession(onnx_models["two_outputs"])
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8)
    neg, relu = session.run(["neg", "relu"], {"x": x})
    np.testing.assert_array_equal(neg, -x)
    np.testing.assert_array_equal(relu, np.maximum(x, 0))
    relu, neg = session.run(None, {"x": x})
    np.testing.assert_array_equal(relu, np.maximum(x, 0))
    first, second = session.run(["neg", "neg"], {"x": x})
    first[...] = 0  # each array is the caller's own, even for a name asked for twice
    np.testing.assert_array_equal(second, -x)


def test_providers_other_than_cpu_are_refused(resnet):
    model, _ = resnet
    with pytest.raises(ValueError, match="'CUDAExecutionProvider' is not available"):
        opfuse.InferenceSession(model.path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(ValueError, match="'TensorrtExecutionProvider'"):
        opfuse.InferenceSession(model.path, providers=[("TensorrtExecutionProvider", {"device_id": 0})])
    session = opfuse.InferenceSession(model.path, providers=[("CPUExecutionProvider", {})])
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert opfuse.get_available_providers() == ["CPUExecutionProvider"]


def test_session_options_set_threads_and_level(resnet):
    model, _ = resnet
    options = opfuse.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = opfuse.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.log_severity_level = 3  # an onnxruntime setting without an opfuse counterpart
    session = opfuse.InferenceSession(model.path, options, ["CPUExecutionProvider"])
    assert session.level == "O2"
    assert session.get_session_options() is options
    # An explicit opfuse setting wins over sess_options.
    assert opfuse.InferenceSession(model.path, options, level="O1").level == "O1"
    default = opfuse.InferenceSession(model.path).get_session_options()
    assert default.graph_optimization_level == opfuse.GraphOptimizationLevel.ORT_ENABLE_ALL


def test_a_model_given_as_bytes_or_pathlike(resnet):
    model, session = resnet
    want = session.run(None, model.inputs)[0]
    from_bytes = opfuse.InferenceSession(Path(model.path).read_bytes())
    np.testing.assert_array_equal(from_bytes.run(None, model.inputs)[0], want)
    from_path = opfuse.InferenceSession(Path(model.path))
    np.testing.assert_array_equal(from_path.run(None, model.inputs)[0], want)


def test_module_level_functions():
    assert opfuse.get_device() == "CPU"
    assert isinstance(opfuse.__version__, str) and opfuse.__version__.count(".") == 2
    info = opfuse.target_info()
    assert info["isa"] in info["available_isas"]
    assert info["cores"] >= 1 and info["vector_bytes"] in (16, 32, 64)
    assert info["isa"] in info["description"]
    # The cores' distance: measured once (0 with one CPU); near means under 200 ns. Reports stay
    # equal across processes, so the description leaves the measurement out.
    assert info["core_round_trip_ns"] >= 0
    assert info["near_cores"] == (0 < info["core_round_trip_ns"] < 200)
    assert "ns apart" not in info["description"]


def test_denormals_flush_to_zero_only_when_asked(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096])
    k = helper.make_tensor("k", TensorProto.FLOAT, [], [1e-20])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"], name="mul")], "tiny", [x], [y], initializer=[k])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    feeds = {"x": np.full(4096, 1e-20, dtype=np.float32)}  # x * 1e-20 = 1e-40, a denormal
    exact = opfuse.InferenceSession(path).run(None, feeds)[0]
    assert 0 < exact[0] < np.finfo(np.float32).tiny
    assert not opfuse.InferenceSession(path, flush_denormals=True).run(None, feeds)[0].any()
    options = opfuse.SessionOptions()
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    assert options.get_session_config_entry("session.set_denormal_as_zero") == "1"
    assert not opfuse.InferenceSession(path, options).run(None, feeds)[0].any()
    with pytest.raises(TypeError, match="flush_denormals must be a bool"):
        opfuse.InferenceSession(path, flush_denormals="yes")
