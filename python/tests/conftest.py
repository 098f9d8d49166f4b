"""Shared fixtures: the tiny model zoo (tools/zoo/make_zoo.py, in $OPFUSE_ZOO_DIR as the C++
tests read it), the CLI binary (OPFUSE_CLI, set by ctest), and small ONNX models made here."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import opfuse

REPO = Path(__file__).resolve().parents[2]
ZOO_DIR = Path(os.environ.get("OPFUSE_ZOO_DIR", Path.home() / ".cache" / "opfuse" / "zoo"))


class ZooModel:
    """One zoo model: its file, its reference inputs ({name: array}) and PyTorch's outputs."""

    def __init__(self, name, entry):
        self.name = name
        self.path = str(ZOO_DIR / entry["file"])
        self.inputs = {i["name"]: np.load(ZOO_DIR / i["file"]) for i in entry["inputs"]}
        self.outputs = {o["name"]: np.load(ZOO_DIR / o["file"]) for o in entry["outputs"]}
        self.tolerance = entry["tolerance"]["max"]  # max |diff| / max |reference|


def _manifest():
    path = ZOO_DIR / "manifest.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def zoo():
    """zoo(name) -> ZooModel; skips when the tiny zoo has not been generated."""
    manifest = _manifest()

    def get(name):
        if manifest is None or name not in manifest:
            pytest.skip(
                f"zoo model {name!r} not found in {ZOO_DIR} (./scripts/test.sh generates the tiny zoo, "
                "or /usr/bin/python3 tools/zoo/make_zoo.py --tiny)"
            )
        return ZooModel(name, manifest[name])

    return get


@pytest.fixture(scope="session")
def cli():
    """The path of the opfuse binary."""
    given = os.environ.get("OPFUSE_CLI")
    path = Path(given) if given else REPO / "build" / "opfuse"
    if not path.exists():
        if given:
            pytest.fail(f"OPFUSE_CLI={given} does not exist")
        pytest.skip(f"the CLI {path} is not built (./scripts/build.sh opfuse_cli)")
    return str(path)


@pytest.fixture(scope="session")
def resnet(zoo):
    """resnet_tiny at O3, shared by the tests that only read it."""
    model = zoo("resnet_tiny")
    return model, opfuse.InferenceSession(model.path)


@pytest.fixture(scope="session")
def bert(zoo):
    """bert_tiny (symbolic batch, float input and int64 mask) at O3, shared likewise."""
    model = zoo("bert_tiny")
    return model, opfuse.InferenceSession(model.path)


def relative_error(got, want):
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale


@pytest.fixture(scope="session")
def onnx_models(tmp_path_factory):
    """Small models built with onnx.helper, as {name: path}:

    two_outputs: x f32[n, 8] -> relu = Relu(x), neg = Neg(x) (n symbolic)
    sum_rows:    x f32[64, 256, 128] -> total = ReduceSum(x, axes=[1, 2]) (16 MiB in, 256 B out)
    """
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    out_dir = tmp_path_factory.mktemp("models")
    paths = {}

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])
    relu = helper.make_tensor_value_info("relu", TensorProto.FLOAT, ["n", 8])
    neg = helper.make_tensor_value_info("neg", TensorProto.FLOAT, ["n", 8])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["relu"], name="relu"), helper.make_node("Neg", ["x"], ["neg"], name="neg")],
        "two_outputs",
        [x],
        [relu, neg],
    )
    paths["two_outputs"] = out_dir / "two_outputs.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), paths["two_outputs"])

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256, 128])
    total = helper.make_tensor_value_info("total", TensorProto.FLOAT, [64])
    axes = helper.make_tensor("axes", TensorProto.INT64, [2], [1, 2])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["total"], keepdims=0, name="sum")],
        "sum_rows",
        [x],
        [total],
        initializer=[axes],
    )
    paths["sum_rows"] = out_dir / "sum_rows.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), paths["sum_rows"])
    return {name: str(path) for name, path in paths.items()}
