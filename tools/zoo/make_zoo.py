#!/usr/bin/python3
"""opfuse model zoo generator.

Exports a fixed set of CNN / transformer / detector / MLP models (random weights, fixed seeds)
to ONNX opset 13, together with a reference input and the eval-mode PyTorch output for each,
and a manifest.json describing everything. See tools/zoo/README.md.

Usage: make_zoo.py [--out DIR] [--tiny | --full | --all | --models a,b,c] [--force] [--no-verify]
"""

import os

# Keep every thread pool to 2 threads (shared 2-core machine); must happen before numpy/torch load.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "2")

import argparse  # noqa: E402
import collections  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import np_onnx  # noqa: E402
import zoo_models  # noqa: E402

# Bump when the export procedure or file layout changes; any edit to zoo_models.py also
# invalidates cached models through the config hash.
ZOO_VERSION = 1
OPSET = 13
# Comparison metric: max |result - ref| / max |ref|. Default bound 1e-4; a model whose float32
# reference is itself less accurate (measured against a float64 evaluation of the graph) gets
# TOL_SAFETY x that error instead, and one worse than MAX_REF_ERROR fails (ill-conditioned).
TOLERANCE = 1e-4
TOL_SAFETY = 5.0
MAX_REF_ERROR = 1e-3

ALLOWED_OPS = set("""
Conv ConvTranspose BatchNormalization Relu LeakyRelu PRelu Clip Sigmoid HardSigmoid HardSwish Tanh Erf
Exp Log Sqrt Reciprocal Neg Abs Pow Add Sub Mul Div Max Min Where Equal Less Greater Not Cast MatMul
Gemm MaxPool AveragePool GlobalAveragePool ReduceMean ReduceSum ReduceMax Softmax LayerNormalization
Gelu Flatten Reshape Transpose Concat Split Slice Squeeze Unsqueeze Gather Shape Constant
ConstantOfShape Expand Identity Dropout Pad Resize Range
""".split())

NP_DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.int64): "int64"}


def default_out_dir():
    return os.environ.get("OPFUSE_ZOO_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "opfuse", "zoo")


def _file_sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# Hashed once at startup: the code that is actually loaded, even if the file is edited mid-run.
MODELS_SHA = _file_sha(zoo_models.__file__)


def config_hash(name, spec):
    h = hashlib.sha256(MODELS_SHA.encode())
    cfg = dict(name=name, zoo_version=ZOO_VERSION, opset=OPSET, torch=torch.__version__, tier=spec["tier"],
               kwargs=spec["kwargs"], outputs=spec["outputs"], dynamic_axes=spec["dynamic_axes"])
    h.update(json.dumps(cfg, sort_keys=True).encode())
    return h.hexdigest()[:16]


def io_files(kind, name, io_names):
    if len(io_names) == 1:
        return [f"{kind}_{name}.npy"]
    return [f"{kind}_{name}_{n}.npy" for n in io_names]


def declared_shape(value_info):
    dims = []
    for d in value_info.type.tensor_type.shape.dim:
        dims.append(d.dim_param if d.HasField("dim_param") else int(d.dim_value))
    return dims


def op_histogram(model):
    return dict(sorted(collections.Counter(n.op_type for n in model.graph.node).items()))


def is_cached(out_dir, name, entry, chash):
    if not entry or entry.get("config_hash") != chash:
        return False
    files = [entry["file"]] + [io["file"] for io in entry["inputs"] + entry["outputs"]]
    return all(os.path.isfile(os.path.join(out_dir, f)) for f in files)


def generate(out_dir, name, spec, verify):
    t0 = time.time()
    torch.manual_seed(zlib.crc32(name.encode()) & 0x7FFFFFFF)
    model, inputs = spec["builder"](**spec["kwargs"])
    model.eval()
    in_names = [n for n, _ in inputs]
    tensors = tuple(t for _, t in inputs)
    with torch.no_grad():
        ref = model(*tensors)
    refs = [ref] if isinstance(ref, torch.Tensor) else list(ref)
    out_names = spec["outputs"]
    assert len(refs) == len(out_names), f"{name}: {len(refs)} outputs, names {out_names}"
    t_build = time.time() - t0

    onnx_file = f"{name}.onnx"
    onnx_path = os.path.join(out_dir, onnx_file)
    tmp_path = onnx_path + ".tmp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about shape-dependent Python values
        torch.onnx.export(model, tensors, tmp_path, input_names=in_names, output_names=out_names,
                          opset_version=OPSET, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.PRESERVE,
                          dynamic_axes=spec["dynamic_axes"] or None)
    t_export = time.time() - t0 - t_build

    m = onnx.load(tmp_path)
    onnx.checker.check_model(m)
    hist = op_histogram(m)
    bad = sorted(set(hist) - ALLOWED_OPS)
    if bad:
        raise RuntimeError(f"{name}: ops outside the allowed set: {bad} (histogram {hist})")
    n_bn_modules = sum(isinstance(x, torch.nn.modules.batchnorm._BatchNorm) for x in model.modules())
    if n_bn_modules and hist.get("BatchNormalization", 0) != n_bn_modules:
        raise RuntimeError(f"{name}: {n_bn_modules} BatchNorm modules but "
                           f"{hist.get('BatchNormalization', 0)} BatchNormalization nodes (folded?)")

    in_files = io_files("input", name, in_names)
    out_files = io_files("output", name, out_names)
    in_arrays = [t.numpy() for t in tensors]
    out_arrays = [r.detach().numpy().astype(np.float32) for r in refs]

    verify_info = None
    if verify:
        t1 = time.time()
        got = np_onnx.run(m, dict(zip(in_names, in_arrays)))
        worst = 0.0
        for on, want in zip(out_names, out_arrays):
            g = got[on]
            if g.shape != want.shape:
                raise RuntimeError(f"{name}: ONNX output {on} has shape {g.shape}, torch {want.shape}")
            rel = float(np.max(np.abs(g - want.astype(np.float64))) / max(np.max(np.abs(want)), 1e-30))
            worst = max(worst, rel)
        if not worst <= MAX_REF_ERROR:
            raise RuntimeError(f"{name}: float64 numpy evaluation of the ONNX graph differs from torch: "
                               f"rel {worst:.3g}")
        verify_info = dict(rel_max_abs_diff=worst, seconds=round(time.time() - t1, 2))
        if spec["dynamic_axes"]:
            # Exercise the symbolic batch dim: batch 2 of the same sample must give the reference twice.
            got2 = np_onnx.run(m, {n: np.concatenate([a, a]) for n, a in zip(in_names, in_arrays)})
            for on, want in zip(out_names, out_arrays):
                if not np.allclose(got2[on], np.concatenate([got[on], got[on]]), rtol=0, atol=1e-9):
                    raise RuntimeError(f"{name}: batch-2 evaluation of the symbolic-batch graph is wrong")
            verify_info["batch2_ok"] = True
    tol = TOLERANCE
    if verify_info and TOL_SAFETY * verify_info["rel_max_abs_diff"] > tol:
        x = TOL_SAFETY * verify_info["rel_max_abs_diff"]
        e = 10.0 ** np.floor(np.log10(x))
        tol = float(np.ceil(x / e) * e)  # round up to one significant digit

    for f, a in zip(in_files + out_files, in_arrays + out_arrays):
        np.save(os.path.join(out_dir, f), a)
    os.replace(tmp_path, onnx_path)

    vi_in = {v.name: v for v in m.graph.input}
    vi_out = {v.name: v for v in m.graph.output}
    entry = dict(
        file=onnx_file,
        tier=spec["tier"],
        config_hash=config_hash(name, spec),
        zoo_version=ZOO_VERSION,
        opset=OPSET,
        inputs=[dict(name=n, dtype=NP_DTYPE_NAMES[a.dtype], shape=declared_shape(vi_in[n]), ref_shape=list(a.shape),
                     file=f) for n, a, f in zip(in_names, in_arrays, in_files)],
        outputs=[dict(name=n, dtype="float32", shape=declared_shape(vi_out[n]), ref_shape=list(a.shape), file=f)
                 for n, a, f in zip(out_names, out_arrays, out_files)],
        op_histogram=hist,
        num_nodes=len(m.graph.node),
        param_count=zoo_models.param_count(model),
        onnx_bytes=os.path.getsize(onnx_path),
        tolerance=dict(metric="max_abs_diff / max_abs_ref", max=tol),
        numpy_check=verify_info,
        seconds=dict(build_and_run=round(t_build, 2), export=round(t_export, 2),
                     total=round(time.time() - t0, 2)),
    )
    return entry


def load_manifest(path):
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    return {}


def save_manifest(path, manifest):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(sorted(manifest.items())), f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def select(args):
    names = list(zoo_models.MODELS)
    if args.models:
        chosen = [s.strip() for s in args.models.split(",") if s.strip()]
        unknown = [c for c in chosen if c not in zoo_models.MODELS]
        if unknown:
            sys.exit(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(names)}")
        return chosen
    if args.all:
        return names
    if args.full:
        return [n for n in names if zoo_models.MODELS[n]["tier"] == "full"]
    return [n for n in names if zoo_models.MODELS[n]["tier"] == "tiny"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=default_out_dir(), help="output dir (default $OPFUSE_ZOO_DIR or "
                    "~/.cache/opfuse/zoo)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--tiny", action="store_true", help="tiny models for fast tests (default)")
    g.add_argument("--full", action="store_true", help="full-size models")
    g.add_argument("--all", action="store_true", help="tiny and full models")
    g.add_argument("--models", help="comma-separated model names")
    ap.add_argument("--force", action="store_true", help="regenerate even if cached")
    ap.add_argument("--no-verify", dest="verify", action="store_false",
                    help="skip the NumPy re-evaluation of each exported graph")
    ap.add_argument("--list", action="store_true", help="list models and exit")
    args = ap.parse_args()

    if args.list:
        for n, s in zoo_models.MODELS.items():
            print(f"{n:32s} {s['tier']}")
        return 0

    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = load_manifest(manifest_path)
    t_all = time.time()
    failures = []
    for name in select(args):
        spec = zoo_models.MODELS[name]
        chash = config_hash(name, spec)
        if not args.force and is_cached(args.out, name, manifest.get(name), chash):
            print(f"[zoo] {name}: cached ({manifest[name]['file']})", flush=True)
            continue
        print(f"[zoo] {name}: generating ...", flush=True)
        try:
            entry = generate(args.out, name, spec, args.verify)
        except Exception as e:  # report and continue with the other models
            print(f"[zoo] {name}: FAILED: {e}", flush=True)
            failures.append(name)
            tmp = os.path.join(args.out, f"{name}.onnx.tmp")
            if os.path.exists(tmp):
                os.remove(tmp)
            continue
        manifest[name] = entry
        save_manifest(manifest_path, manifest)
        s = entry["seconds"]
        chk = entry["numpy_check"]
        chk_s = (f", f64 numpy check rel {chk['rel_max_abs_diff']:.2e} in {chk['seconds']}s, "
                 f"tolerance {entry['tolerance']['max']:.1e}") if chk else ""
        print(f"[zoo] {name}: {entry['onnx_bytes'] / 1e6:.2f} MB, {entry['param_count']} params, "
              f"{entry['num_nodes']} nodes; build+run {s['build_and_run']}s, export {s['export']}s, "
              f"total {s['total']}s{chk_s}", flush=True)
        print(f"[zoo] {name}: ops {entry['op_histogram']}", flush=True)
    print(f"[zoo] done in {time.time() - t_all:.1f}s; manifest {manifest_path}", flush=True)
    if failures:
        print(f"[zoo] FAILED: {', '.join(failures)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
