"""The package runs models exactly as the CLI does: `opfuse run --level O3 --input ... --output-dir`
on the same inputs gives the same arrays, for CNNs and transformers of the tiny zoo."""

import subprocess

import numpy as np
import pytest

import opfuse

from conftest import relative_error


def cli_outputs(cli, model, inputs, out_dir):
    args = [cli, "run", model.path, "--level", "O3", "--output-dir", str(out_dir)]
    for name, array in inputs.items():
        path = out_dir / f"in_{name}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return out_dir


# Two CNNs (plain convs with residuals; depthwise with squeeze-excitation) and two transformers
# (float embeddings with a symbolic batch and an int64 mask; token ids through a Gather).
@pytest.mark.parametrize("name", ["resnet_tiny", "mobilenet_v3_large_tiny", "bert_tiny", "bert_tiny_ids"])
def test_outputs_equal_opfuse_run(zoo, cli, tmp_path, name):
    model = zoo(name)
    session = opfuse.InferenceSession(model.path)
    assert session.level == "O3"
    got = session.run(None, model.inputs)
    out_dir = cli_outputs(cli, model, model.inputs, tmp_path)
    assert len(got) == len(session.get_outputs())
    for output, array in zip(session.get_outputs(), got):
        want = np.load(out_dir / f"{output.name}.npy")
        assert array.dtype == want.dtype and array.shape == want.shape, output.name
        # Same plan, same kernels, same thread count: the same bits.
        np.testing.assert_array_equal(array, want, err_msg=f"{name} output {output.name}")
        # And both agree with PyTorch, the zoo's reference.
        assert relative_error(array, model.outputs[output.name]) <= model.tolerance


def test_a_batch_of_two_matches_the_cli(zoo, cli, tmp_path):
    """bert_tiny's batch is symbolic: a new batch size compiles a new plan, as in the CLI."""
    model = zoo("bert_tiny")
    inputs = {name: np.concatenate([a, a[:, ::-1]]) for name, a in model.inputs.items()}
    got = opfuse.InferenceSession(model.path).run(["output"], inputs)[0]
    want = np.load(cli_outputs(cli, model, inputs, tmp_path) / "output.npy")
    assert got.shape[0] == 2
    np.testing.assert_array_equal(got, want)
