"""The Open Inference Protocol v2 as `opfuse serve` speaks it: every endpoint, results equal to
`opfuse run`, bad requests answered with the right 4xx and a JSON error while the server stays up,
the time limit, the bounded queue, batching, plan compilation per shape, metrics, shutdown."""
import json
import re
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import CLI, Server, add_model, zoo_model

DTYPES = {"FP32": np.float32, "INT64": np.int64}


def tensor(name, array, datatype):
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": array.ravel().tolist()}


def bert_request(batch, seed=0, outputs=None, request_id=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 32, 128), dtype=np.float32)
    mask = np.ones((batch, 32), dtype=np.int64)
    mask[:, 24:] = 0
    body = {"inputs": [tensor("input", x, "FP32"), tensor("attention_mask", mask, "INT64")]}
    if outputs is not None:
        body["outputs"] = [{"name": n} for n in outputs]
    if request_id is not None:
        body["id"] = request_id
    return body, x, mask


def mlp_request(seed=0):
    x = np.random.default_rng(seed).standard_normal((8, 256), dtype=np.float32)
    return {"inputs": [tensor("input", x, "FP32")]}, x


def output_array(out):
    data = [np.nan if v == "NaN" else np.inf if v == "Infinity" else -np.inf if v == "-Infinity" else v
            for v in out["data"]]
    return np.array(data, dtype=DTYPES[out["datatype"]]).reshape(out["shape"])


def opfuse_run(tmp_path, model, level, **inputs):
    args = [CLI, "run", str(model), "--level", level, "--output-dir", str(tmp_path / "out")]
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    subprocess.run(args, check=True, capture_output=True)
    return {p.stem: np.load(p) for p in (tmp_path / "out").glob("*.npy")}


def test_health_and_server_metadata(server):
    assert server.request("GET", "/v2/health/live") == (200, {"live": True})
    assert server.request("GET", "/v2/health/ready") == (200, {"ready": True})
    status, meta = server.request("GET", "/v2")
    assert status == 200 and meta["name"] == "opfuse" and "version" in meta and meta["extensions"] == []


def test_model_metadata(server):
    status, meta = server.request("GET", "/v2/models/mlp")
    assert status == 200
    assert meta["name"] == "mlp" and meta["versions"] == ["1"] and meta["platform"] == "onnx_onnxv1"
    assert meta["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [8, 256]}]
    assert meta["outputs"] == [{"name": "output", "datatype": "FP32", "shape": [8, 64]}]
    status, meta = server.request("GET", "/v2/models/bert/versions/2")
    assert status == 200 and meta["versions"] == ["1", "2"]
    assert meta["inputs"][0] == {"name": "input", "datatype": "FP32", "shape": [-1, 32, 128]}
    assert meta["inputs"][1] == {"name": "attention_mask", "datatype": "INT64", "shape": [-1, 32]}


def test_model_readiness(server):
    assert server.request("GET", "/v2/models/mlp/ready") == (200, {"name": "mlp", "version": "1", "ready": True})
    assert server.request("GET", "/v2/models/bert/versions/1/ready")[0] == 200
    status, body = server.request("GET", "/v2/models/broken/ready")
    assert status == 503 and body["ready"] is False and "broken" in body["error"]
    status, body = server.request("GET", "/v2/models/badconfig/ready")
    assert status == 503 and "levle" in body["error"] and "config.json" in body["error"]
    status, body = server.request("GET", "/v2/models/nosuch/ready")
    assert status == 404 and "nosuch" in body["error"]


def test_infer_equals_opfuse_run(server, tmp_path):
    body, x = mlp_request(seed=3)
    status, resp = server.request("POST", "/v2/models/mlp/infer", body)
    assert status == 200, resp
    assert resp["model_name"] == "mlp" and resp["model_version"] == "1"
    (out,) = resp["outputs"]
    assert out["name"] == "output" and out["datatype"] == "FP32" and out["shape"] == [8, 64]
    want = opfuse_run(tmp_path, zoo_model("mlp"), "O2", input=x)["output"]
    np.testing.assert_array_equal(output_array(out), want)  # floats travel as shortest round-trip text


def test_infer_two_inputs_new_shape_chosen_outputs(server, tmp_path):
    body, x, mask = bert_request(batch=3, outputs=["output"], request_id="req-42")
    status, resp = server.request("POST", "/v2/models/bert/versions/1/infer", body)
    assert status == 200, resp
    assert resp["id"] == "req-42" and resp["model_version"] == "1"
    got = output_array(resp["outputs"][0])
    assert got.shape == (3, 32, 128)
    want = opfuse_run(tmp_path, zoo_model("bert_tiny"), "O3", input=x, attention_mask=mask)["output"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_nan_and_infinity_travel_as_strings(server):
    body, x = mlp_request()
    body["inputs"][0]["data"][0] = "NaN"
    body["inputs"][0]["data"][300] = "Infinity"
    status, resp = server.request("POST", "/v2/models/mlp/infer", body)
    assert status == 200, resp
    got = output_array(resp["outputs"][0])
    assert np.isnan(got[0]).all()  # row 0 saw a NaN: every output of it is NaN, as in eager mode
    assert not np.isnan(got[2:]).any()


def binary_request(arrays, datatypes, **top):
    """A request in the binary data extension: JSON header, then each input's raw bytes."""
    inputs = [{"name": n, "shape": list(a.shape), "datatype": datatypes[n],
               "parameters": {"binary_data_size": a.nbytes}} for n, a in arrays.items()]
    header = json.dumps(dict(top, inputs=inputs)).encode()
    return header + b"".join(a.tobytes() for a in arrays.values()), {"Inference-Header-Content-Length": str(len(header))}


def test_binary_data_extension_in_and_out(server):
    body, x, mask = bert_request(batch=2, seed=5)
    status, resp = server.request("POST", "/v2/models/bert/infer", body)
    assert status == 200
    want = output_array(resp["outputs"][0])
    raw, headers = binary_request({"input": x, "attention_mask": mask}, {"input": "FP32", "attention_mask": "INT64"})
    status, resp = server.request("POST", "/v2/models/bert/infer", raw, headers)
    assert status == 200, resp
    np.testing.assert_array_equal(output_array(resp["outputs"][0]), want)  # JSON out, same numbers
    raw, headers = binary_request({"input": x, "attention_mask": mask}, {"input": "FP32", "attention_mask": "INT64"},
                                  parameters={"binary_data_output": True})
    status, (header, data) = server.request("POST", "/v2/models/bert/infer", raw, headers)
    assert status == 200
    (out,) = header["outputs"]
    assert out["parameters"]["binary_data_size"] == len(data) == want.nbytes and "data" not in out
    np.testing.assert_array_equal(np.frombuffer(data, np.float32).reshape(out["shape"]), want)
    # A JSON input beside a binary one, and one output asked for in binary.
    header = {"inputs": [{"name": "attention_mask", "shape": [2, 32], "datatype": "INT64", "data": mask.ravel().tolist()},
                         {"name": "input", "shape": [2, 32, 128], "datatype": "FP32",
                          "parameters": {"binary_data_size": x.nbytes}}],
              "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}
    h = json.dumps(header).encode()
    status, (header, data) = server.request("POST", "/v2/models/bert/infer", h + x.tobytes(),
                                            {"Inference-Header-Content-Length": str(len(h))})
    assert status == 200
    np.testing.assert_array_equal(np.frombuffer(data, np.float32).reshape(2, 32, 128), want)


def test_bad_binary_requests(server):
    x = np.zeros((8, 256), np.float32)
    raw, headers = binary_request({"input": x}, {"input": "FP32"})
    infer = "/v2/models/mlp/infer"
    bad(server, infer, raw[:-4], 400, "ends 4 bytes before", headers=headers)
    bad(server, infer, raw + b"1234", 400, "4 bytes of binary data beyond", headers=headers)
    bad(server, infer, raw, 400, "malformed JSON")  # binary data without the header that says where it starts
    bad(server, infer, raw, 400, "Inference-Header-Content-Length", headers={"Inference-Header-Content-Length": "12x"})
    bad(server, infer, raw, 400, "only", headers={"Inference-Header-Content-Length": str(len(raw) + 1)})
    h = json.dumps({"inputs": [{"name": "input", "shape": [8, 256], "datatype": "FP32",
                                "parameters": {"binary_data_size": 100}}]}).encode()
    bad(server, infer, h + bytes(100), 400, "binary_data_size is 100 bytes", "8192",
        headers={"Inference-Header-Content-Length": str(len(h))})


def bad(server, path, body, status, *words, method="POST", headers=None):
    got_status, resp = server.request(method, path, body, headers)
    assert got_status == status, (got_status, resp)
    assert isinstance(resp, dict) and isinstance(resp.get("error"), str), resp
    for w in words:
        assert w in resp["error"], (w, resp["error"])


def test_bad_requests_get_4xx_with_a_json_error_and_the_server_stays_up(server):
    infer = "/v2/models/mlp/infer"
    good, _ = mlp_request()
    inp = good["inputs"][0]

    def with_input(**changes):
        return {"inputs": [dict(inp, **changes)]}

    bad(server, infer, "{not json", 400, "malformed JSON")
    bad(server, infer, b"\xff\xfe{\"inputs\": []}", 400, "malformed JSON")
    bad(server, infer, [1, 2, 3], 400, "JSON object")
    bad(server, infer, {"outputs": []}, 400, "inputs")
    bad(server, infer, with_input(name="image"), 400, "unknown input 'image'", "input")
    bad(server, "/v2/models/bert/infer", {"inputs": [bert_request(1)[0]["inputs"][0]]}, 400,
        "missing input 'attention_mask'")
    bad(server, infer, {"inputs": [inp, inp]}, 400, "given twice")
    bad(server, infer, with_input(datatype="FP64"), 400, "FP64", "FP32")
    bad(server, infer, with_input(datatype="FLOAT"), 400, "unknown datatype 'FLOAT'")
    bad(server, infer, with_input(shape=[8, 255]), 400, "[8,255]", "[8,256]")
    bad(server, infer, with_input(shape=[8, -256]), 400, "shape")
    bad(server, infer, with_input(shape="8x256"), 400, "shape")
    bad(server, infer, with_input(data=inp["data"][:-1]), 400, "2047", "2048")
    bad(server, infer, with_input(data=inp["data"] + [0.0]), 400, "more than the 2048")
    bad(server, infer, with_input(data=["abc"] + inp["data"][1:]), 400, "element 0", "number")
    bad(server, infer, {"inputs": [{"shape": [8, 256], "datatype": "FP32", "data": inp["data"]}]}, 400, "name")
    mask_body, _, _ = bert_request(1)
    mask_body["inputs"][1]["data"][0] = 1.5
    bad(server, "/v2/models/bert/infer", mask_body, 400, "attention_mask", "integer")
    bad(server, infer, dict(good, outputs=[{"name": "logits"}]), 400, "unknown output 'logits'", "output")
    bad(server, "/v2/models/nosuch/infer", good, 404, "unknown model 'nosuch'", "mlp")
    bad(server, "/v2/models/mlp/versions/7/infer", good, 404, "no version '7'", "1")
    bad(server, "/v2/models/mlp/versions/latest/infer", good, 404, "no version 'latest'")
    bad(server, "/v2/models/empty/infer", good, 503, "no version")
    bad(server, "/v2/models/broken/infer", good, 503, "failed to load")
    bad(server, "/v2/modelz", None, 404, "no endpoint", method="GET")
    bad(server, infer, None, 405, "POST", method="GET")
    bad(server, "/v2/health/live", good, 405, "GET")
    bad(server, infer, "x" * (9 << 20), 413, "limit", "8388608")
    # Still serving, and right.
    assert server.request("GET", "/v2/health/live")[0] == 200
    status, resp = server.request("POST", infer, good)
    assert status == 200 and resp["outputs"][0]["shape"] == [8, 64]


def test_time_limit_gives_504(server):
    body, _, _ = bert_request(batch=24)  # a new shape: compiling it alone takes far more than 1 ms
    bad(server, "/v2/models/slow/infer", body, 504, "time limit", "1 ms")
    assert server.request("GET", "/v2/health/live")[0] == 200


def test_full_queue_gives_503(server):
    # Binary, so that all requests arrive while the first compiles its new shape and runs.
    _, x, mask = bert_request(batch=64)
    raw, headers = binary_request({"input": x, "attention_mask": mask}, {"input": "FP32", "attention_mask": "INT64"})
    results = []
    def post():
        results.append(server.request("POST", "/v2/models/narrow/infer", raw, headers))
    threads = [threading.Thread(target=post) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r[0] for r in results)
    assert set(codes) <= {200, 503} and 200 in codes and 503 in codes, codes
    assert all("max_queue" in r[1]["error"] for r in results if r[0] == 503)


def test_concurrent_requests_batch_and_match(server):
    single = {}
    for seed in range(8):
        body, _, _ = bert_request(batch=1, seed=seed)
        status, resp = server.request("POST", "/v2/models/bert/infer", body)
        assert status == 200
        single[seed] = output_array(resp["outputs"][0])
    results = {}
    def post(seed):
        body, _, _ = bert_request(batch=1, seed=seed)
        results[seed] = server.request("POST", "/v2/models/bert/infer", body)
    for _ in range(3):
        threads = [threading.Thread(target=post, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for seed, (status, resp) in results.items():
            assert status == 200, resp
            np.testing.assert_allclose(output_array(resp["outputs"][0]), single[seed], rtol=1e-4, atol=1e-5)


def test_metrics(server):
    server.request("POST", "/v2/models/mlp/infer", mlp_request()[0])
    server.request("POST", "/v2/models/mlp/infer", {"inputs": []})
    status, text = server.request("GET", "/metrics")
    assert status == 200
    def value(pattern):
        m = re.search(pattern + r" (\S+)", text)
        assert m, pattern
        return float(m.group(1))
    assert value(r'opfuse_requests_total\{model="mlp",version="1"\}') >= 2
    assert value(r'opfuse_request_failures_total\{model="mlp",version="1",code="400"\}') >= 1
    assert value(r'opfuse_request_duration_seconds_count\{model="mlp",version="1"\}') >= 2
    assert value(r'opfuse_request_duration_seconds_bucket\{model="mlp",version="1",le="\+Inf"\}') >= 2
    assert value(r'opfuse_compiles_total\{model="bert",version="2"\}') >= 2  # batch 1 at load, then others
    assert value(r'opfuse_queue_depth\{model="mlp",version="1"\}') == 0
    assert value(r'opfuse_requests_in_flight\{model="mlp",version="1"\}') == 0
    assert value(r'opfuse_refused_requests_total\{code="404"\}') >= 1


def test_a_plan_per_new_shape_in_a_bounded_cache(server):
    def metric(name):
        text = server.request("GET", "/metrics")[1]
        return float(re.search(name + r'\{model="shapes",version="1"\} (\S+)', text).group(1))
    compiled = metric("opfuse_compiles_total")
    for batch in (2, 3, 4, 2):
        body, _, _ = bert_request(batch=batch)
        status, resp = server.request("POST", "/v2/models/shapes/infer", body)
        assert status == 200 and resp["outputs"][0]["shape"] == [batch, 32, 128]
    # 2, 3 and 4 are new shapes; the second 2 was evicted by 4 (plan_cache 2: 3 and 4 remain).
    assert metric("opfuse_compiles_total") == compiled + 4
    assert metric("opfuse_plans_cached") == 2


def test_sigterm_finishes_requests_in_flight(tmp_path):
    add_model(tmp_path, "bert", "bert_tiny")
    s = Server(tmp_path)
    s.wait_ready()
    body, _, _ = bert_request(batch=128)  # a new shape: compile and run take a while
    result = []
    t = threading.Thread(target=lambda: result.append(s.request("POST", "/v2/models/bert/infer", body)))
    t.start()
    # SIGTERM once the request is in flight at the model (one still being received would get 503).
    deadline = time.time() + 60
    while 'opfuse_requests_in_flight{model="bert",version="1"} 1' not in s.request("GET", "/metrics")[1]:
        assert time.time() < deadline and t.is_alive(), result
        time.sleep(0.002)
    assert s.stop() == 0
    t.join()
    assert result[0][0] == 200 and result[0][1]["outputs"][0]["shape"] == [128, 32, 128]
    assert "shutting down" in s.proc.stderr.read()


def test_bad_repository_is_a_clear_error(tmp_path):
    r = subprocess.run([CLI, "serve", "--model-repository", str(tmp_path / "nope"), "--port", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "is not a directory" in r.stderr
    r = subprocess.run([CLI, "serve", "--model-repository", str(tmp_path), "--port", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "holds no model directory" in r.stderr
