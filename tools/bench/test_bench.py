#!/usr/bin/python3
"""Self-test of the harness logic (no timing): `/usr/bin/python3 tools/bench/test_bench.py`.

Covers the per-round ratio arithmetic, the marked-section rewrite of the markdown file, JSON
extraction from a process's stdout, the opfuse level-rejection rule, which configs run by default
(not the opt-in variants), and ort_bench.mjs's .npy reader against files written by numpy
(skipped when node is missing).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_report  # noqa: E402
import run_bench  # noqa: E402
from bench_configs import Config, probe_configs  # noqa: E402


def _run(rnd, config, median, status="ok"):
    if status != "ok":
        return dict(round=rnd, config=config, status=status, error="boom")
    return dict(round=rnd, config=config, status="ok",
                result=dict(median_ms=median, min_ms=median / 2, p90_ms=median * 1.1, peak_rss_bytes=100 << 20,
                            kernels=None))


class SummaryTest(unittest.TestCase):
    def test_ratio_is_median_of_per_round_ratios(self):
        # A: 2, 4, 3 ms; ORT all: 1, 4, 1 ms. Per-round ratios 2, 1, 3 -> median 2, whereas the
        # ratio of the medians would be 3 / 1 = 3.
        runs = [_run(0, "a", 2), _run(0, "ort all", 1), _run(1, "a", 4), _run(1, "ort all", 4),
                _run(2, "a", 3), _run(2, "ort all", 1)]
        s = bench_report.summarize(dict(configs={"a": {}, "ort all": {}}, runs=runs), ["a", "ort all"], "ort all")
        self.assertEqual(s["a"]["median_ms"], 3)
        self.assertEqual(s["a"]["ratio_to_ref"], 2)
        self.assertEqual(s["a"]["ratio_to_ref_per_round"], [2, 1, 3])
        self.assertEqual((s["a"]["ratio_to_ref_min"], s["a"]["ratio_to_ref_max"]), (1, 3))
        self.assertEqual(s["a"]["min_ms"], 1)
        self.assertEqual(s["ort all"]["ratio_to_ref"], 1)

    def test_round_without_reference_gives_no_ratio_and_failures_are_kept(self):
        runs = [_run(0, "a", 2), _run(0, "ort all", 0, status="timeout"), _run(1, "a", 6), _run(1, "ort all", 3),
                _run(0, "b", 0, status="error")]
        s = bench_report.summarize(dict(configs={"a": {}, "ort all": {}, "b": {}}, runs=runs),
                                   ["a", "ort all", "b"], "ort all")
        self.assertEqual(s["a"]["ratio_to_ref_per_round"], [2])
        self.assertEqual(s["a"]["median_ms"], 4)
        self.assertEqual(s["ort all"]["rounds_ok"], 1)
        self.assertEqual(s["ort all"]["failures"][0]["status"], "timeout")
        self.assertEqual(s["b"]["status"], "error")
        self.assertNotIn("median_ms", s["b"])

    def test_core_distance_range_over_rounds_is_kept_and_rendered(self):
        runs = [_run(0, "a", 2), _run(1, "a", 2), _run(2, "a", 2), _run(0, "ort all", 1)]
        for r, ns in zip(runs, (52.4, 331.0, 55.0)):
            r["result"]["core_round_trip_ns"] = ns
        s = bench_report.summarize(dict(configs={"a": {}, "ort all": {}}, runs=runs), ["a", "ort all"], "ort all")
        self.assertEqual(s["a"]["core_round_trip_ns"], [52.4, 331.0])
        self.assertNotIn("core_round_trip_ns", s["ort all"])
        results = dict(settings=dict(threads=2, rounds=3, warmup=1, iters=5, reference="ort all"),
                       machine=dict(cpu="x", cores=2), started="now", command="c",
                       models={"m": dict(summary=s)})
        self.assertIn("opfuse read 52–331 ns", bench_report.render_markdown(results))

    def test_rounds_straddling_a_move_between_ccds_are_left_out_of_the_ratio(self):
        # Round 0: both near (ratio 0.5); round 1: a far, the reference near (2.0); round 2: the
        # reference's vCPUs moved during its run (3.0). Only round 0 counts.
        runs = [_run(0, "a", 1), _run(0, "ort all", 2), _run(1, "a", 4), _run(1, "ort all", 2),
                _run(2, "a", 6), _run(2, "ort all", 2)]
        for r, ns in zip(runs, ([50, 55], [52, 60], [320, 330], [51, 50], [55, 52], [53, 325])):
            r["core_ns"] = ns
        self.assertEqual([bench_report.core_state(r) for r in runs], ["near", "near", "far", "near", "near", "moved"])
        s = bench_report.summarize(dict(configs={"a": {}, "ort all": {}}, runs=runs), ["a", "ort all"], "ort all")
        self.assertEqual(s["a"]["ratio_to_ref_per_round"], [0.5])
        self.assertEqual(s["a"]["ratio_rounds_straddled"], 2)
        self.assertNotIn("ratio_states_mixed", s["a"])
        self.assertEqual(s["a"]["core_states"], ["far", "near"])
        self.assertEqual(s["a"]["median_ms"], 4, "times keep every round")
        self.assertNotIn("ratio_rounds_straddled", s["ort all"], "the reference against itself")
        # No round in one state: every round counts, and the summary says so.
        for r in runs[:2]:
            r["core_ns"] = [330, 335]
        runs[1]["core_ns"] = [50, 50]
        s = bench_report.summarize(dict(configs={"a": {}, "ort all": {}}, runs=runs), ["a", "ort all"], "ort all")
        self.assertEqual(s["a"]["ratio_to_ref_per_round"], [0.5, 2.0, 3.0])
        self.assertTrue(s["a"]["ratio_states_mixed"])
        # Unprobed runs (no core_ns) count as before.
        plain = [_run(0, "a", 1), _run(0, "ort all", 2)]
        s = bench_report.summarize(dict(configs={"a": {}, "ort all": {}}, runs=plain), ["a", "ort all"], "ort all")
        self.assertEqual(s["a"]["ratio_to_ref_per_round"], [0.5])
        self.assertNotIn("ratio_rounds_straddled", s["a"])

    def test_unavailable_config(self):
        s = bench_report.summarize(dict(configs={"x": {"unavailable": "no bench command"}}, runs=[]), ["x"],
                                   "ort all")
        self.assertEqual(s["x"], dict(rounds_ok=0, rounds_run=0, status="unavailable", reason="no bench command"))


class ConfigSelectionTest(unittest.TestCase):
    def _names(self, configs):
        # ORT's package cannot be found under a made-up directory: its configs are unavailable but
        # still listed, which is all the selection needs.
        args = type("Args", (), dict(engines=["ort"], configs=configs, node="node", zoo="/nonexistent", threads=2,
                                     iters=1, warmup=0, ort_no_spin=False))()
        return [c.name for c in probe_configs(args, "m", {}, "/nonexistent")]

    def test_opt_in_configs_run_only_when_named(self):
        self.assertEqual(self._names(None), ["ort disabled", "ort all"])
        self.assertEqual(self._names(["ort all", "ort all daz"]), ["ort all", "ort all daz"])

    def test_tuned_config_reads_the_models_record(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        fake = os.path.join(tmp, "opfuse")  # a CLI whose bench offers levels and --tuning
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'bench --mode --level O0 O1 O2 O3 --json --tuning'\n")
        os.chmod(fake, 0o755)
        records = os.path.join(tmp, "records")
        os.mkdir(records)
        open(os.path.join(records, "m.json"), "w").close()

        def tuned(model, tuning_dir):
            args = type("Args", (), dict(engines=["opfuse"], configs=["opfuse O3 tuned"], opfuse=fake, zoo=tmp,
                                         threads=2, iters=1, warmup=0, tuning_dir=tuning_dir))()
            [config] = probe_configs(args, model, dict(file=f"{model}.onnx", inputs=[]), tmp)
            return config

        config = tuned("m", records)
        self.assertIsNone(config.unavailable)
        self.assertEqual(config.cmd[config.cmd.index("--tuning") + 1], os.path.join(records, "m.json"))
        self.assertIn("no tuning record", tuned("other", records).unavailable)
        self.assertIn("no --tuning-dir", tuned("m", None).unavailable)


class MarkdownFileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "b.md")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_replaces_only_the_marked_section(self):
        with open(self.path, "w") as f:
            f.write("# Title\n\nprose before\n\n<!-- bench:begin -->\nold table\n<!-- bench:end -->\n\nprose after\n")
        bench_report.update_markdown_file(self.path, "new table\n")
        doc = open(self.path).read()
        self.assertTrue(doc.startswith("# Title\n\nprose before\n\n<!-- bench:begin -->\n"))
        self.assertTrue(doc.endswith("new table\n\n<!-- bench:end -->\n\nprose after\n"))
        self.assertNotIn("old table", doc)
        bench_report.update_markdown_file(self.path, "newer\n")  # idempotent structure
        doc = open(self.path).read()
        self.assertEqual(doc.count("<!-- bench:begin -->"), 1)
        self.assertNotIn("new table", doc)

    def test_appends_markers_when_missing(self):
        with open(self.path, "w") as f:
            f.write("just prose\n")
        bench_report.update_markdown_file(self.path, "t\n")
        doc = open(self.path).read()
        self.assertTrue(doc.startswith("just prose\n\n<!-- bench:begin -->"))
        self.assertTrue(doc.endswith("t\n\n<!-- bench:end -->\n"))


class ProcessOutputTest(unittest.TestCase):
    def test_json_after_log_lines(self):
        self.assertEqual(run_bench.parse_json_object('loading\n{"median_ms": 1.5}\n'), {"median_ms": 1.5})
        self.assertEqual(run_bench.parse_json_object('{"a": 1,\n "b": 2}'), {"a": 1, "b": 2})
        self.assertIsNone(run_bench.parse_json_object("no json here\n"))
        self.assertIsNone(run_bench.parse_json_object("[1, 2]"))

    def test_run_process_statuses(self):
        py = sys.executable
        ok = run_bench.run_process([py, "-c", 'print("x"); print(\'{"median_ms": 2, "min_ms": 1}\')'], None, 30)
        self.assertEqual((ok["status"], ok["result"]["median_ms"]), ("ok", 2))
        bad = run_bench.run_process([py, "-c", 'import sys; sys.stderr.write("bad model\\n"); sys.exit(1)'],
                                    None, 30)
        self.assertEqual((bad["status"], bad["error"]), ("error", "exit code 1: bad model"))
        seg = run_bench.run_process([py, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], None, 30)
        self.assertEqual((seg["status"], seg["error"]), ("error", "killed by SIGSEGV"))
        slow = run_bench.run_process([py, "-c", "import time; time.sleep(30)"], None, 0.5)
        self.assertEqual(slow["status"], "timeout")
        lacking = run_bench.run_process([py, "-c", 'print(\'{"p90_ms": 1}\')'], None, 30)
        self.assertEqual(lacking["status"], "error")

    def test_level_rejection(self):
        c = Config("opfuse O2", "opfuse", ["x"], level="O2")
        self.assertIn("level O2 not supported",
                      c.level_rejection(dict(exit_code=1, stderr_tail="error: --level: O2 not in {O0,O1}")))
        self.assertIsNone(c.level_rejection(dict(exit_code=1, stderr_tail="node Conv_3: bad shape")))
        self.assertIsNone(c.level_rejection(dict(exit_code=2, stderr_tail="internal error at O2")))


@unittest.skipUnless(shutil.which("node"), "node is not installed")
class NpyReaderTest(unittest.TestCase):
    def test_matches_numpy(self):
        import numpy as np
        d = tempfile.mkdtemp()
        try:
            arrays = dict(f=np.array([[1.5, -2.25, 0.1]], dtype=np.float32),
                          i=np.array([0, -1, 2**40], dtype=np.int64),
                          b=np.array([True, False, True]), s=np.array(7.0, dtype=np.float64))
            for k, a in arrays.items():
                np.save(os.path.join(d, k + ".npy"), a)
            script = ("import { readNpy } from %s;\n"
                      "const out = {};\n"
                      "for (const k of ['f', 'i', 'b', 's']) {\n"
                      "  const a = readNpy(%s + '/' + k + '.npy');\n"
                      "  out[k] = { dtype: a.dtype, shape: a.shape, data: Array.from(a.data, String) };\n"
                      "}\n"
                      "console.log(JSON.stringify(out));\n") % (
                json.dumps("file://" + os.path.join(HERE, "ort_bench.mjs")), json.dumps(d))
            p = subprocess.run(["node", "--input-type=module", "-e", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = json.loads(p.stdout)
            self.assertEqual(got["f"], dict(dtype="float32", shape=[1, 3], data=["1.5", "-2.25", str(np.float32(0.1).item())]))
            self.assertEqual(got["i"], dict(dtype="int64", shape=[3], data=["0", "-1", str(2**40)]))
            self.assertEqual(got["b"], dict(dtype="bool", shape=[3], data=["1", "0", "1"]))
            self.assertEqual(got["s"], dict(dtype="float64", shape=[], data=["7"]))
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
