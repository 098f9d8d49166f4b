"""deploy/: the container recipe and the KServe manifests cannot run on this machine, so they are
parsed, and the exact command their container runs is run here (the binary, the repository
mount and the port swapped for local ones), its probes answered."""
import pathlib
import socket
import subprocess
import time
import os
import signal

import yaml

from conftest import CLI, add_model

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy"
IMAGE_CLI = "/opt/opfuse/build/opfuse"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(name):
    return list(yaml.safe_load_all((DEPLOY / "kserve" / name).read_text()))


def test_manifests_are_consistent():
    (runtime,) = load("servingruntime.yaml")
    (service,) = load("inferenceservice.yaml")
    assert runtime["kind"] == "ServingRuntime" and runtime["apiVersion"].startswith("serving.kserve.io/")
    assert service["kind"] == "InferenceService" and service["apiVersion"] == "serving.kserve.io/v1beta1"
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in [f["name"] for f in runtime["spec"]["supportedModelFormats"]]
    assert model["protocolVersion"] in runtime["spec"]["protocolVersions"]
    (container,) = runtime["spec"]["containers"]
    assert container["command"][0] == IMAGE_CLI
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "FROM debian:12" in dockerfile
    assert "./scripts/install-deps.sh" in dockerfile and "./scripts/build.sh opfuse_cli" in dockerfile
    assert f'ENTRYPOINT ["{IMAGE_CLI}", "serve"]' in dockerfile


def test_the_runtime_container_command_serves_here(tmp_path):
    (runtime,) = load("servingruntime.yaml")
    (container,) = runtime["spec"]["containers"]
    port = free_port()
    repo = tmp_path / "models"
    add_model(repo, "mobilenet", "mobilenet_v2_tiny")
    local = {IMAGE_CLI: CLI, "/mnt/models": str(repo), "8080": str(port)}
    argv = []
    for arg in container["command"] + container["args"]:
        for image_value, local_value in local.items():
            arg = arg.replace(image_value, local_value)
        argv.append(arg)
    env = dict(os.environ, **{e["name"]: e["value"] for e in container.get("env", [])})
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert "listening on" in proc.stdout.readline()
        import http.client
        def get(path):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", path)
            status = conn.getresponse().status
            conn.close()
            return status
        deadline = time.time() + 120
        while get(container["readinessProbe"]["httpGet"]["path"]) != 200:
            assert time.time() < deadline, "never ready"
            time.sleep(0.1)
        assert get(container["livenessProbe"]["httpGet"]["path"]) == 200
        assert get("/v2/models/mobilenet/ready") == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
