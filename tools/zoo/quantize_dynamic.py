#!/usr/bin/python3
"""Dynamic quantization of an ONNX model's weight products, in the form ONNX Runtime's
quantize_dynamic writes (and with it the "*_quantized.onnx" transformers published for
transformers.js), for testing and benchmarking opfuse on such models without onnxruntime's Python
package (Debian has none):

    xq, xs, xz = DynamicQuantizeLinear(x)          (once per x, shared by its products)
    y = MatMulInteger(xq, Wq, xz, Wz)              (int32)
    out = Mul(Cast(y, to=float), Mul(xs, Ws))      (in place of MatMul(x, W))

Every MatMul whose B is a 2-d float initializer is rewritten; Wq is int8 with zero point 0 and
Ws = max|W| / 127 (onnxruntime's default QInt8 weights, per tensor), or uint8 with an asymmetric
zero point (--weights uint8, its QUInt8). Usage:

    /usr/bin/python3 tools/zoo/quantize_dynamic.py IN.onnx OUT.onnx [--weights int8|uint8]
"""
import numpy as np
from onnx import helper, numpy_helper, TensorProto

import rewrite_model


def quantize_weights(w, kind):
    if kind == "int8":
        scale = max(float(np.abs(w).max()), 1e-12) / 127.0
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        return q, np.float32(scale), np.int8(0)
    lo, hi = min(float(w.min()), 0.0), max(float(w.max()), 0.0)
    scale = max(hi - lo, 1e-12) / 255.0
    zero = np.uint8(np.clip(np.round(-lo / scale), 0, 255))
    q = np.clip(np.round(w / scale) + zero, 0, 255).astype(np.uint8)
    return q, np.float32(scale), zero


def quantize(model, kind):
    """The graph's new node list and how many products it quantized (rewrite_model.rewrite_file)."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    nodes, quantized_inputs, count = [], {}, 0
    for node in graph.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is None or len(w.dims) != 2 or w.data_type != TensorProto.FLOAT:
            nodes.append(node)
            continue
        x, out, name = node.input[0], node.output[0], node.name or f"matmul{count}"
        if x not in quantized_inputs:
            quantized_inputs[x] = (f"{x}_quantized", f"{x}_scale", f"{x}_zero_point")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(quantized_inputs[x]),
                                          name=f"{x}_QuantizeLinear"))
        xq, xs, xz = quantized_inputs[x]
        q, scale, zero = quantize_weights(numpy_helper.to_array(w), kind)
        graph.initializer.extend([numpy_helper.from_array(q, f"{w.name}_quantized"),
                                  numpy_helper.from_array(np.array(scale), f"{w.name}_scale"),
                                  numpy_helper.from_array(np.array(zero), f"{w.name}_zero_point")])
        nodes += [
            helper.make_node("MatMulInteger", [xq, f"{w.name}_quantized", xz, f"{w.name}_zero_point"],
                             [f"{out}_int32"], name=f"{name}_quant"),
            helper.make_node("Cast", [f"{out}_int32"], [f"{out}_cast"], to=TensorProto.FLOAT,
                             name=f"{name}_cast"),
            helper.make_node("Mul", [xs, f"{w.name}_scale"], [f"{out}_scales"], name=f"{name}_scales"),
            helper.make_node("Mul", [f"{out}_cast", f"{out}_scales"], [out], name=f"{name}_dequantize"),
        ]
        count += 1
    return nodes, count


if __name__ == "__main__":
    rewrite_model.main("quantize_dynamic", __doc__, 11, "DynamicQuantizeLinear",
                       lambda parser: parser.add_argument("--weights", choices=["int8", "uint8"], default="int8"),
                       lambda model, args: quantize(model, args.weights),
                       lambda args, count: f"{args.output}: {count} products quantized ({args.weights} weights)")
