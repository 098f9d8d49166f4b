"""InferenceSession: onnxruntime's session API over opfuse's compiled Session.

The positional arguments are onnxruntime's (path_or_bytes, sess_options, providers,
provider_options), so onnxruntime code runs unchanged; opfuse's own settings are keywords.
Everything that needs C++ (loading, compiling, running, reports) is in the _opfuse module;
this file turns Python arguments into what it takes.
"""

import enum
import json
import os

from . import _opfuse
from ._opfuse import InvalidArgument

_CPU_PROVIDER = "CPUExecutionProvider"


def get_available_providers():
    """The execution providers this build has: only the CPU one (as onnxruntime names it)."""
    return [_CPU_PROVIDER]


def get_all_providers():
    """Every provider opfuse knows of; the same single CPU provider."""
    return [_CPU_PROVIDER]


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's optimisation levels, for SessionOptions.graph_optimization_level.

    Each maps to the opfuse level doing the corresponding work: no rewrites (O0), canonical
    simplifications (O1), fusions (O2), everything including layouts chosen per CPU (O3).
    """

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


_LEVEL_OF_ORT_LEVEL = {
    GraphOptimizationLevel.ORT_DISABLE_ALL: "O0",
    GraphOptimizationLevel.ORT_ENABLE_BASIC: "O1",
    GraphOptimizationLevel.ORT_ENABLE_EXTENDED: "O2",
    GraphOptimizationLevel.ORT_ENABLE_ALL: "O3",
}


class SessionOptions:
    """onnxruntime's SessionOptions, for code that passes one.

    Three settings have an effect: intra_op_num_threads (opfuse's threads; 0: all cores),
    graph_optimization_level (mapped as GraphOptimizationLevel says) and the config entry
    "session.set_denormal_as_zero" = "1" (add_session_config_entry: runs flush denormals to
    zero, as InferenceSession's flush_denormals=True). Any other attribute or entry an
    onnxruntime script sets (log_severity_level, enable_profiling ...) is accepted and has no
    effect; docs/python.md lists them. A real onnxruntime.SessionOptions is read the same way.
    """

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self._config_entries = {}

    def add_session_config_entry(self, key, value):
        self._config_entries[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._config_entries[str(key)]


class NodeArg:
    """A model input or output as onnxruntime describes it.

    name: str; type: 'tensor(float)', 'tensor(int64)' ...; shape: a list with an int for each
    known dim, the symbol's name (str) for a symbolic one, None for an unknown one; [] when the
    rank itself is unknown (as onnxruntime gives it).
    """

    __slots__ = ("name", "type", "shape")

    def __init__(self, name, type, shape):  # noqa: A002 - onnxruntime's attribute name
        self.name = name
        self.type = type
        self.shape = shape

    def __eq__(self, other):
        if not isinstance(other, NodeArg):
            return NotImplemented
        return (self.name, self.type, self.shape) == (other.name, other.type, other.shape)

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def _check_providers(providers, provider_options):
    """Only the CPU provider exists; asking for another is an error naming it."""
    if providers is None:
        return
    if isinstance(providers, str) or not isinstance(providers, (list, tuple)):
        raise InvalidArgument(f"providers must be a list such as ['{_CPU_PROVIDER}'], given {providers!r}")
    for provider in providers:
        name = provider[0] if isinstance(provider, tuple) and len(provider) == 2 else provider
        if name != _CPU_PROVIDER:
            raise InvalidArgument(
                f"execution provider {name!r} is not available: opfuse runs on the CPU only "
                f"(available: {get_available_providers()})"
            )
    if provider_options is not None and len(provider_options) != len(providers):
        raise InvalidArgument(
            f"provider_options has {len(provider_options)} entries for {len(providers)} providers"
        )


def _ort_level(sess_options):
    level = getattr(sess_options, "graph_optimization_level", None)
    if level is None:
        return None
    try:
        return _LEVEL_OF_ORT_LEVEL[GraphOptimizationLevel(int(level))]
    except ValueError:
        raise InvalidArgument(f"sess_options.graph_optimization_level {level!r} is not an onnxruntime level") from None


def _denormals_as_zero(sess_options):
    """onnxruntime's "session.set_denormal_as_zero" entry, from ours or a real SessionOptions."""
    try:
        return sess_options.get_session_config_entry("session.set_denormal_as_zero") == "1"
    except (AttributeError, KeyError, RuntimeError):  # no such entry (onnxruntime raises RuntimeError)
        return False


def _fusion_arguments(fusion):
    """The fusion config as (JSON text, file path): a dict is serialised, a path is read by C++."""
    if fusion is None:
        return None, None
    if isinstance(fusion, dict):
        try:
            return json.dumps(fusion), None
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"fusion config dict cannot be written as JSON: {e}") from None
    if isinstance(fusion, (str, os.PathLike)):
        return None, os.fspath(fusion)
    raise TypeError(f"fusion must be a dict, a path to a JSON config file or None, given {type(fusion).__name__}")


def _dims(dims):
    if dims is None:
        return {}
    if not isinstance(dims, dict):
        raise TypeError(f"dims must be a dict {{symbol: size}} or None, given {type(dims).__name__}")
    return dims


class InferenceSession:
    """A model loaded and compiled by opfuse, run on numpy arrays.

    InferenceSession(path_or_bytes, sess_options=None, providers=None, provider_options=None, *,
                     level=None, threads=0, target=None, fusion=None, tuning=None,
                     flush_denormals=False)

    path_or_bytes: an ONNX file (str or os.PathLike) or a serialized model (bytes).
    level: "O0" ... "O3"; None: the fusion config's level if it names one, else (without a
        fusion config) sess_options.graph_optimization_level if given, else "O3".
    threads: OpenMP threads (0: all cores; sess_options.intra_op_num_threads when 0).
    target: the CPU tier to compile and run for ("native", "avx2", ...: opfuse.target_info());
        None: this CPU, capped by OPFUSE_TARGET when set. One tier per process.
    fusion: a fusion config, as a dict or a JSON file (the CLI's --fusion-config: docs/cli.md).
    tuning: a tuning record file made by `opfuse tune` for this model and CPU tier.
    flush_denormals: run with denormal floats flushed to zero (the CLI's --flush-denormals: an
        error below 1.2e-38; each denormal costs a microcode assist on Intel cores); also set by
        sess_options' "session.set_denormal_as_zero" entry = "1".
    sess_options, providers, provider_options: onnxruntime's; providers may only name
        'CPUExecutionProvider' (as a string or a (name, options) tuple).

    run() may be called from several threads at once; they run concurrently.
    """

    def __init__(
        self,
        path_or_bytes,
        sess_options=None,
        providers=None,
        provider_options=None,
        *,
        level=None,
        threads=0,
        target=None,
        fusion=None,
        tuning=None,
        flush_denormals=False,
    ):
        _check_providers(providers, provider_options)
        if not isinstance(flush_denormals, bool):
            raise TypeError(f"flush_denormals must be a bool, given {type(flush_denormals).__name__}")
        if level is not None and not isinstance(level, str):
            raise TypeError(f"level must be a string such as 'O3' or None, given {type(level).__name__}")
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"threads must be an int, given {type(threads).__name__}")
        fusion_json, fusion_file = _fusion_arguments(fusion)
        if sess_options is not None:
            if level is None and fusion is None:
                level = _ort_level(sess_options)
            if threads == 0:
                threads = int(getattr(sess_options, "intra_op_num_threads", 0) or 0)
            flush_denormals = flush_denormals or _denormals_as_zero(sess_options)
        settings = dict(
            level=level,
            threads=threads,
            target=target,
            fusion_json=fusion_json,
            fusion_file=fusion_file,
            tuning=None if tuning is None else os.fspath(tuning),
            flush_denormals=flush_denormals,
        )
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._session = _opfuse.Session.from_bytes(bytes(path_or_bytes), **settings)
            self._model_path = None
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            path = os.fspath(path_or_bytes)
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            self._session = _opfuse.Session.from_path(path, **settings)
            self._model_path = path
        else:
            raise TypeError(
                "path_or_bytes must be a path (str or os.PathLike) or the model's bytes, "
                f"given {type(path_or_bytes).__name__}"
            )
        self._sess_options = sess_options
        self._inputs = [NodeArg(n, t, s if s is not None else []) for n, t, s in self._session.inputs()]
        self._outputs = [NodeArg(n, t, s if s is not None else []) for n, t, s in self._session.outputs()]

    # --- onnxruntime's API ---------------------------------------------------------------

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: a list of numpy arrays, one per name in output_names (None: every
        output, in the model's order). input_feed maps each input name to a numpy array of the
        input's dtype (no silent casts); C-contiguous arrays are used without copying.
        run_options: an opfuse.RunOptions stops the run when its `terminate` is set (from any
        thread) or its `timeout_ms` passes, at the next kernel boundary, raising opfuse.Error;
        onnxruntime's own RunOptions is accepted and has no effect."""
        if not isinstance(input_feed, dict):
            raise InvalidArgument(
                f"input_feed must be a dict {{input name: numpy array}}, given {type(input_feed).__name__}"
            )
        options = run_options if isinstance(run_options, _opfuse.RunOptions) else None
        return self._session.run(output_names, input_feed, options)

    def get_inputs(self):
        """The model's inputs as NodeArg (name, shape, type)."""
        return list(self._inputs)

    def get_outputs(self):
        """The model's outputs as NodeArg (name, shape, type)."""
        return list(self._outputs)

    def get_overridable_initializers(self):
        """[]: opfuse folds initializers into the compiled model as constants; none can be fed."""
        return []

    def get_providers(self):
        return [_CPU_PROVIDER]

    def get_provider_options(self):
        return {_CPU_PROVIDER: {}}

    def get_session_options(self):
        """The sess_options given, or a SessionOptions describing this session."""
        if self._sess_options is not None:
            return self._sess_options
        options = SessionOptions()
        options.intra_op_num_threads = self._session.threads
        level = {v: k for k, v in _LEVEL_OF_ORT_LEVEL.items()}[self._session.level]
        options.graph_optimization_level = level
        return options

    # --- opfuse's additions --------------------------------------------------------------

    @property
    def level(self):
        """The optimisation level the session compiles at ("O3")."""
        return self._session.level

    def report(self, dims=None):
        """The fusion report (`opfuse report --json`) as a dict: rules matched, applied and
        refused, each fused kernel with its members, refusals with reasons, totals. Symbolic
        dims take their size from dims ({symbol: size}; default 1)."""
        return json.loads(self._session.report_json(_dims(dims)))

    def profile(self, n=10, inputs=None, *, warmup=2, seed=0, dims=None, small_bytes="64KiB"):
        """Times every kernel over n runs (`opfuse profile`, without the baseline level), on
        inputs ({name: array}) or seeded random inputs. A dict: per-run times (microseconds),
        steps (each kernel in execution order), kernels (time per op and kernel, slowest
        first) and the small-op share (time in kernels writing less than small_bytes)."""
        return self._session.profile(n, warmup, inputs, seed, _dims(dims), small_bytes)

    def validate(self, inputs=None, level=None, *, rtol=None, atol=1e-6, seed=0, dims=None):
        """Compares the level (default: the session's) with eager mode, the reference kernels
        (`opfuse validate`), on inputs or seeded random ones. A dict: ok, max_abs, max_rel, rtol
        and per output the same; outside atol + rtol * max|reference| an output fails. Without
        rtol it is max(1e-4, 10 x sensitivity), sensitivity (also returned) being how far eager
        mode's outputs move when every float input, weight and quantization scale moves by one ulp."""
        return self._session.validate(inputs, level, None if rtol is None else float(rtol), float(atol), seed,
                                      _dims(dims))

    def save_optimized(self, path, force=False, *, standard_only=False, dims=None):
        """Writes the optimised model as ONNX (`opfuse optimize`): fused ops in the 'opfuse'
        domain, which opfuse loads back, or standard ops only (standard_only=True) for other
        runtimes. An existing file is replaced only with force=True. Returns a summary dict."""
        return self._session.save_optimized(os.fspath(path), bool(force), bool(standard_only), _dims(dims))

    def __repr__(self):
        source = self._model_path if self._model_path is not None else "<model bytes>"
        return f"opfuse.InferenceSession({source!r}, level={self.level!r})"
