"""Fixtures for the `opfuse serve` tests: a model repository built from the tiny zoo, and a real
server process on a free loopback port, driven with a real HTTP client (http.client)."""
import http.client
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

CLI = os.environ.get("OPFUSE_CLI", str(pathlib.Path(__file__).resolve().parents[2] / "build" / "opfuse"))
ZOO = pathlib.Path(os.environ.get("OPFUSE_ZOO_DIR", pathlib.Path.home() / ".cache" / "opfuse" / "zoo"))


def zoo_model(name):
    path = ZOO / f"{name}.onnx"
    if not path.exists():
        pytest.fail(f"{path} is missing: generate the tiny zoo (tools/zoo/make_zoo.py --tiny)")
    return path


def add_model(repo, name, zoo_name, versions=(1,), config=None):
    for v in versions:
        d = repo / name / str(v)
        d.mkdir(parents=True)
        shutil.copy(zoo_model(zoo_name), d / "model.onnx")
    if config is not None:
        (repo / name / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))


class Server:
    def __init__(self, repo, *extra):
        env = dict(os.environ, OMP_WAIT_POLICY="passive")
        self.proc = subprocess.Popen([CLI, "serve", "--model-repository", str(repo), "--port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.strip().rsplit(":", 1)[1])

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            ctype = resp.getheader("Content-Type", "")
            header_length = resp.getheader("Inference-Header-Content-Length")
            if header_length is not None:  # binary data extension: JSON header, then raw bytes
                n = int(header_length)
                return resp.status, (json.loads(data[:n]), data[n:])
            return resp.status, (json.loads(data) if ctype.startswith("application/json") else data.decode())
        finally:
            conn.close()

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.request("GET", "/v2/health/ready")[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("server not ready in time")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    add_model(repo, "mlp", "mlp", config={"level": "O2"})
    add_model(repo, "bert", "bert_tiny", versions=(1, 2), config={"max_batch": 16, "instances": 2})
    add_model(repo, "shapes", "bert_tiny", config={"plan_cache": 2})
    add_model(repo, "slow", "bert_tiny", config={"timeout_ms": 1})
    add_model(repo, "narrow", "bert_tiny", config={"max_queue": 1})
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"this is not an ONNX model")
    add_model(repo, "badconfig", "mlp", config={"levle": "O3"})
    (repo / "empty").mkdir()
    return repo


@pytest.fixture(scope="module")
def server(repo):
    s = Server(repo, "--max-body-bytes", "8MiB")
    s.wait_ready()
    yield s
    assert s.stop() == 0
