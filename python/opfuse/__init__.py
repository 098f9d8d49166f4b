"""opfuse: an operator-fusing inference compiler and CPU runtime for ONNX models.

    import opfuse
    session = opfuse.InferenceSession("model.onnx")              # compiled at O3 for this CPU
    outputs = session.run(None, {"input": x})                    # numpy in, numpy out

The session API is onnxruntime's (``import opfuse as ort`` runs most onnxruntime scripts);
docs/python.md says what differs.
"""

import os as _os

# How idle OpenMP workers wait between kernels, chosen as the CLI chooses it (tools/opfuse/main.cc
# has the measurements): spin for a bounded time, then sleep. libgomp reads these when it is
# loaded, which importing _opfuse does next; a choice already in the environment is kept, and a
# process that loaded libgomp before (torch imported first) keeps the policy it started with.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "active"
    _os.environ["GOMP_SPINCOUNT"] = "1000000"

from ._version import __version__  # noqa: E402
from ._opfuse import Error, InvalidArgument, RunOptions  # noqa: E402
from ._opfuse import target_info as _target_info  # noqa: E402
from .session import (  # noqa: E402
    GraphOptimizationLevel,
    InferenceSession,
    NodeArg,
    SessionOptions,
    get_all_providers,
    get_available_providers,
)


def get_device():
    """Where opfuse runs models: always 'CPU' (as onnxruntime.get_device() says for its CPU build)."""
    return "CPU"


def target_info():
    """The CPU tier opfuse compiles for and the host it runs on, as a dict.

    Keys: isa (the tier compiles use: the host's, or lower through OPFUSE_TARGET or an earlier
    session's target=), host_isa, available_isas (what target= accepts besides "native"),
    vector_bytes, channel_block, cores, l1d_bytes, l2_bytes, l3_bytes (0: unknown),
    core_round_trip_ns (a cache line's round trip between two of this process's CPUs, measured once
    per process; 0: one CPU), near_cores (under 200 ns: small kernels use every thread), description.
    """
    return _target_info()


__all__ = [
    "Error",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidArgument",
    "NodeArg",
    "RunOptions",
    "SessionOptions",
    "__version__",
    "get_all_providers",
    "get_available_providers",
    "get_device",
    "target_info",
]
