#!/usr/bin/python3
"""Load test of `opfuse serve` (issue 18; a benchmark, not a test): N concurrent clients post the
same inference request to one model over loopback for a fixed time, each on its own keep-alive
connection, and the script reports throughput, latency percentiles, errors and the server's RSS
at the start and the end; then `opfuse bench` on the same model, same level, for the throughput
without serving. Run side by side so both see the same machine:

  tools/bench/serve_load.py --model ~/.cache/opfuse/zoo/mobilenet_v2.onnx --clients 8 --seconds 60

The request body is built once; clients only send it and read the answer, so the client side
costs little CPU beside the server (both share this machine's cores). --binary sends the tensor
as raw bytes (the protocol's binary data extension) instead of JSON numbers."""
import argparse
import http.client
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_body(meta, binary, seed=0):
    rng = np.random.default_rng(seed)
    dtypes = {"FP32": np.float32, "INT64": np.int64}
    inputs, blobs = [], []
    for inp in meta["inputs"]:
        shape = [d if d >= 0 else 1 for d in inp["shape"]]
        a = rng.standard_normal(shape).astype(dtypes[inp["datatype"]])
        entry = {"name": inp["name"], "shape": shape, "datatype": inp["datatype"]}
        if binary:
            entry["parameters"] = {"binary_data_size": a.nbytes}
            blobs.append(a.tobytes())
        else:
            entry["data"] = a.ravel().tolist()
        inputs.append(entry)
    header = json.dumps({"inputs": inputs}).encode()
    if not binary:
        return header, {"Content-Type": "application/json"}
    return header + b"".join(blobs), {"Content-Type": "application/octet-stream",
                                      "Inference-Header-Content-Length": str(len(header))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cli", default=str(ROOT / "build" / "opfuse"))
    ap.add_argument("--level", default="O3")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--binary", action="store_true")
    ap.add_argument("--passive", action="store_true",
                    help="run the server with OMP_WAIT_POLICY=passive (idle threads sleep instead of spinning)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    def bench_ms():
        out = subprocess.run([args.cli, "bench", args.model, "--level", args.level, "--iters", "50", "--json"],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["median_ms"]

    bench_before = bench_ms()  # again after the load: the machine's speed drifts (shared VM)
    repo = pathlib.Path(tempfile.mkdtemp())
    name = pathlib.Path(args.model).stem
    (repo / name / "1").mkdir(parents=True)
    shutil.copy(args.model, repo / name / "1" / "model.onnx")
    (repo / name / "config.json").write_text(json.dumps({"level": args.level, "instances": args.instances,
                                                         "max_queue": 4 * args.clients}))
    env = dict(os.environ, OMP_WAIT_POLICY="passive") if args.passive else None
    server = subprocess.Popen([args.cli, "serve", "--model-repository", str(repo), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    port = int(server.stdout.readline().strip().rsplit(":", 1)[1])

    def get(path):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()

    while get("/v2/health/ready")[0] != 200:
        time.sleep(0.1)
    meta = json.loads(get(f"/v2/models/{name}")[1])
    body, headers = make_body(meta, args.binary)
    path = f"/v2/models/{name}/infer"

    def one(conn):
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status

    warm = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(5):
        assert one(warm) == 200
    rss_start = rss_mb(server.pid)

    latencies, errors, lock = [], [0], threading.Lock()
    stop_at = time.perf_counter() + args.seconds

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine, bad = [], 0
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            try:
                ok = one(conn) == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            mine.append(time.perf_counter() - t0)
            bad += not ok
        with lock:
            latencies.extend(mine)
            errors[0] += bad

    # RSS each second: it rises while the first requests at full concurrency allocate their
    # buffers (a body and a tensor per connection thread, kept by malloc for reuse), then should
    # stay flat; growth after that would be a leak.
    rss_series = []
    def sample_rss():
        while time.perf_counter() < stop_at:
            rss_series.append(round(rss_mb(server.pid), 1))
            time.sleep(1)
    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    threads.append(threading.Thread(target=sample_rss))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    rss_end = rss_mb(server.pid)
    server.terminate()
    server.wait(timeout=60)
    shutil.rmtree(repo)

    bench_after = bench_ms()
    bench = (bench_before + bench_after) / 2
    latencies.sort()
    served = len(latencies) / elapsed
    result = {
        "model": name, "level": args.level, "clients": args.clients, "seconds": round(elapsed, 1),
        "encoding": "binary" if args.binary else "json", "request_bytes": len(body),
        "server_omp": "passive" if args.passive else "default", "instances": args.instances,
        "requests": len(latencies), "errors": errors[0], "throughput_per_s": round(served, 2),
        "p50_ms": round(1000 * latencies[len(latencies) // 2], 2),
        "p99_ms": round(1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 2),
        "rss_start_mb": round(rss_start, 1), "rss_end_mb": round(rss_end, 1),
        "rss_after_first_10s_mb": rss_series[min(10, len(rss_series) - 1)], "rss_max_mb": max(rss_series),
        "rss_every_5s_mb": rss_series[::5],
        "bench_median_ms_before_after": [round(bench_before, 3), round(bench_after, 3)],
        "bench_throughput_per_s": round(1000 / bench, 2),
        "serving_overhead": round(1 - served / (1000 / bench), 3),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
