"""The configurations run_bench.py times, and how each is found to be available or not."""

import functools
import json
import os
import re
import subprocess

OPFUSE_LEVELS = ["O0", "O1", "O2", "O3"]


class Config:
    def __init__(self, name, engine, cmd=None, env=None, prepare=None, unavailable=None, level=None, info=None,
                 opt_in=False):
        self.name = name
        # Run only when --configs names it (a variant of a default config, not a peer of it).
        self.opt_in = opt_in
        self.engine = engine
        self.cmd = cmd or []
        self.env = env
        self.prepare = prepare
        self.unavailable = unavailable
        self.level = level
        self.info = info or {}

    def describe(self):
        d = dict(engine=self.engine, command=self.cmd, unavailable=self.unavailable)
        if self.prepare:
            d["prepare"] = self.prepare
        if self.level:
            d["level"] = self.level
        d.update(self.info)
        return d

    def level_rejection(self, rec):
        """For an opfuse graph-mode run that failed: the 'unavailable' text if the CLI rejected the level."""
        if self.engine != "opfuse" or not self.level or rec.get("exit_code") not in (1, 105, 106, 109):
            return None  # 1: user error; 105/106/109: CLI11 validation / extras / conversion errors
        text = (rec.get("stderr_tail") or "") + (rec.get("error") or "")
        if re.search(rf"\b{self.level}\b", text) or "--level" in text:
            return f"level {self.level} not supported ({_last(text)})"
        return None


def _last(text):
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def _env(threads, openmp, wait_policy=None):
    env = dict(os.environ)
    if openmp:
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
        # opfuse picks its own OpenMP waits (bounded spinning, tools/opfuse/main.cc), as ORT's
        # pool spins by default; torch's idle workers are told not to spin.
        env.pop("OMP_WAIT_POLICY", None)
        env.pop("GOMP_SPINCOUNT", None)
        if wait_policy:
            env["OMP_WAIT_POLICY"] = wait_policy
    return env


@functools.lru_cache(maxsize=None)
def probe_opfuse(binary):
    """What `opfuse bench` offers: (reason unavailable or None, help text, supported levels)."""
    if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        return (f"no opfuse binary at {binary} (build: cmake -S . -B build -G Ninja && ninja -C build -j2)",
                "", ())
    try:
        p = subprocess.run([binary, "bench", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return (f"`opfuse bench --help` failed: {e}", "", ())
    text = p.stdout or ""
    if p.returncode != 0:
        return (f"opfuse has no 'bench' command (`opfuse bench --help` exit {p.returncode}: {_last(text)})", text, ())
    if "--mode" not in text:
        return ("opfuse has no 'bench' command (`opfuse bench --help` does not describe --mode)", text, ())
    levels = tuple(lv for lv in OPFUSE_LEVELS if re.search(rf"\b{lv}\b", text))
    return (None, text, levels)


def opfuse_configs(args, model, entry):
    reason, help_text, levels = probe_opfuse(os.path.abspath(args.opfuse))
    names = ["opfuse eager"] + [f"opfuse {lv}" for lv in OPFUSE_LEVELS]
    if reason:
        return [Config(n, "opfuse", unavailable=reason, level=n.split()[1] if "eager" not in n else None)
                for n in names]
    onnx_path = os.path.join(args.zoo, entry["file"])
    common = []
    if "--input" in help_text:
        for io in entry["inputs"]:
            common += ["--input", f"{io['name']}={os.path.join(args.zoo, io['file'])}"]
    for flag, value in (("--threads", args.threads), ("--iters", args.iters), ("--warmup", args.warmup)):
        if flag in help_text:
            common += [flag, str(value)]
    if "--json" in help_text:
        common.append("--json")
    env = _env(args.threads, openmp=True)
    out = [Config("opfuse eager", "opfuse", [args.opfuse, "bench", onnx_path, "--mode", "eager"] + common, env)]
    for lv in OPFUSE_LEVELS:
        name = f"opfuse {lv}"
        if levels and lv not in levels:
            out.append(Config(name, "opfuse", unavailable=f"level {lv} not supported (not listed by "
                              f"`opfuse bench --help`)", level=lv))
            continue
        cmd = [args.opfuse, "bench", onnx_path, "--mode", "graph", "--level", lv] + common
        out.append(Config(name, "opfuse", cmd, env, level=lv))
    if "--flush-denormals" in help_text and (not levels or "O3" in levels):
        # O3 with denormals flushed to zero at run time, the peer of "ort all daz".
        cmd = [args.opfuse, "bench", onnx_path, "--mode", "graph", "--level", "O3", "--flush-denormals"] + common
        out.append(Config("opfuse O3 ftz", "opfuse", cmd, env, level="O3", opt_in=True))
    # O3 with the model's tuning record (`opfuse tune`), the check that tuning does not lose.
    record = os.path.join(args.tuning_dir, f"{model}.json") if args.tuning_dir else None
    if record and os.path.isfile(record) and "--tuning" in help_text:
        cmd = [args.opfuse, "bench", onnx_path, "--mode", "graph", "--level", "O3", "--tuning", record] + common
        out.append(Config("opfuse O3 tuned", "opfuse", cmd, env, level="O3", opt_in=True))
    else:
        why = (f"no tuning record {record}" if record else "no --tuning-dir") if "--tuning" in help_text else \
            "`opfuse bench --help` has no --tuning"
        out.append(Config("opfuse O3 tuned", "opfuse", unavailable=why, level="O3", opt_in=True))
    return out


@functools.lru_cache(maxsize=None)
def probe_ort(node, here):
    pkg = os.path.join(here, "node_modules", "onnxruntime-node", "package.json")
    if not os.path.isfile(pkg):
        return "onnxruntime-node is not installed (run tools/bench/install-ort.sh)", None
    try:
        subprocess.run([node, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        return f"cannot run node ({node}): {e}", None
    with open(pkg) as f:
        return None, json.load(f).get("version")


def ort_configs(args, model, here):
    reason, version = probe_ort(args.node, here)
    out = []
    # "ort all daz": ORT's session.set_denormal_as_zero, which it leaves off by default.
    for name, opt, daz in (("ort disabled", "disabled", False), ("ort all", "all", False), ("ort all daz", "all", True)):
        if reason:
            out.append(Config(name, "ort", unavailable=reason, opt_in=daz))
            continue
        cmd = [args.node, os.path.join(here, "ort_bench.mjs"), "--zoo", args.zoo, "--model", model, "--opt", opt,
               "--threads", str(args.threads), "--iters", str(args.iters), "--warmup", str(args.warmup)]
        if args.ort_no_spin:
            cmd += ["--allow-spinning", "0"]
        if daz:
            cmd += ["--denormal-as-zero", "1"]
        out.append(Config(name, "ort", cmd, _env(args.threads, openmp=False), info=dict(version=version), opt_in=daz))
    return out


def torch_configs(args, model, here):
    if not os.path.isfile(args.python):
        return [Config("torch eager", "torch", unavailable=f"no python at {args.python}")]
    script = os.path.join(here, "torch_bench.py")
    base = [args.python, script, "--zoo", args.zoo, "--model", model]
    cmd = base + ["--threads", str(args.threads), "--iters", str(args.iters), "--warmup", str(args.warmup)]
    return [Config("torch eager", "torch", cmd, _env(args.threads, openmp=True, wait_policy="passive"),
                   prepare=base + ["--prepare"])]


def probe_configs(args, model, entry, here):
    configs = []
    if "opfuse" in args.engines:
        configs += opfuse_configs(args, model, entry)
    if "ort" in args.engines:
        configs += ort_configs(args, model, here)
    if "torch" in args.engines:
        configs += torch_configs(args, model, here)
    if args.configs:
        configs = [c for c in configs if c.name in args.configs]
    else:
        configs = [c for c in configs if not c.opt_in]
    return configs
