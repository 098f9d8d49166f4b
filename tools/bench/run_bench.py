#!/usr/bin/python3
"""opfuse peer comparison harness (not run in CI). See tools/bench/README.md.

For each zoo model, times opfuse (eager and graph mode at each optimization level, through
`opfuse bench ... --json`), ONNX Runtime (onnxruntime-node, graph optimizations 'disabled' and
'all', via ort_bench.mjs) and PyTorch eager (via torch_bench.py). Every measurement is its own
process (warm-up + iterations, reporting its median). Configurations alternate: each round runs
every configuration once, in an order rotated by one each round. A configuration's figure is the
median over rounds of its per-round medians; its ratio to ORT 'all' is computed per round and the
median of those ratios is reported (the machine is shared and slows down in bursts, so only
side-by-side ratios are meaningful).
"""

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_report  # noqa: E402
from bench_configs import Config, probe_configs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REFERENCE = "ort all"


def default_zoo_dir():
    return os.environ.get("OPFUSE_ZOO_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "opfuse", "zoo")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated zoo model names (default: every model of --tier)")
    ap.add_argument("--tier", choices=["tiny", "full"], default="tiny", help="model tier when --models is not given")
    ap.add_argument("--engines", default="opfuse,ort,torch", help="comma-separated subset of opfuse,ort,torch")
    ap.add_argument("--configs", help="comma-separated config names to keep, e.g. 'ort all,opfuse O2' "
                    "(default: all of the chosen engines)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20, help="timed iterations per process")
    ap.add_argument("--warmup", type=int, default=3, help="untimed iterations per process")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before one process is killed")
    ap.add_argument("--zoo", default=default_zoo_dir(), help="zoo folder (default $OPFUSE_ZOO_DIR or "
                    "~/.cache/opfuse/zoo)")
    ap.add_argument("--opfuse", default=os.path.join(REPO, "build", "opfuse"), help="opfuse CLI binary")
    ap.add_argument("--node", default=shutil.which("node") or "node")
    ap.add_argument("--python", default="/usr/bin/python3", help="python with torch, for torch_bench.py")
    ap.add_argument("--ort-no-spin", action="store_true",
                    help="disable ORT's intra-op thread spinning (default: ORT's own default, spinning)")
    ap.add_argument("--tuning-dir", help="folder of tuning records MODEL.json (`opfuse tune`), for the opt-in "
                    "config 'opfuse O3 tuned'")
    ap.add_argument("--core-probe", default=os.path.join(REPO, "build", "opfuse_core_latency"),
                    help="opfuse_core_latency binary, run before and after every process to read how far apart "
                    "the cores are (a guest's vCPUs can move between CCDs mid-run; rounds that straddle a move are "
                    "left out of the ratios); skipped when missing (`ninja -C build opfuse_core_latency`)")
    ap.add_argument("--retry-failed", action="store_true",
                    help="keep running a config in later rounds after it failed (default: skip it)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latest.json"), help="JSON result file")
    ap.add_argument("--markdown", help="markdown file whose '<!-- bench:begin -->' section is regenerated")
    ap.add_argument("--label", help="free text stored with the results and printed above the tables")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    ap.add_argument("--render", metavar="JSON", help="only re-render the markdown of an earlier result file "
                    "(prints it; with --markdown also updates that file)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.threads < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("--rounds, --threads and --iters must be >= 1, --warmup >= 0")
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in args.engines if e not in ("opfuse", "ort", "torch")]
    if bad:
        ap.error(f"unknown engine(s) {bad}")
    args.configs = [c.strip() for c in args.configs.split(",")] if args.configs else None
    return args


def select_models(args, manifest):
    if args.models:
        names = [m.strip() for m in args.models.split(",") if m.strip()]
        unknown = [m for m in names if m not in manifest]
        if unknown:
            sys.exit(f"run_bench: model(s) not in {args.zoo}/manifest.json: {', '.join(unknown)} "
                     f"(generate them with tools/zoo/make_zoo.py)")
        return names
    return [m for m, e in manifest.items() if e.get("tier") == args.tier]


def probe_core_ns(probe):
    """The cache-line round trip between the first two CPUs (ns), or None without a probe binary."""
    if not probe or not os.access(probe, os.X_OK):
        return None
    try:
        p = subprocess.run([probe, "--bounces", "20000", "--first-pair"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r": ([0-9.]+) ns a round trip", p.stdout)
    return float(m.group(1)) if m else None


def run_process(cmd, env, timeout, required=("median_ms", "min_ms")):
    """Runs one measurement process; returns a record with status ok / error / timeout."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return dict(status="timeout", error=f"killed after {timeout:.0f} s", wall_s=round(time.time() - t0, 2),
                    stderr_tail=_tail(e.stderr))
    except OSError as e:
        return dict(status="error", error=f"cannot start: {e}", wall_s=0.0)
    rec = dict(wall_s=round(time.time() - t0, 2), exit_code=p.returncode)
    data = parse_json_object(p.stdout)
    if p.returncode != 0 or data is None:
        if p.returncode < 0:
            why = f"killed by {_signal_name(-p.returncode)}"
        else:
            why = f"exit code {p.returncode}" if p.returncode != 0 else "no JSON object on stdout"
        detail = _last_line(p.stderr) or _last_line(p.stdout)
        rec.update(status="error", error=f"{why}: {detail}" if detail else why,
                   stderr_tail=_tail(p.stderr))
        if data is not None:
            rec["result"] = data
        return rec
    missing = [k for k in required if not isinstance(data.get(k), (int, float))]
    if missing:
        rec.update(status="error", error=f"JSON result lacks {missing}", result=data)
        return rec
    rec.update(status="ok", result=data)
    return rec


def _signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def parse_json_object(text):
    """The one JSON object a bench process prints (tolerates log lines before it)."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        obj = json.loads(text)
        return obj if isinstance(obj, dict) else None
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
                return obj if isinstance(obj, dict) else None
            except ValueError:
                continue
    return None


def _tail(text, n=1500):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return (text or "")[-n:]


def _last_line(text):
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def machine_info():
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return dict(cpu=cpu, cores=os.cpu_count(), usable_cores=len(os.sched_getaffinity(0)), mem_bytes=mem,
                kernel=os.uname().release, hostname=os.uname().nodename)


def git_info():
    def git(*a):
        try:
            return subprocess.run(["git", "-C", REPO, *a], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return dict(commit=git("rev-parse", "HEAD") or None, branch=git("rev-parse", "--abbrev-ref", "HEAD") or None,
                dirty=bool(git("status", "--porcelain", "--untracked-files=no")))


def print_plan(args, models, plans):
    print(f"zoo: {args.zoo}")
    print(f"rounds {args.rounds}, threads {args.threads}, iters {args.iters}, warmup {args.warmup}, "
          f"timeout {args.timeout:.0f} s per process")
    for model in models:
        print(f"\nmodel {model}:")
        for c in plans[model]:
            if c.unavailable:
                print(f"  {c.name:14s} unavailable: {c.unavailable}")
            else:
                print(f"  {c.name:14s} {shlex.join(c.cmd)}")
                if c.prepare:
                    print(f"  {'':14s} (once first: {shlex.join(c.prepare)})")
        runnable = [c.name for c in plans[model] if not c.unavailable]
        for r in range(args.rounds):
            print(f"  round {r + 1}: {' -> '.join(rotate(runnable, r))}")


def rotate(items, r):
    if not items:
        return []
    k = r % len(items)
    return items[k:] + items[:k]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.render:
        with open(args.render) as f:
            text = bench_report.render_markdown(json.load(f))
        print(text)
        if args.markdown:
            bench_report.update_markdown_file(args.markdown, text)
        return 0
    manifest_path = os.path.join(args.zoo, "manifest.json")
    if not os.path.isfile(manifest_path):
        sys.exit(f"run_bench: no {manifest_path}; generate the zoo with /usr/bin/python3 tools/zoo/make_zoo.py")
    with open(manifest_path) as f:
        manifest = json.load(f)
    models = select_models(args, manifest)
    plans = {m: probe_configs(args, m, manifest[m], HERE) for m in models}
    if args.dry_run:
        print_plan(args, models, plans)
        return 0

    started = datetime.datetime.now(datetime.timezone.utc)
    results = dict(
        tool="tools/bench/run_bench.py", format=1,
        command=shlex.join([sys.argv[0]] + (sys.argv[1:] if argv is None else argv)),
        cwd=os.getcwd(), started=started.isoformat(timespec="seconds"), label=args.label,
        settings=dict(rounds=args.rounds, threads=args.threads, iters=args.iters, warmup=args.warmup,
                      timeout_s=args.timeout, zoo=args.zoo, engines=args.engines, ort_no_spin=args.ort_no_spin,
                      reference=REFERENCE),
        machine=machine_info(), opfuse_git=git_info(), load_avg_start=os.getloadavg(), models={})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)

    for model in models:
        configs = plans[model]
        mres = dict(configs={c.name: c.describe() for c in configs}, runs=[])
        results["models"][model] = mres
        for c in configs:  # one-time preparation (torch: rebuild + verify the module)
            if c.unavailable or not c.prepare:
                continue
            print(f"[bench] {model}: preparing {c.name} ...", flush=True)
            rec = run_process(c.prepare, c.env, args.timeout, required=())
            if rec["status"] != "ok":
                c.unavailable = f"preparation failed: {rec.get('error')}"
                mres["configs"][c.name] = c.describe()
                print(f"[bench] {model}: {c.name} unavailable: {c.unavailable}", flush=True)
        failed = {}
        for r in range(args.rounds):
            order = rotate([c for c in configs if not c.unavailable], r)
            for c in order:
                if c.name in failed and not args.retry_failed:
                    mres["runs"].append(dict(round=r, config=c.name, status="skipped",
                                             error=f"failed in round {failed[c.name] + 1}"))
                    continue
                before = probe_core_ns(args.core_probe)
                rec = run_process(c.cmd, c.env, args.timeout)
                after = probe_core_ns(args.core_probe)
                rec.update(round=r, config=c.name)
                if before is not None and after is not None:
                    rec["core_ns"] = [before, after]
                mres["runs"].append(rec)
                if rec["status"] == "ok":
                    res = rec["result"]
                    chk = res.get("check") or {}
                    chk_s = f", check rel {chk['rel_max_abs_diff']:.1e}" if "rel_max_abs_diff" in chk else ""
                    print(f"[bench] {model} round {r + 1}/{args.rounds} {c.name:12s} median "
                          f"{res['median_ms']:9.3f} ms (min {res['min_ms']:.3f}){chk_s}  [{rec['wall_s']} s]",
                          flush=True)
                else:
                    level_msg = c.level_rejection(rec)
                    if level_msg:  # the CLI does not know this level: unavailable, not a failure
                        c.unavailable = level_msg
                        mres["configs"][c.name] = c.describe()
                    failed.setdefault(c.name, r)
                    print(f"[bench] {model} round {r + 1}/{args.rounds} {c.name:12s} {rec['status'].upper()}: "
                          f"{rec.get('error')}", flush=True)
            _save(args.out, results)  # partial results survive an interrupted run
        mres["summary"] = bench_report.summarize(mres, [c.name for c in configs], REFERENCE)
        _save(args.out, results)

    results["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results["load_avg_end"] = os.getloadavg()
    _save(args.out, results)
    print(f"[bench] results: {args.out}", flush=True)
    text = bench_report.render_markdown(results)
    print(text)
    if args.markdown:
        bench_report.update_markdown_file(args.markdown, text)
        print(f"[bench] updated {args.markdown}", flush=True)
    return 0


def _save(path, results):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
