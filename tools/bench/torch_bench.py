#!/usr/bin/python3
"""Times one zoo model in PyTorch eager mode and prints ONE JSON object on stdout, shaped like
`opfuse bench --json` (median_ms, min_ms, p90_ms, peak_rss_bytes, kernels = null).

The zoo stores only ONNX files, so the torch module is rebuilt from tools/zoo/zoo_models.py with
the zoo's own seed and config (exactly what make_zoo.py does before exporting). Rebuilding
includes a train-mode BatchNorm calibration pass, which would inflate the peak RSS of the timing
process, so it happens once in a separate `--prepare` step that pickles the module into a cache
folder; the timing run only loads it. Both steps check the module's output on the zoo's
reference input against the zoo's reference output (max|diff| / max|ref|): a rebuilt module
that is not the exported model is an error, not a timing.

Usage:
  torch_bench.py --prepare --zoo DIR --model NAME [--cache DIR]
  torch_bench.py --zoo DIR --model NAME [--cache DIR] [--threads 2] [--iters 20] [--warmup 3]
"""

import os

# The timing threads come from --threads; OpenMP waits are passive so idle workers don't spin.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO_TOOLS = os.path.join(os.path.dirname(HERE), "zoo")
BUILD_THREADS = 2  # make_zoo.py builds with 2 threads; same reductions, same BN statistics


def current_rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "opfuse", "bench", "torch")


def load_entry(zoo, model):
    with open(os.path.join(zoo, "manifest.json")) as f:
        manifest = json.load(f)
    if model not in manifest:
        raise SystemExit(f"torch_bench: error: model {model} is not in {zoo}/manifest.json")
    return manifest[model]


def load_inputs(np, torch, zoo, entry):
    return [torch.from_numpy(np.load(os.path.join(zoo, io["file"]))) for io in entry["inputs"]]


def check_outputs(np, zoo, entry, result):
    outs = [result] if hasattr(result, "detach") else list(result)
    worst = 0.0
    per_output = {}
    for io, got in zip(entry["outputs"], outs):
        want = np.load(os.path.join(zoo, io["file"])).astype(np.float64)
        g = got.detach().numpy().astype(np.float64)
        if g.shape != want.shape:
            per_output[io["name"]] = dict(error=f"shape {list(g.shape)} vs reference {list(want.shape)}")
            worst = float("inf")
            continue
        diff = float(np.max(np.abs(g - want))) if want.size else 0.0
        ref = float(np.max(np.abs(want))) if want.size else 0.0
        rel = diff / max(ref, 1e-30) if diff == diff else float("inf")
        per_output[io["name"]] = dict(max_abs_diff=diff, max_abs_ref=ref, rel=rel)
        worst = max(worst, rel)
    if len(outs) != len(entry["outputs"]):
        worst = float("inf")
    tol = entry.get("tolerance", {}).get("max", 1e-4)
    return dict(metric="max_abs_diff / max_abs_ref", rel_max_abs_diff=worst, tolerance=tol, ok=worst <= tol,
                outputs=per_output)


def build_info(torch):
    """What this torch computes with: a generic-BLAS build is slow at Linear/MatMul."""
    config = torch.__config__.show()
    blas = next((part.split("=", 1)[1] for part in config.replace(",", " ").split() if part.startswith("BLAS_INFO=")),
                None)
    return dict(blas_info=blas, mkldnn=torch.backends.mkldnn.is_available(), mkl=torch.backends.mkl.is_available())


def cache_path(cache, model, chash):
    return os.path.join(cache, f"{model}-{chash}.pt")


def prepare(args, np, torch):
    sys.path.insert(0, ZOO_TOOLS)
    import make_zoo  # noqa: E402  (the zoo's own seed and config hash)
    import zoo_models  # noqa: E402

    entry = load_entry(args.zoo, args.model)
    spec = zoo_models.MODELS.get(args.model)
    if spec is None:
        raise SystemExit(f"torch_bench: error: {args.model} has no builder in tools/zoo/zoo_models.py")
    chash = make_zoo.config_hash(args.model, spec)
    if entry.get("config_hash") != chash:
        raise SystemExit(f"torch_bench: error: the zoo's {args.model} was made from another zoo_models.py or torch "
                         f"(config hash {entry.get('config_hash')} vs {chash}); regenerate the zoo")
    path = cache_path(args.cache, args.model, chash)
    if os.path.isfile(path) and not args.force:
        print(json.dumps(dict(prepared=path, cached=True)))
        return 0
    torch.set_num_threads(BUILD_THREADS)
    torch.manual_seed(zlib.crc32(args.model.encode()) & 0x7FFFFFFF)  # as make_zoo.generate
    model, _ = spec["builder"](**spec["kwargs"])
    model.eval()
    with torch.inference_mode():
        check = check_outputs(np, args.zoo, entry, model(*load_inputs(np, torch, args.zoo, entry)))
    if not check["ok"]:
        raise SystemExit(f"torch_bench: error: rebuilt {args.model} does not reproduce the zoo reference: "
                         f"{json.dumps(check)}")
    os.makedirs(args.cache, exist_ok=True)
    torch.save(model, path + ".tmp")
    os.replace(path + ".tmp", path)
    print(json.dumps(dict(prepared=path, cached=False, check=check)))
    return 0


def bench(args, np, torch):
    sys.path.insert(0, ZOO_TOOLS)  # the pickled module refers to classes of zoo_models
    import make_zoo  # noqa: E402
    import zoo_models  # noqa: E402

    entry = load_entry(args.zoo, args.model)
    path = cache_path(args.cache, args.model, make_zoo.config_hash(args.model, zoo_models.MODELS[args.model]))
    if not os.path.isfile(path):
        raise SystemExit(f"torch_bench: error: {path} missing; run with --prepare first")
    torch.set_num_threads(args.threads)
    inputs = load_inputs(np, torch, args.zoo, entry)
    rss_before_load = current_rss_bytes()
    t0 = time.perf_counter()
    model = torch.load(path)
    model.eval()
    load_ms = (time.perf_counter() - t0) * 1e3
    times = []
    with torch.inference_mode():
        check = check_outputs(np, args.zoo, entry, model(*inputs))  # also the first warm-up run
        for _ in range(args.warmup - 1):
            model(*inputs)
        for _ in range(args.iters):
            s = time.perf_counter_ns()
            model(*inputs)
            times.append((time.perf_counter_ns() - s) / 1e6)
    s = sorted(times)
    n = len(s)
    median = s[(n - 1) // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    p90 = s[min(n, max(1, -(-90 * n // 100))) - 1]  # nearest rank
    result = dict(engine="torch", version=torch.__version__, model=args.model, threads=args.threads,
                  torch_threads=torch.get_num_threads(), iters=args.iters, warmup=args.warmup,
                  median_ms=median, min_ms=s[0], p90_ms=p90, mean_ms=sum(times) / n, times_ms=times,
                  load_ms=load_ms, peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  rss_before_load_bytes=rss_before_load, arena_bytes=None, kernels=None, check=check,
                  build=build_info(torch))
    print(json.dumps(result))
    return 0 if check["ok"] else 3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cache", default=default_cache_dir(), help="where prepared modules are kept")
    ap.add_argument("--prepare", action="store_true", help="rebuild, verify and cache the module")
    ap.add_argument("--force", action="store_true", help="with --prepare: rebuild even if cached")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if args.threads < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("--threads and --iters must be >= 1, --warmup >= 0")
    import numpy as np
    import torch
    return prepare(args, np, torch) if args.prepare else bench(args, np, torch)


if __name__ == "__main__":
    sys.exit(main())
