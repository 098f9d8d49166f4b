"""opfuse.RunOptions: onnxruntime's `terminate` and opfuse's `timeout_ms` stop a run between
kernels with an error saying where; a run without them, or after terminate is cleared, is whole."""
import threading

import numpy as np
import pytest

import opfuse


@pytest.fixture(scope="module")
def model(zoo):
    return zoo("resnet_tiny")


@pytest.fixture(scope="module")
def session(model):
    return opfuse.InferenceSession(model.path, level="O1")


@pytest.fixture(scope="module")
def feeds(model):
    return model.inputs


def test_terminate_stops_the_run(session, feeds):
    options = opfuse.RunOptions()
    assert options.terminate is False and options.timeout_ms == 0
    (want,) = session.run(None, feeds, options)
    options.terminate = True
    with pytest.raises(opfuse.Error, match=r"cancelled after 1 of \d+ steps"):
        session.run(None, feeds, options)
    options.terminate = False
    (again,) = session.run(None, feeds, options)
    np.testing.assert_array_equal(again, want)


def test_timeout_stops_the_run(session, feeds):
    options = opfuse.RunOptions()
    options.timeout_ms = 1e-6  # passed before the first kernel ends
    with pytest.raises(opfuse.Error, match=r"stopped at its time limit after 1 of \d+ steps"):
        session.run(None, feeds, options)
    with pytest.raises(opfuse.InvalidArgument, match="timeout_ms"):
        options.timeout_ms = -1


def test_terminate_from_another_thread(session, feeds):
    # One RunOptions shared by a loop of runs in a thread; setting terminate ends the loop's
    # current run (or the next one) with the cancellation error.
    options = opfuse.RunOptions()
    errors = []
    def loop():
        try:
            for _ in range(100000):
                session.run(None, feeds, options)
        except opfuse.Error as e:
            errors.append(str(e))
    t = threading.Thread(target=loop)
    t.start()
    options.terminate = True
    t.join(timeout=60)
    assert not t.is_alive() and len(errors) == 1 and "cancelled" in errors[0]


def test_onnxruntime_style_run_options_are_accepted(session, feeds):
    class OrtRunOptions:  # what a script passing onnxruntime.RunOptions() hands over
        terminate = False
    (out,) = session.run(None, feeds, OrtRunOptions())
    assert out.shape[0] == 1
