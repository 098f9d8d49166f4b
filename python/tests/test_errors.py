"""Bad input raises opfuse.InvalidArgument (an opfuse.Error and a ValueError) whose message names
what is wrong, as the CLI's does; nothing is silently cast or ignored."""

import re
from pathlib import Path

import numpy as np
import pytest

import opfuse


def test_exception_classes():
    assert issubclass(opfuse.InvalidArgument, opfuse.Error)
    assert issubclass(opfuse.InvalidArgument, ValueError)
    assert issubclass(opfuse.Error, RuntimeError)
    assert not issubclass(opfuse.Error, ValueError)
    assert opfuse.Error.__module__ == "opfuse"


def test_unknown_input_name(resnet):
    model, session = resnet
    with pytest.raises(opfuse.InvalidArgument, match=r"unknown input 'image'; the model's inputs are input: f32\[1,3,64,64\]"):
        session.run(None, {"image": model.inputs["input"]})


def test_missing_input(bert):
    model, session = bert
    with pytest.raises(opfuse.InvalidArgument, match=r"missing input 'attention_mask' \(expected attention_mask: i64\[batch,32\]\)"):
        session.run(None, {"input": model.inputs["input"]})


def test_wrong_shape_and_rank(resnet, bert):
    model, session = resnet
    x = model.inputs["input"]
    with pytest.raises(opfuse.InvalidArgument, match=re.escape("input 'input' has the wrong shape (dim 2): expected f32[1,3,64,64], given f32[1,3,32,64]")):
        session.run(None, {"input": x[:, :, :32, :]})
    with pytest.raises(opfuse.InvalidArgument, match=r"input 'input' has the wrong rank"):
        session.run(None, {"input": x[0]})
    # A symbolic dim must be bound to one size across inputs.
    model, session = bert
    feeds = dict(model.inputs, attention_mask=np.ones((2, 32), dtype=np.int64))
    with pytest.raises(opfuse.InvalidArgument, match=r"input 'attention_mask' dim 0 \('batch'\) is 2 but input 'input' bound 'batch' to 1"):
        session.run(None, feeds)


def test_wrong_dtype_is_not_cast(resnet, bert):
    model, session = resnet
    with pytest.raises(opfuse.InvalidArgument, match=re.escape("input 'input' has the wrong dtype: expected tensor(float) (numpy float32), given numpy float64")):
        session.run(None, {"input": model.inputs["input"].astype(np.float64)})
    model, session = bert
    feeds = dict(model.inputs, attention_mask=model.inputs["attention_mask"].astype(np.int32))
    with pytest.raises(opfuse.InvalidArgument, match=r"input 'attention_mask' has the wrong dtype: expected tensor\(int64\) \(numpy int64\), given numpy int32"):
        session.run(None, feeds)
    with pytest.raises(opfuse.InvalidArgument, match=r"input 'input' has the wrong dtype: .* given numpy <U5"):
        session.run(None, {"input": "hello", "attention_mask": model.inputs["attention_mask"]})


def test_unknown_output_name(resnet):
    model, session = resnet
    with pytest.raises(opfuse.InvalidArgument, match=r"unknown output 'logit'; the model's outputs are 'logits'"):
        session.run(["logit"], model.inputs)
    with pytest.raises(opfuse.InvalidArgument, match=r"output_names must be a list of output names or None; given str"):
        session.run("logits", model.inputs)
    with pytest.raises(opfuse.InvalidArgument, match=r"input_feed must be a dict"):
        session.run(None, [model.inputs["input"]])


def test_bad_options(resnet, tmp_path):
    model, _ = resnet
    with pytest.raises(opfuse.InvalidArgument, match=r"unknown optimisation level 'O4' \(valid: O0, O1, O2, O3\)"):
        opfuse.InferenceSession(model.path, level="O4")
    with pytest.raises(opfuse.InvalidArgument, match=r"threads must be 0 or more, given -1"):
        opfuse.InferenceSession(model.path, threads=-1)
    with pytest.raises(opfuse.InvalidArgument, match=r"avx9000"):
        opfuse.InferenceSession(model.path, target="avx9000")
    with pytest.raises(opfuse.InvalidArgument, match=r"fusion config \(the `fusion` dict\): unknown key \"disabel\""):
        opfuse.InferenceSession(model.path, fusion={"disabel": ["epilogue_relu"]})
    with pytest.raises(opfuse.InvalidArgument, match=r"no_such_rule"):
        opfuse.InferenceSession(model.path, fusion={"disable": ["no_such_rule"]})
    config = tmp_path / "fusion.json"
    config.write_text('{"level": "O9"}')
    with pytest.raises(opfuse.InvalidArgument, match=re.escape(f"fusion config '{config}': unknown optimisation level 'O9'")):
        opfuse.InferenceSession(model.path, fusion=config)
    missing = tmp_path / "no_tuning.json"
    with pytest.raises(opfuse.InvalidArgument, match=re.escape(str(missing))):
        opfuse.InferenceSession(model.path, tuning=missing)
    with pytest.raises(TypeError, match=r"path_or_bytes must be a path"):
        opfuse.InferenceSession(42)


def test_missing_file_and_garbage_bytes(tmp_path):
    missing = tmp_path / "absent.onnx"
    with pytest.raises(opfuse.InvalidArgument, match=re.escape(f"model file '{missing}' does not exist")):
        opfuse.InferenceSession(missing)
    with pytest.raises(opfuse.InvalidArgument, match=r"<model bytes>"):
        opfuse.InferenceSession(b"\x08\x07garbage, not a protobuf")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not an onnx model at all")
    with pytest.raises(opfuse.InvalidArgument, match=re.escape(str(garbage))):
        opfuse.InferenceSession(str(garbage))


def test_errors_carry_the_cli_message(resnet, cli, tmp_path):
    """The exception's text is the CLI's error, without the CLI's 'opfuse run: error: ' prefix."""
    import subprocess

    model, session = resnet
    x = model.inputs["input"][:, :, :32, :]
    np.save(tmp_path / "x.npy", np.ascontiguousarray(x))
    done = subprocess.run(
        [cli, "run", model.path, "--level", "O3", "--input", f"input={tmp_path / 'x.npy'}"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    with pytest.raises(opfuse.InvalidArgument) as raised:
        session.run(None, {"input": x})
    assert done.stderr.strip() == f"opfuse run: error: {raised.value}"


def test_ort_style_errors_are_catchable_as_value_errors(tmp_path):
    with pytest.raises(ValueError):
        opfuse.InferenceSession(Path(tmp_path) / "absent.onnx")
