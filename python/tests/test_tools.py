"""report(), profile(), validate() and save_optimized(): the CLI's report, profile, validate and
optimize commands as methods, and the fusion config as a dict."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import opfuse

from conftest import relative_error


def test_report_is_the_cli_report(resnet, cli):
    model, session = resnet
    report = session.report()
    done = subprocess.run([cli, "report", model.path, "--level", "O3", "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert report == json.loads(done.stdout)
    assert report["level"] == "O3"
    applied = {r["name"]: r["applied"] for r in report["rules"]}
    assert applied["fold_batchnorm"] > 0
    assert report["totals"]["kernels_after"] < report["totals"]["kernels_before"]


def test_a_fusion_dict_switches_rules_off(resnet):
    model, _ = resnet
    session = opfuse.InferenceSession(model.path, fusion={"disable": ["fold_batchnorm"], "level": "O2"})
    assert session.level == "O2"  # the config's level, since level= was not given
    report = session.report()
    assert report["config"]["disable"] == ["fold_batchnorm"]
    assert {r["name"]: r["applied"] for r in report["rules"]}.get("fold_batchnorm", 0) == 0
    out = session.run(None, model.inputs)[0]
    assert relative_error(out, model.outputs["logits"]) <= model.tolerance


def test_profile_times_every_kernel(resnet, bert):
    _, session = resnet
    profile = session.profile(3)
    assert profile["level"] == "O3" and profile["runs"] == 3
    assert profile["steps"] and all(s["kernel"] and s["mean_us"] >= 0 for s in profile["steps"])
    assert sum(k["percent"] for k in profile["kernels"]) == pytest.approx(100, abs=0.5)
    assert 0 <= profile["small_op_share"] <= 1
    # Given inputs, and a model with a symbolic dim (bound by the inputs).
    model, session = bert
    assert session.profile(1, model.inputs, warmup=0)["steps"]
    with pytest.raises(opfuse.InvalidArgument, match=r"n \(timed runs\) must be 1 or more, given 0"):
        session.profile(0)


def test_validate_compares_with_eager(resnet, bert):
    model, session = resnet
    result = session.validate()
    assert result["ok"] and result["level"] == "O3"
    assert [o["name"] for o in result["outputs"]] == ["logits"]
    assert result["max_abs"] < 1e-3
    # ResNet is well conditioned: the rounding floor keeps the default rtol at 1e-4.
    assert 0 < result["sensitivity"] < 1e-5 and result["rtol"] == 1e-4
    assert session.validate(model.inputs, level="O1")["level"] == "O1"
    # A tolerance of zero, on random inputs that fusion rounds differently, fails.
    strict = session.validate(rtol=0, atol=0)
    assert strict["ok"] == (strict["max_abs"] == 0)
    assert strict["rtol"] == 0 and "sensitivity" not in strict
    model, session = bert
    assert session.validate(model.inputs)["ok"]


def test_save_optimized_writes_a_model_opfuse_loads(resnet, tmp_path):
    model, session = resnet
    path = tmp_path / "resnet.opt.onnx"
    summary = session.save_optimized(path)
    assert summary["nodes_after"] < summary["nodes_before"]
    assert path.stat().st_size == summary["bytes"]
    reloaded = opfuse.InferenceSession(path)
    want = session.run(None, model.inputs)[0]
    np.testing.assert_allclose(reloaded.run(None, model.inputs)[0], want, rtol=1e-4, atol=1e-5)

    before = path.read_bytes()
    with pytest.raises(opfuse.InvalidArgument, match=f"'{path}' exists; pass force=True to overwrite it"):
        session.save_optimized(path)
    assert path.read_bytes() == before
    standard = session.save_optimized(path, force=True, standard_only=True)
    assert path.read_bytes() != before and standard["bytes"] == path.stat().st_size
    np.testing.assert_allclose(opfuse.InferenceSession(path).run(None, model.inputs)[0], want, rtol=1e-4, atol=1e-5)


TARGET_SCRIPT = """
import sys, numpy as np, opfuse
path, x = sys.argv[1], np.load(sys.argv[2])
out = opfuse.InferenceSession(path, target="avx2").run(None, {"input": x})[0]
assert opfuse.target_info()["isa"] == "avx2"
assert opfuse.InferenceSession(path).level == "O3"  # the default: the tier already chosen
try:
    opfuse.InferenceSession(path, target="sse41")
    raise SystemExit("a second tier was accepted")
except opfuse.InvalidArgument as e:
    print(e)
np.save(sys.argv[3], out)
"""


def test_a_target_tier_is_chosen_once_per_process(resnet, tmp_path):
    """target= caps the kernels to a tier (here AVX2) for the whole process, as --target does;
    run in a child process, since this one has its tier already."""
    model, session = resnet
    if "avx2" not in opfuse.target_info()["available_isas"]:
        pytest.skip("this CPU has no AVX2")
    np.save(tmp_path / "x.npy", model.inputs["input"])
    done = subprocess.run(
        [sys.executable, "-c", TARGET_SCRIPT, model.path, str(tmp_path / "x.npy"), str(tmp_path / "out.npy")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the target is chosen once per process and is already avx2; cannot switch to sse41" in done.stdout
    got = np.load(tmp_path / "out.npy")
    assert relative_error(got, model.outputs["logits"]) <= model.tolerance


def test_the_cores_distance_can_be_fixed_by_the_environment():
    """OPFUSE_CORE_ROUND_TRIP_NS replaces the measurement (a far host reproduced on a near one); a
    value that is not a number of nanoseconds is ignored with a warning. Child processes: the
    target is detected once per process."""
    def child(value):
        env = dict(os.environ, OPFUSE_CORE_ROUND_TRIP_NS=value)
        done = subprocess.run(
            [sys.executable, "-c", "import opfuse; i = opfuse.target_info(); print(i['core_round_trip_ns'], i['near_cores'])"],
            capture_output=True, text=True, timeout=60, env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        ns, near = done.stdout.split()
        return float(ns), near == "True", done.stderr

    assert child("470")[:2] == (470.0, False)
    assert child("55")[:2] == (55.0, True)
    ns, near, err = child("fast")
    assert "ignoring OPFUSE_CORE_ROUND_TRIP_NS=fast" in err
    assert ns >= 0 and near == (0 < ns < 200)
