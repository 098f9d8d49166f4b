#!/usr/bin/python3
"""Regenerates the seed corpora in fuzz/corpus/ (kept in the repository, small).

fuzz_onnx_loader: every ONNX backend node-test model from Debian's libonnx-testdata (except the
  *_expanded variants), ~150 KB.
fuzz_compile: the first nodes of each tiny zoo model (~/.cache/opfuse/zoo, tools/zoo/make_zoo.py)
  with the weights they use, so the compile target starts from real CNN/transformer structure
  without megabytes of weights; plus a few conformance models of fusible patterns.
fuzz_text_ir: the golden text-IR cases of tests/golden (one graph per file).

Usage: /usr/bin/python3 fuzz/make_corpus.py [--zoo DIR]
"""
import argparse
import os
import pathlib
import shutil

import onnx
from onnx import helper

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFORMANCE = pathlib.Path("/usr/share/libonnx-testdata/data/node")
ZOO_MODELS = ["resnet_tiny", "mobilenet_v2_tiny", "mobilenet_v3_large_tiny", "efficientnet_b0_tiny",
              "bert_tiny", "yolov5_tiny", "deeplabv3_tiny", "mlp"]
COMPILE_CONFORMANCE = ["test_conv_with_strides_padding", "test_relu", "test_gemm_default_single_elem_vector_bias",
                       "test_matmul_2d", "test_softmax_axis_1", "test_layer_normalization_2d_axis0",
                       "test_batchnorm_example", "test_maxpool_2d_default", "test_globalaveragepool",
                       "test_gelu_tanh_1", "test_hardswish", "test_add_bcast", "test_resize_upsample_scales_nearest",
                       "test_transpose_default", "test_concat_2d_axis_1", "test_reduce_mean_default_axes_keepdims_example"]
MAX_SLICE_WEIGHT_BYTES = 48 * 1024


def reset(directory):
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)


def zoo_slice(path, max_nodes):
    """The longest prefix of the (topologically ordered) nodes, up to max_nodes, whose weights fit
    MAX_SLICE_WEIGHT_BYTES; its dangling outputs become the graph outputs."""
    model = onnx.load(str(path))
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    used, nodes, weight_bytes = set(), [], 0
    for node in g.node[:max_nodes]:
        extra = [i for i in node.input if i in inits and i not in used]
        size = sum(len(inits[i].SerializeToString()) for i in extra)
        if weight_bytes + size > MAX_SLICE_WEIGHT_BYTES:
            break
        weight_bytes += size
        used.update(extra)
        nodes.append(node)
    consumed = {i for n in nodes for i in n.input}
    outputs = [helper.make_empty_tensor_value_info(o) for n in nodes for o in n.output
               if o and o not in consumed]
    inputs = [i for i in g.input if i.name not in inits and i.name in consumed]
    graph = helper.make_graph(nodes, g.name + "_slice", inputs, outputs,
                              [inits[i] for i in sorted(used)])
    sliced = helper.make_model(graph, opset_imports=model.opset_import)
    sliced.ir_version = model.ir_version
    return sliced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zoo", default=os.environ.get("OPFUSE_ZOO_DIR",
                                                        str(pathlib.Path.home() / ".cache/opfuse/zoo")))
    args = parser.parse_args()
    corpus = ROOT / "fuzz" / "corpus"

    loader = corpus / "fuzz_onnx_loader"
    reset(loader)
    for test in sorted(CONFORMANCE.iterdir()):
        if "expanded" not in test.name and (test / "model.onnx").exists():
            shutil.copy(test / "model.onnx", loader / (test.name + ".onnx"))

    compile_dir = corpus / "fuzz_compile"
    reset(compile_dir)
    for name in ZOO_MODELS:
        path = pathlib.Path(args.zoo) / (name + ".onnx")
        if not path.exists():
            print("skipping", path, "(not generated)")
            continue
        for max_nodes in (6, 24):
            sliced = zoo_slice(path, max_nodes)
            if len(sliced.graph.node) > 0:
                (compile_dir / f"{name}_{max_nodes}.onnx").write_bytes(sliced.SerializeToString())
    for test in COMPILE_CONFORMANCE:
        if (CONFORMANCE / test / "model.onnx").exists():
            shutil.copy(CONFORMANCE / test / "model.onnx", compile_dir / (test + ".onnx"))

    text = corpus / "fuzz_text_ir"
    reset(text)
    for case in sorted((ROOT / "tests" / "golden").glob("*/*.ir")):
        shutil.copy(case, text / f"{case.parent.name}_{case.name}")

    total = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
    print(f"corpus: {sum(1 for f in corpus.rglob('*') if f.is_file())} files, {total} bytes")


if __name__ == "__main__":
    main()
