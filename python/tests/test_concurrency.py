"""Threads share one session: the GIL is released while the model runs, so runs overlap, and
four threads get exactly what one thread gets."""

import sys
import threading
import time

import numpy as np

import opfuse


def test_four_threads_match_one(zoo):
    models = [zoo("bert_tiny"), zoo("mobilenet_v2_tiny")]
    for model in models:
        session = opfuse.InferenceSession(model.path)
        rng = np.random.default_rng(1)
        # Different inputs per call, so a run returning another call's result would show.
        feeds = []
        for _ in range(8):
            feed = {}
            for arg in session.get_inputs():
                base = model.inputs[arg.name]
                feed[arg.name] = (
                    (base + rng.standard_normal(base.shape).astype(base.dtype)).astype(base.dtype)
                    if base.dtype == np.float32
                    else base.copy()
                )
            feeds.append(feed)
        want = [session.run(None, feed) for feed in feeds]
        got = {}
        errors = []

        def worker(tid):
            try:
                for round_ in range(3):
                    for i, feed in enumerate(feeds):
                        got[(tid, round_, i)] = session.run(None, feed)
            except Exception as e:  # reported below: a thread's exception would vanish otherwise
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(got) == 4 * 3 * len(feeds)
        for (tid, round_, i), outputs in got.items():
            for a, b in zip(outputs, want[i]):
                np.testing.assert_array_equal(a, b, err_msg=f"{model.name}: thread {tid} round {round_} input {i}")


def test_the_gil_is_released_while_running(zoo):
    """The main thread executes Python while the worker is inside run(). The switch interval is
    set longer than the test, so a thread holding the GIL keeps it until it releases it itself:
    had run() kept the GIL, no main-thread timestamp could fall between the worker's timestamps
    taken just before and just after a run (its input is contiguous: no numpy copy, which would
    release the GIL on its own, happens in between)."""
    model = zoo("deeplabv3_tiny")
    session = opfuse.InferenceSession(model.path, threads=1)  # the second core for the main thread
    session.run(None, model.inputs)  # compiled and warm
    runs = []  # (start, end) of each run, taken by the worker holding the GIL
    done = threading.Event()

    def worker():
        for _ in range(20):
            start = time.perf_counter()
            session.run(None, model.inputs)
            runs.append((start, time.perf_counter()))
        done.set()

    stamps = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        while not done.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0)  # lets the worker take the GIL back when its run returns
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    inside = sum(1 for t in stamps if any(start < t < end for start, end in runs))
    assert inside > 0, f"the main thread never ran during any of {len(runs)} runs: run() held the GIL"
