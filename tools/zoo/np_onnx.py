"""A small, slow, obviously-written NumPy interpreter for the ONNX ops the zoo uses.

Why: onnxruntime is not available here, and we want to check that the *exported* graphs
(not just torch) reproduce the eval-mode PyTorch outputs, in particular that exporting with
TrainingMode.PRESERVE keeps inference semantics for BatchNormalization. Floats are evaluated in
float64 so that the measured difference is essentially torch's own float32 rounding error,
which also tells us whether the manifest tolerance is achievable.

Only opset-13 semantics of the ops actually produced by torch 1.13's exporter are covered;
anything else raises NotImplementedError naming the op.
"""

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from onnx import numpy_helper
from onnx.helper import get_attribute_value

ONNX_TO_NP = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64, 10: np.float16}


def _up(a):
    """Evaluate floating point in float64."""
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _axes(x, axes):
    return [a + x.ndim if a < 0 else a for a in axes]


def _pads_2d(x, pads, value):
    n = x.ndim - 2
    pw = [(0, 0), (0, 0)] + [(pads[i], pads[i + n]) for i in range(n)]
    return np.pad(x, pw, constant_values=value)


def _windows(x, kshape, strides, dilations):
    """[N, C, H, W] -> [N, C, OH, OW, KH, KW] strided/dilated window view."""
    span = [(k - 1) * d + 1 for k, d in zip(kshape, dilations)]
    w = sliding_window_view(x, span, axis=(2, 3))
    w = w[:, :, :: strides[0], :: strides[1], :: dilations[0], :: dilations[1]]
    return w


def conv(x, w, b=None, group=1, pads=None, strides=None, dilations=None, kernel_shape=None, auto_pad="NOTSET"):
    assert x.ndim == 4 and auto_pad in ("NOTSET", b"NOTSET"), "only 2-D explicit-pad Conv"
    pads = pads or [0] * 4
    strides = strides or [1, 1]
    dilations = dilations or [1, 1]
    win = _windows(_pads_2d(x, pads, 0.0), w.shape[2:], strides, dilations)  # N C OH OW KH KW
    n, c, oh, ow = win.shape[:4]
    m, cg = w.shape[0], w.shape[1]
    win = win.reshape(n, group, cg, oh, ow, w.shape[2], w.shape[3])
    wg = w.reshape(group, m // group, cg, w.shape[2], w.shape[3])
    if cg == 1 and m // group == 1:  # depthwise: elementwise multiply-accumulate over the kernel
        y = np.einsum("ngchwij,gocij->ngohw", win, wg)
    else:
        y = np.stack([np.tensordot(win[:, g], wg[g], axes=([1, 4, 5], [1, 2, 3])) for g in range(group)], 1)
        y = y.transpose(0, 1, 4, 2, 3)  # n g oh ow o -> n g o oh ow
    y = y.reshape(n, m, oh, ow)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def pool(x, kind, kernel_shape, pads=None, strides=None, ceil_mode=0, count_include_pad=0, dilations=None):
    assert x.ndim == 4 and not ceil_mode, "only 2-D floor-mode pooling"
    pads = pads or [0] * 4
    strides = strides or [1, 1]
    if kind == "max":
        win = _windows(_pads_2d(x, pads, -np.inf), kernel_shape, strides, dilations or [1, 1])
        return win.max(axis=(4, 5))
    s = _windows(_pads_2d(x, pads, 0.0), kernel_shape, strides, [1, 1]).sum(axis=(4, 5))
    if count_include_pad or not any(pads):
        return s / float(np.prod(kernel_shape))
    cnt = _windows(_pads_2d(np.ones_like(x[:1, :1]), pads, 0.0), kernel_shape, strides, [1, 1]).sum(axis=(4, 5))
    return s / cnt


def resize(x, roi, scales, sizes, mode="nearest", coordinate_transformation_mode="half_pixel",
           nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0):
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = coordinate_transformation_mode
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    nm = nearest_mode.decode() if isinstance(nearest_mode, bytes) else nearest_mode
    if sizes is not None and sizes.size:
        out = [int(s) for s in sizes]
        sc = [o / i for o, i in zip(out, x.shape)]
    else:
        sc = [float(s) for s in scales]
        out = [int(np.floor(i * s)) for i, s in zip(x.shape, sc)]
    for ax in range(x.ndim):
        if out[ax] == x.shape[ax] and sc[ax] == 1.0:
            continue
        n_in, n_out, s = x.shape[ax], out[ax], sc[ax]
        o = np.arange(n_out, dtype=np.float64)
        if ctm == "asymmetric":
            src = o / s
        elif ctm == "half_pixel":
            src = (o + 0.5) / s - 0.5
        elif ctm == "pytorch_half_pixel":
            src = (o + 0.5) / s - 0.5 if n_out > 1 else np.zeros_like(o)
        elif ctm == "align_corners":
            src = o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(o)
        else:
            raise NotImplementedError(f"Resize coordinate_transformation_mode={ctm}")
        if mode == "nearest":
            if nm == "floor":
                idx = np.floor(src)
            elif nm == "round_prefer_floor":
                idx = np.ceil(src - 0.5)
            elif nm == "round_prefer_ceil":
                idx = np.floor(src + 0.5)
            else:
                idx = np.ceil(src)
            x = np.take(x, np.clip(idx, 0, n_in - 1).astype(np.int64), axis=ax)
        elif mode == "linear":
            src = np.clip(src, 0, n_in - 1)
            lo = np.floor(src).astype(np.int64)
            hi = np.minimum(lo + 1, n_in - 1)
            t = (src - lo).reshape([-1 if a == ax else 1 for a in range(x.ndim)])
            x = np.take(x, lo, axis=ax) * (1 - t) + np.take(x, hi, axis=ax) * t
        else:
            raise NotImplementedError(f"Resize mode={mode}")
    return x


_erf = np.vectorize(math.erf, otypes=[np.float64])  # no scipy here; slow but exact enough


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _reduce(fn, x, axes, keepdims):
    axes = None if axes is None or len(axes) == 0 else tuple(_axes(x, list(axes)))
    return fn(x, axis=axes, keepdims=bool(keepdims))


def _slice(x, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else _axes(x, list(axes))
    steps = [1] * len(starts) if steps is None else list(steps)
    sl = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st <= 0:
            raise NotImplementedError("Slice with non-positive steps")
        # For positive steps Python slicing clamps exactly like ONNX (incl. INT64_MAX sentinels).
        sl[a] = slice(int(s), int(e), int(st))
    return x[tuple(sl)]


def _attrs(node):
    return {a.name: get_attribute_value(a) for a in node.attribute}


def run_node(op, ins, at):
    x = ins[0] if ins else None
    unary = {"Relu": lambda v: np.maximum(v, 0), "Sigmoid": lambda v: 1 / (1 + np.exp(-v)), "Tanh": np.tanh,
             "Erf": _erf, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Reciprocal": lambda v: 1 / v,
             "Neg": np.negative, "Abs": np.abs, "Not": np.logical_not, "Identity": lambda v: v}
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Pow": np.power,
              "Equal": np.equal, "Less": np.less, "Greater": np.greater}
    if op in unary:
        return [unary[op](x)]
    if op in binary:
        return [binary[op](ins[0], ins[1])]
    if op == "Div":
        a, b = ins
        return [np.trunc(a / b).astype(a.dtype) if a.dtype.kind == "i" else a / b]  # integer Div truncates
    if op in ("Max", "Min"):
        f = np.maximum if op == "Max" else np.minimum
        r = ins[0]
        for v in ins[1:]:
            r = f(r, v)
        return [r]
    if op == "LeakyRelu":
        return [np.where(x >= 0, x, x * at.get("alpha", 0.01))]
    if op == "PRelu":
        return [np.where(x >= 0, x, x * ins[1])]
    if op == "Clip":
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else -np.inf
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else np.inf
        return [np.clip(x, lo, hi)]
    if op == "HardSigmoid":
        return [np.clip(x * at.get("alpha", 0.2) + at.get("beta", 0.5), 0, 1)]
    if op == "HardSwish":
        return [x * np.clip(x / 6 + 0.5, 0, 1)]
    if op == "Where":
        return [np.where(*ins)]
    if op == "Cast":
        return [_up(x.astype(ONNX_TO_NP[at["to"]]))]
    if op == "MatMul":
        return [np.matmul(ins[0], ins[1])]
    if op == "Gemm":
        a, b = ins[0], ins[1]
        a = a.T if at.get("transA", 0) else a
        b = b.T if at.get("transB", 0) else b
        y = at.get("alpha", 1.0) * (a @ b)
        if len(ins) > 2 and ins[2] is not None:
            y = y + at.get("beta", 1.0) * ins[2]
        return [y]
    if op == "Conv":
        return [conv(x, ins[1], ins[2] if len(ins) > 2 else None, **at)]
    if op == "BatchNormalization":
        scale, bias, mean, var = ins[1:5]
        shp = [1, -1] + [1] * (x.ndim - 2)
        inv = scale.reshape(shp) / np.sqrt(var.reshape(shp) + at.get("epsilon", 1e-5))
        return [(x - mean.reshape(shp)) * inv + bias.reshape(shp)]
    if op in ("MaxPool", "AveragePool"):
        return [pool(x, "max" if op == "MaxPool" else "avg", **at)]
    if op == "GlobalAveragePool":
        return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)]
    if op in ("ReduceMean", "ReduceMax"):  # opset 13: axes attribute
        f = np.mean if op == "ReduceMean" else np.max
        return [_reduce(f, x, at.get("axes"), at.get("keepdims", 1))]
    if op == "ReduceSum":  # opset 13: axes input
        axes = ins[1] if len(ins) > 1 and ins[1] is not None else None
        if axes is None and at.get("noop_with_empty_axes", 0):
            return [x]
        return [_reduce(np.sum, x, None if axes is None else axes.tolist(), at.get("keepdims", 1))]
    if op == "Softmax":
        return [_softmax(x, at.get("axis", -1))]
    if op == "Flatten":
        a = at.get("axis", 1)
        a = a + x.ndim if a < 0 else a
        return [x.reshape(int(np.prod(x.shape[:a])), -1)]
    if op == "Reshape":
        shape = [int(s) for s in ins[1]]
        if not at.get("allowzero", 0):
            shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Transpose":
        return [np.transpose(x, at.get("perm"))]
    if op == "Concat":
        return [np.concatenate(ins, axis=at["axis"])]
    if op == "Split":
        axis = at.get("axis", 0)
        if len(ins) > 1 and ins[1] is not None:
            idx = np.cumsum(ins[1])[:-1]
            return list(np.split(x, idx, axis=axis))
        raise NotImplementedError("Split without explicit sizes")
    if op == "Slice":
        return [_slice(x, ins[1], ins[2], *(v for v in ins[3:5]))]
    if op == "Squeeze":
        axes = None if len(ins) < 2 or ins[1] is None else tuple(_axes(x, ins[1].tolist()))
        return [np.squeeze(x, axis=axes)]
    if op == "Unsqueeze":
        r = x
        for a in sorted(_axes(np.empty([0] * (x.ndim + len(ins[1]))), ins[1].tolist())):
            r = np.expand_dims(r, a)
        return [r]
    if op == "Gather":
        return [np.take(x, ins[1].astype(np.int64), axis=at.get("axis", 0))]
    if op == "Shape":
        return [np.array(x.shape, dtype=np.int64)]
    if op == "Constant":
        return [_up(numpy_helper.to_array(at["value"]))]
    if op == "ConstantOfShape":
        v = _up(numpy_helper.to_array(at["value"])) if "value" in at else np.zeros(1)
        return [np.full([int(s) for s in x], v.reshape(-1)[0], dtype=v.dtype)]
    if op == "Expand":
        shape = np.broadcast_shapes(x.shape, tuple(int(s) for s in ins[1]))
        return [np.broadcast_to(x, shape).copy()]
    if op == "Range":
        return [np.arange(ins[0], ins[1], ins[2])]
    if op == "Dropout":
        return [x]
    if op == "Pad":
        pads = [int(p) for p in ins[1]]
        n = x.ndim
        v = ins[2].item() if len(ins) > 2 and ins[2] is not None and ins[2].size else 0
        return [np.pad(x, [(pads[i], pads[i + n]) for i in range(n)], constant_values=v)]
    if op == "Resize":
        ins = list(ins) + [None] * (4 - len(ins))
        return [resize(x, ins[1], ins[2], ins[3], **at)]
    raise NotImplementedError(f"np_onnx: op {op} not supported")


def run(model, feeds):
    """Runs `model` (ModelProto) on `feeds` ({name: ndarray}); returns {output name: ndarray}."""
    env = {}
    for init in model.graph.initializer:
        env[init.name] = _up(numpy_helper.to_array(init))
    for k, v in feeds.items():
        env[k] = _up(v)
    for node in model.graph.node:
        ins = [env[n] if n else None for n in node.input]
        outs = run_node(node.op_type, ins, _attrs(node))
        for name, val in zip(node.output, outs):
            env[name] = np.asarray(val)
    return {o.name: env[o.name] for o in model.graph.output}
