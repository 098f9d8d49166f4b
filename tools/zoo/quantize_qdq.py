#!/usr/bin/python3
"""A QDQ-form variant of an ONNX model, the form of static quantization (onnxruntime's
quantize_static default, and most exporters' quantized models), for timing opfuse on such
models: every Conv, and every MatMul of 2-d constant weights, with float weights reads its input
through QuantizeLinear -> DequantizeLinear (uint8, one scale and zero point per tensor) and its
weights through DequantizeLinear of int8 weights (symmetric, one scale per output channel: a
Conv's first axis, a MatMul's columns). A BatchNormalization that is a Conv's only reader is
folded into its weights and bias first, as onnxruntime's quantize_static does before quantizing.
Not calibrated: every activation gets the same --scale (0.05) and zero point 128, so outputs are
far from the float model's; only the structure and the work are real. Usage:

    /usr/bin/python3 tools/zoo/quantize_qdq.py IN.onnx OUT.onnx [--scale 0.05]
"""
import numpy as np
from onnx import helper, numpy_helper

import rewrite_model


def fold_batchnorms(graph, inits):
    """The graph's nodes with each BatchNormalization that is a Conv's only reader (constant
    weights and parameters) folded into the Conv: W * g / sqrt(v + eps) per output channel, bias
    (b - mean) * g / sqrt(v + eps) + beta."""
    readers = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    folded, dropped = {}, set()
    for node in graph.node:
        if node.op_type != "Conv" or node.input[1] not in inits:
            continue
        users = readers.get(node.output[0], [])
        bn = users[0] if len(users) == 1 else None
        graph_outputs = {o.name for o in graph.output}
        if bn is None or bn.op_type != "BatchNormalization" or node.output[0] in graph_outputs or \
                not all(i in inits for i in bn.input[1:5]):
            continue
        g, beta, mean, var = (numpy_helper.to_array(inits[i]).astype(np.float64) for i in bn.input[1:5])
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        k = g / np.sqrt(var + eps)
        w = numpy_helper.to_array(inits[node.input[1]])
        b = numpy_helper.to_array(inits[node.input[2]]) if len(node.input) > 2 and node.input[2] else np.zeros(w.shape[0])
        w = (w * k.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
        b = ((b - mean) * k + beta).astype(np.float32)
        wn, bname = node.output[0] + "_bn_w", node.output[0] + "_bn_b"
        graph.initializer.extend([numpy_helper.from_array(w, wn), numpy_helper.from_array(b, bname)])
        inits[wn], inits[bname] = graph.initializer[-2], graph.initializer[-1]
        conv = helper.make_node("Conv", [node.input[0], wn, bname], [bn.output[0]], name=node.name)
        conv.attribute.extend(node.attribute)
        folded[id(node)] = conv
        dropped.add(id(bn))
    return [folded.get(id(n), n) for n in graph.node if id(n) not in dropped]


def quantize(model, scale):
    """The graph's new node list and how many convs it quantized (rewrite_model.rewrite_file)."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    nodes, count = [], 0
    for node in fold_batchnorms(graph, inits):
        conv = node.op_type == "Conv"
        if not (conv or node.op_type == "MatMul") or node.input[1] not in inits or \
                (not conv and len(inits[node.input[1]].dims) != 2):
            nodes.append(node)
            continue
        p = f"qdq{count}"
        graph.initializer.extend([numpy_helper.from_array(np.array(scale, np.float32), f"{p}_scale"),
                                  numpy_helper.from_array(np.array(128, np.uint8), f"{p}_zero")])
        nodes += [helper.make_node("QuantizeLinear", [node.input[0], f"{p}_scale", f"{p}_zero"], [f"{p}_q"]),
                  helper.make_node("DequantizeLinear", [f"{p}_q", f"{p}_scale", f"{p}_zero"], [f"{p}_x"])]
        w = numpy_helper.to_array(inits[node.input[1]])
        # Output channels: a Conv's first axis, a MatMul's columns.
        channels = np.moveaxis(w, 0 if conv else 1, 0)
        w_scale = (np.abs(channels).reshape(channels.shape[0], -1).max(1) / 127 + 1e-12).astype(np.float32)
        shape = (-1,) + (1,) * (w.ndim - 1) if conv else (1, -1)
        wq = np.clip(np.round(w / w_scale.reshape(shape)), -127, 127).astype(np.int8)
        graph.initializer.extend([numpy_helper.from_array(wq, f"{p}_wq"),
                                  numpy_helper.from_array(w_scale, f"{p}_wscale"),
                                  numpy_helper.from_array(np.zeros(w_scale.shape[0], np.int8), f"{p}_wzero")])
        nodes.append(helper.make_node("DequantizeLinear", [f"{p}_wq", f"{p}_wscale", f"{p}_wzero"], [f"{p}_w"],
                                      axis=0 if conv else 1))
        node.input[0], node.input[1] = f"{p}_x", f"{p}_w"
        nodes.append(node)
        count += 1
    return nodes, count


if __name__ == "__main__":
    rewrite_model.main("quantize_qdq", __doc__, 13, "per-axis DequantizeLinear",
                       lambda parser: parser.add_argument("--scale", type=float, default=0.05),
                       lambda model, args: quantize(model, args.scale),
                       lambda args, count: f"{args.output}: {count} convs and products in QDQ form")
