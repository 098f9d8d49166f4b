"""Summaries and the markdown table of run_bench.py results."""

import os
import statistics

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"


def _median(xs):
    return statistics.median(xs) if xs else None


# A cache-line round trip under this many ns: both cores on one CCD (opfuse's Target::near_cores).
NEAR_CORES_NS = 200


def core_state(run):
    """The cores' state around a run: near or far when their distance read the same class before
    and after the process, moved when the guest's vCPUs changed CCDs meanwhile, None unprobed."""
    ns = run.get("core_ns")
    if not ns:
        return None
    states = {"near" if x < NEAR_CORES_NS else "far" for x in ns}
    return states.pop() if len(states) == 1 else "moved"


def summarize(mres, names, reference):
    """Per config: median over rounds of the per-round medians, and the median of per-round ratios.

    Where the runs were probed (run_bench.py --core-probe), a round's ratio counts only when the
    config and the reference ran with the cores in one state: the same plan runs 1.5x slower with
    the vCPUs on two CCDs, so a round straddling a move compares two machines. If no round is left,
    every round counts and the summary says so."""
    ok = {}  # (config, round) -> result
    states = {}  # (config, round) -> core_state
    for run in mres["runs"]:
        if run.get("status") == "ok":
            ok[(run["config"], run["round"])] = run["result"]
            states[(run["config"], run["round"])] = core_state(run)
    summary = {}
    for name in names:
        desc = mres["configs"].get(name, {})
        runs = [r for r in mres["runs"] if r["config"] == name]
        mine = {rnd: res for (cfg, rnd), res in ok.items() if cfg == name}
        s = dict(rounds_ok=len(mine), rounds_run=len([r for r in runs if r.get("status") != "skipped"]))
        if desc.get("unavailable"):
            s["status"] = "unavailable"
            s["reason"] = desc["unavailable"]
        elif not mine:
            s["status"] = "error" if runs else "not run"
            errors = sorted({r.get("error") or r.get("status") for r in runs if r.get("status") != "skipped"})
            s["reason"] = "; ".join(str(e) for e in errors) or None
        else:
            s["status"] = "ok"
            failures = [r for r in runs if r.get("status") not in ("ok", "skipped")]
            if failures:
                s["failures"] = [dict(round=r["round"], status=r["status"], error=r.get("error")) for r in failures]
        if mine:
            res = list(mine.values())
            s["median_ms"] = _median([r["median_ms"] for r in res])
            s["min_ms"] = min(r["min_ms"] for r in res)
            p90 = [r["p90_ms"] for r in res if isinstance(r.get("p90_ms"), (int, float))]
            s["p90_ms"] = _median(p90)
            rss = [r["peak_rss_bytes"] for r in res if isinstance(r.get("peak_rss_bytes"), (int, float))]
            s["peak_rss_bytes"] = max(rss) if rss else None
            for key in ("arena_bytes", "kernels"):
                vals = [r.get(key) for r in res if r.get(key) is not None]
                s[key] = vals[-1] if vals else None
            # How far apart opfuse measured the cores in each process: a guest's vCPUs can move
            # between CCDs mid-benchmark, which changes both the times and opfuse's thread choices.
            distance = [r["core_round_trip_ns"] for r in res if r.get("core_round_trip_ns")]
            if distance:
                s["core_round_trip_ns"] = [min(distance), max(distance)]
            checks = [r["check"]["rel_max_abs_diff"] for r in res
                      if isinstance(r.get("check"), dict) and r["check"].get("rel_max_abs_diff") is not None]
            if checks:
                s["check_rel_max_abs_diff"] = max(checks)
                s["check_ok"] = all(r["check"].get("ok", True) for r in res if isinstance(r.get("check"), dict))
            ratios, straddled = [], []
            for rnd, r in sorted(mine.items()):
                ref = ok.get((reference, rnd))
                if ref and ref["median_ms"] > 0:
                    ratio = r["median_ms"] / ref["median_ms"]
                    a, b = states.get((name, rnd)), states.get((reference, rnd))
                    if name == reference or a is None or b is None or (a == b and a != "moved"):
                        ratios.append(ratio)
                    else:
                        straddled.append(ratio)
            if straddled:
                s["ratio_rounds_straddled"] = len(straddled)
                if not ratios:
                    ratios = straddled
                    s["ratio_states_mixed"] = True
            known = sorted({st for (cfg, _), st in states.items() if cfg == name and st})
            if known:
                s["core_states"] = known
            if ratios:
                s["ratio_to_ref_per_round"] = ratios
                s["ratio_to_ref"] = _median(ratios)
                s["ratio_to_ref_min"] = min(ratios)
                s["ratio_to_ref_max"] = max(ratios)
        summary[name] = s
    return summary


def _fmt_ms(x):
    if x is None:
        return "–"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def _fmt_kernels(k):
    if k is None:
        return "–"
    if isinstance(k, (int, float)):
        return str(k)
    if isinstance(k, (list, dict)):
        return str(len(k))
    return str(k)


def _esc(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(results):
    st = results["settings"]
    m = results["machine"]
    g = results.get("opfuse_git") or {}
    lines = []
    if results.get("label"):
        lines += [f"**{_esc(results['label'])}**", ""]
    commit = (g.get("commit") or "?")[:12] + (" (dirty)" if g.get("dirty") else "")
    lines += [
        f"- Date: {results['started']} (UTC), finished {results.get('finished', '?')}",
        f"- CPU: {m.get('cpu')}, {m.get('cores')} cores; load average at start "
        f"{', '.join(f'{x:.2f}' for x in results.get('load_avg_start') or [])}",
        f"- Threads: {st['threads']}; {st['rounds']} rounds x (warm-up {st['warmup']} + {st['iters']} timed "
        f"iterations per process); configurations alternate, order rotated each round",
        f"- opfuse commit: {commit}",
        f"- Command: `{results['command']}`",
        "",
        f"median ms = median over rounds of each process's median; ratio = median over rounds of "
        f"(config median / {st['reference']} median of the same round), lower is faster; "
        f"peak RSS = max over rounds of the process's peak resident memory (includes the runtime "
        f"itself: Node.js, Python + torch); check = max|out - ref| / max|ref| against the zoo reference.",
        "",
    ]
    for model, mres in results["models"].items():
        summary = mres.get("summary")
        if summary is None:
            continue
        lines += [f"#### {model}", "", "| config | median ms | ratio to ORT all | peak RSS MB | kernels | notes |",
                  "| --- | ---: | ---: | ---: | ---: | --- |"]
        items = list(summary.items())
        i = 0
        while i < len(items):
            name, s = items[i]
            i += 1
            if s["status"] in ("unavailable", "error", "not run") and "median_ms" not in s:
                # Consecutive configs that are out for the same reason share one row.
                names = [name]
                while (i < len(items) and "median_ms" not in items[i][1] and items[i][1]["status"] == s["status"]
                       and items[i][1].get("reason") == s.get("reason")):
                    names.append(items[i][0])
                    i += 1
                lines.append(f"| {', '.join(names)} | – | – | – | – | {s['status']}: {_esc(s.get('reason'))} |")
                continue
            notes = []
            if "ratio_to_ref" in s and s["rounds_ok"] > 1 and name != results["settings"]["reference"]:
                notes.append(f"ratio range {s['ratio_to_ref_min']:.2f}–{s['ratio_to_ref_max']:.2f}")
            notes.append(f"{s['rounds_ok']}/{s['rounds_run']} rounds ok")
            notes.append(f"min {_fmt_ms(s.get('min_ms'))} ms")
            if "check_rel_max_abs_diff" in s:
                notes.append(f"check {s['check_rel_max_abs_diff']:.1e}" + ("" if s.get("check_ok") else " FAILED"))
            if s.get("arena_bytes") is not None:
                notes.append(f"arena {s['arena_bytes'] / 2**20:.1f} MB")
            if s.get("ratio_rounds_straddled"):
                notes.append(f"{s['ratio_rounds_straddled']} round(s) straddling a move of the vCPUs between "
                             + ("CCDs: every round counted" if s.get("ratio_states_mixed") else "CCDs left out"))
            if s.get("core_states"):
                notes.append("cores " + "/".join(s["core_states"]))
            if s.get("core_round_trip_ns"):
                lo, hi = s["core_round_trip_ns"]
                notes.append(f"opfuse read {lo:.0f}" + (f"–{hi:.0f}" if round(hi) != round(lo) else "") + " ns")
            if s.get("failures"):
                notes.append(f"{len(s['failures'])} failed: {_esc(s['failures'][0]['error'])}")
            ratio = f"{s['ratio_to_ref']:.2f}" if "ratio_to_ref" in s else "–"
            rss = f"{s['peak_rss_bytes'] / 2**20:.0f}" if s.get("peak_rss_bytes") else "–"
            lines.append(f"| {name} | {_fmt_ms(s.get('median_ms'))} | {ratio} | {rss} | "
                         f"{_fmt_kernels(s.get('kernels'))} | {'; '.join(notes)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def update_markdown_file(path, text):
    """Replaces what is between the bench markers, keeping the prose around it."""
    block = f"{BEGIN}\n<!-- generated by tools/bench/run_bench.py; edits inside these markers are lost -->\n\n" \
            f"{text}\n{END}"
    if os.path.isfile(path):
        with open(path) as f:
            doc = f.read()
    else:
        doc = "# Benchmarks\n\n"
    b = doc.find(BEGIN)
    e = doc.find(END, b + len(BEGIN)) if b >= 0 else -1
    if b >= 0 and e >= 0:
        doc = doc[:b] + block + doc[e + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(doc)
    os.replace(tmp, path)
