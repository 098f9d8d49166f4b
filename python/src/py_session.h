// The C++ side of opfuse.InferenceSession (python/opfuse/session.py): a Session built the way
// the CLI builds one (tools/opfuse/cli_common.cc: level, threads, target, fusion config, tuning
// record), run on numpy arrays with the GIL released, and the CLI's report, profile, validate
// and optimize commands as methods returning plain Python data.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "runtime/session.h"

namespace opfuse::python {

// What InferenceSession's arguments say, normalised by the Python side.
struct SessionConfig {
  std::optional<std::string> level;        // "O3"; none: the fusion config's level, else O3
  int threads = 0;                         // 0: OpenMP's default (all cores)
  std::string target;                      // "native", "avx2" ...; empty: the active target
  std::optional<std::string> fusion_json;  // a fusion config as JSON text (a dict, serialised)
  std::optional<std::string> fusion_file;  // or a JSON fusion config file
  std::optional<std::string> tuning;       // a tuning record file (`opfuse tune`)
  bool flush_denormals = false;            // SessionOptions::flush_denormals
};

using Dims = std::map<std::string, int64_t>;  // symbolic dim -> size (the CLI's --dim)

// onnxruntime's RunOptions, the parts that act: `terminate` set (from any thread) stops the runs
// using it at their next kernel boundary; `timeout_ms` > 0 (opfuse's own) bounds each run.
struct PyRunOptions {
  std::shared_ptr<std::atomic<bool>> terminate = std::make_shared<std::atomic<bool>>(false);
  double timeout_ms = 0;
};

class PySession {
 public:
  // A model file, or a serialized model in memory (`source` names it in messages).
  static std::shared_ptr<PySession> from_path(const std::string& path, const SessionConfig& config);
  static std::shared_ptr<PySession> from_bytes(const std::string& bytes, const SessionConfig& config);

  // [(name, onnx type, shape)] with shape a list of int (known), str (symbolic) or None
  // (unknown) per dim, or None when the rank is unknown.
  pybind11::list inputs() const;
  pybind11::list outputs() const;
  std::string level() const;
  int threads() const { return session_->options().threads; }

  // The outputs named (None: all, in model order) for `feeds` ({name: array}).
  pybind11::list run(const pybind11::object& output_names, const pybind11::dict& feeds,
                     const PyRunOptions* options) const;

  // `opfuse report --json`: the level's fusion report, with symbolic dims bound by `dims`.
  std::string report_json(const Dims& dims) const;
  // `opfuse profile` without a baseline: per-step and per-kernel times over `runs` runs.
  pybind11::dict profile(int runs, int warmup, const pybind11::object& inputs, uint64_t seed,
                         const Dims& dims, const std::string& small_bytes) const;
  // `opfuse validate`: eager mode vs `level` (none: the session's) on the same inputs; rtol none:
  // from eager mode's rounding sensitivity (report/validation.h).
  pybind11::dict validate(const pybind11::object& inputs, const std::optional<std::string>& level, std::optional<double> rtol,
                          double atol, uint64_t seed, const Dims& dims) const;
  // `opfuse optimize`: the optimised graph as ONNX at `path`, refusing to replace a file unless
  // `force`.
  pybind11::dict save_optimized(const std::string& path, bool force, bool standard_only, const Dims& dims) const;

 private:
  PySession(std::shared_ptr<const Session> session, std::string source)
      : session_(std::move(session)), source_(std::move(source)) {}
  // `inputs` (a dict of arrays) converted, or seeded random inputs when it is None.
  TensorMap gather_inputs(const pybind11::object& inputs, const Session& session, uint64_t seed,
                          const Dims& dims) const;

  std::shared_ptr<const Session> session_;
  std::string source_;
};

}  // namespace opfuse::python
