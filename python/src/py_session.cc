#include "py_session.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/file_io.h"
#include "core/target.h"
#include "errors.h"
#include "frontend/onnx/exporter.h"
#include "frontend/onnx/importer.h"
#include "numpy_tensor.h"
#include "passes/fusion_config_json.h"
#include "passes/fusion_rules.h"
#include "passes/tuning_record.h"
#include "pipelines/pipeline.h"
#include "runtime/random_inputs.h"
#include "report/fusion_analysis.h"
#include "report/fusion_report.h"
#include "report/profiler.h"
#include "report/validation.h"

namespace opfuse::python {
namespace py = pybind11;

namespace {

// The options the CLI's session_options would build from the same settings: the level given,
// else the fusion config's, else O3; the fusion config from the file or the dict; the tuning
// record into the config.
SessionOptions session_options(const SessionConfig& config) {
  FusionConfig fusion;
  std::optional<std::string> config_level;
  std::string config_source;
  if (config.fusion_file) {
    FusionConfigFile file = value_or_throw(load_fusion_config_file(*config.fusion_file));
    fusion = std::move(file.fusion);
    config_level = std::move(file.level);
    config_source = str_cat("fusion config '", *config.fusion_file, "'");
  } else if (config.fusion_json) {
    config_source = "fusion config (the `fusion` dict)";
    FusionConfigFile parsed = value_or_throw(parse_fusion_config_json(*config.fusion_json, config_source));
    fusion = std::move(parsed.fusion);
    config_level = std::move(parsed.level);
  }
  SessionOptions options;
  options.level = value_or_throw(choose_opt_level(config.level, config_level, config_source, kDefaultOptLevel));
  if (config.tuning) {
    TuningRecord record = value_or_throw(load_tuning_record(*config.tuning));
    fusion.tuning = std::make_shared<const TuningRecord>(std::move(record));
  }
  // run_pipeline checks the config too, but only when it first compiles: for a model with
  // symbolic dims that is the first run. A bad rule name should fail here, where it was given.
  throw_if_error(validate_fusion_config(fusion));
  options.pipeline.fusion = std::move(fusion);
  if (config.threads < 0) throw_user_error(str_cat("threads must be 0 or more, given ", config.threads));
  options.threads = config.threads;
  options.flush_denormals = config.flush_denormals;
  options.target = config.target;
  return options;
}

std::shared_ptr<const Session> create_session(Result<Graph> graph, const SessionOptions& options) {
  Graph model = value_or_throw(std::move(graph));
  return std::make_shared<const Session>(value_or_throw(Session::create(std::move(model), options)));
}

// One dim as onnxruntime's NodeArg.shape gives it: int, the symbol's name, or None.
py::object dim_object(const Dim& d) {
  if (d.is_known()) return py::int_(d.value());
  if (d.is_symbolic()) return py::str(d.symbol_name());
  return py::none();
}

py::list signatures(const std::vector<TensorSignature>& sigs) {
  py::list list;
  for (const TensorSignature& sig : sigs) {
    py::object shape = py::none();
    if (sig.shape) {
      py::list dims;
      for (const Dim& d : *sig.shape) dims.append(dim_object(d));
      shape = dims;
    }
    list.append(py::make_tuple(sig.name, std::string(onnx_type_name(sig.dtype)), shape));
  }
  return list;
}

std::string output_list(const Session& session) {
  std::string names;
  for (const TensorSignature& sig : session.outputs()) names += str_cat(names.empty() ? "" : ", ", "'", sig.name, "'");
  return names;
}

// The output names asked for, each checked against the model's.
std::vector<std::string> requested_outputs(const py::object& output_names, const Session& session) {
  std::vector<std::string> names;
  if (output_names.is_none()) {
    for (const TensorSignature& sig : session.outputs()) names.push_back(sig.name);
    return names;
  }
  // A single string would otherwise be read as a list of one-letter names.
  if (py::isinstance<py::str>(output_names) || !py::isinstance<py::sequence>(output_names)) {
    throw_user_error(str_cat("output_names must be a list of output names or None; given ",
                             std::string(py::str(output_names.get_type().attr("__name__")))));
  }
  for (const py::handle item : output_names) {
    if (!py::isinstance<py::str>(item)) {
      throw_user_error(str_cat("output names must be strings; given ",
                               std::string(py::str(item.get_type().attr("__name__")))));
    }
    std::string name = item.cast<std::string>();
    const auto& outs = session.outputs();
    const bool known = std::any_of(outs.begin(), outs.end(), [&](const TensorSignature& s) { return s.name == name; });
    if (!known) throw_user_error(str_cat("unknown output '", name, "'; the model's outputs are ", output_list(session)));
    names.push_back(std::move(name));
  }
  return names;
}

void check_dims(const Dims& dims) {
  for (const auto& [symbol, size] : dims) {
    if (size < 0) throw_user_error(str_cat("dims['", symbol, "'] is ", size, "; a dim size is 0 or more"));
  }
}

}  // namespace

std::shared_ptr<PySession> PySession::from_path(const std::string& path, const SessionConfig& config) {
  const SessionOptions options = session_options(config);
  std::shared_ptr<const Session> session;
  {
    // Loading and (for static shapes) compiling can take seconds; other threads may run.
    py::gil_scoped_release release;
    session = create_session(load_onnx_file(path), options);
  }
  return std::shared_ptr<PySession>(new PySession(std::move(session), path));
}

std::shared_ptr<PySession> PySession::from_bytes(const std::string& bytes, const SessionConfig& config) {
  const SessionOptions options = session_options(config);
  const std::string source = "<model bytes>";
  std::shared_ptr<const Session> session;
  {
    py::gil_scoped_release release;
    // No base directory: a model in memory cannot refer to external data files.
    session = create_session(load_onnx_bytes(bytes, "", {}, source), options);
  }
  return std::shared_ptr<PySession>(new PySession(std::move(session), source));
}

py::list PySession::inputs() const { return signatures(session_->inputs()); }
py::list PySession::outputs() const { return signatures(session_->outputs()); }
std::string PySession::level() const { return std::string(opt_level_name(session_->options().level)); }

py::list PySession::run(const py::object& output_names, const py::dict& feeds, const PyRunOptions* options) const {
  const std::vector<std::string> names = requested_outputs(output_names, *session_);
  // Destroyed after the GIL is taken back (its arrays' references are Python objects).
  TensorMap inputs = tensors_from_feeds(feeds, *session_);
  Result<TensorMap> outputs = Status::internal_error("not run");
  RunLimits limits;
  std::shared_ptr<std::atomic<bool>> terminate;  // kept alive through the run
  if (options != nullptr) {
    terminate = options->terminate;
    limits.cancel = terminate.get();
    if (options->timeout_ms > 0) {
      limits.deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(options->timeout_ms * 1000));
    }
  }
  {
    // Session::run is safe to call concurrently: threads sharing one session run in parallel.
    py::gil_scoped_release release;
    outputs = session_->run(inputs, limits);
  }
  TensorMap results = value_or_throw(std::move(outputs));
  py::list list;
  std::set<std::string> returned;
  for (const std::string& name : names) {
    // A name asked for twice gets its own copy: arrays sharing memory would change together.
    const Tensor& t = results.at(name);
    list.append(numpy_from_tensor(returned.insert(name).second ? t : t.clone()));
  }
  return list;
}

TensorMap PySession::gather_inputs(const py::object& inputs, const Session& session, uint64_t seed,
                                   const Dims& dims) const {
  if (!inputs.is_none()) {
    if (!py::isinstance<py::dict>(inputs)) {
      throw_user_error(str_cat("inputs must be a dict {name: numpy array} or None; given ",
                               std::string(py::str(inputs.get_type().attr("__name__")))));
    }
    return tensors_from_feeds(py::reinterpret_borrow<py::dict>(inputs), session);
  }
  check_dims(dims);
  return value_or_throw(random_inputs(session, seed, dims));
}

std::string PySession::report_json(const Dims& dims) const {
  check_dims(dims);
  const SessionOptions& options = session_->options();
  py::gil_scoped_release release;
  const Graph model = value_or_throw(session_->model());
  FusionAnalysis analysis = value_or_throw(analyze_fusion(model, options.level, options.pipeline, dims));
  return fusion_report_json(make_fusion_report(analysis));
}

py::dict PySession::profile(int runs, int warmup, const py::object& inputs, uint64_t seed, const Dims& dims,
                            const std::string& small_bytes) const {
  if (runs < 1) throw_user_error(str_cat("n (timed runs) must be 1 or more, given ", runs));
  if (warmup < 0) throw_user_error(str_cat("warmup must be 0 or more, given ", warmup));
  ProfileOptions options;
  options.runs = runs;
  options.warmup = warmup;
  options.small_op_bytes = value_or_throw(parse_byte_size(small_bytes));
  TensorMap feeds = gather_inputs(inputs, *session_, seed, dims);
  Result<Profile> result = Status::internal_error("not profiled");
  {
    py::gil_scoped_release release;
    auto plan = session_->plan_for(feeds);
    result = plan.is_ok() ? profile_plan(**plan, feeds, options, level()) : Result<Profile>(plan.status());
  }
  const Profile p = value_or_throw(std::move(result));
  py::list steps;
  for (const StepProfile& s : p.steps) {
    py::dict step;
    step["node"] = s.node;
    step["op"] = s.op;
    step["kernel"] = s.kernel;
    step["output_bytes"] = s.output_bytes;
    step["mean_us"] = s.mean_us;
    steps.append(step);
  }
  py::list kernels;
  for (const KernelRow& r : p.table()) {
    py::dict row;
    row["op"] = r.op;
    row["kernel"] = r.kernel;
    row["count"] = r.count;
    row["total_us"] = r.total_us;
    row["mean_us"] = r.mean_us;
    row["percent"] = r.percent;
    kernels.append(row);
  }
  py::dict out;
  out["level"] = p.label;
  out["runs"] = p.runs;
  out["step_us_per_run"] = p.step_us_per_run;
  out["wall_us_per_run"] = p.wall_us_per_run;
  out["small_op_bytes"] = options.small_op_bytes;
  out["small_op_share"] = p.small_op_share;
  out["small_kernels"] = p.small_kernels;
  out["steps"] = steps;
  out["kernels"] = kernels;
  return out;
}

py::dict PySession::validate(const py::object& inputs, const std::optional<std::string>& level, std::optional<double> rtol,
                             double atol, uint64_t seed, const Dims& dims) const {
  if ((rtol && !(*rtol >= 0)) || !(atol >= 0)) throw_user_error("rtol and atol must be 0 or more");
  SessionOptions options = session_->options();
  if (level) options.level = value_or_throw(parse_opt_level(*level));
  SessionOptions eager_options = options;
  eager_options.mode = ExecutionMode::kEager;
  const Graph model = value_or_throw(session_->model());
  Tolerance tol{rtol.value_or(0), atol};
  double sensitivity = -1;  // not measured: the caller gave rtol
  std::shared_ptr<const Session> eager;
  {
    py::gil_scoped_release release;
    eager = create_session(model.clone(), eager_options);
  }
  TensorMap feeds = gather_inputs(inputs, *eager, seed, dims);
  Result<ValidationResult> result = Status::internal_error("not validated");
  {
    // As `opfuse validate`: eager mode (the reference kernels) is the oracle.
    py::gil_scoped_release release;
    Result<TensorMap> reference = eager->run(feeds);
    if (reference.is_ok() && !rtol) {
      Result<double> s = rounding_sensitivity(*eager, feeds, *reference);
      if (s.is_ok()) {
        sensitivity = *s;
        tol.rtol = tolerance_for_sensitivity(sensitivity).rtol;
      } else {
        reference = s.status();
      }
    }
    result = reference.is_ok() ? validate_against(model, options, feeds, *reference, tol)
                               : Result<ValidationResult>(reference.status());
  }
  const ValidationResult v = value_or_throw(std::move(result));
  py::list outputs;
  double max_abs = 0, max_rel = 0;
  for (const OutputDiff& d : v.outputs) {
    py::dict diff;
    diff["name"] = d.name;
    diff["max_abs"] = d.max_abs;
    diff["max_rel"] = d.max_rel;
    diff["ok"] = d.ok;
    outputs.append(diff);
    max_abs = std::max(max_abs, d.max_abs);
    max_rel = std::max(max_rel, d.max_rel);
  }
  py::dict out;
  out["level"] = std::string(opt_level_name(options.level));
  out["ok"] = v.ok;
  out["rtol"] = tol.rtol;
  if (sensitivity >= 0) out["sensitivity"] = sensitivity;
  out["atol"] = atol;
  out["max_abs"] = max_abs;
  out["max_rel"] = max_rel;
  out["outputs"] = outputs;
  return out;
}

py::dict PySession::save_optimized(const std::string& path, bool force, bool standard_only, const Dims& dims) const {
  // write_file_atomically refuses too, but its message names the CLI's --force.
  std::error_code ec;
  if (!force && std::filesystem::exists(path, ec)) {
    throw_user_error(str_cat("'", path, "' exists; pass force=True to overwrite it"));
  }
  throw_if_error(check_can_write(path, force));
  check_dims(dims);
  const SessionOptions& options = session_->options();
  std::vector<std::string> disabled;
  FusionAnalysis analysis;
  std::string bytes;
  {
    py::gil_scoped_release release;
    const Graph model = value_or_throw(session_->model());
    analysis = standard_only ? value_or_throw(analyze_fusion_standard_only(model, options.level,
                                                                           options.pipeline, dims, disabled))
                             : value_or_throw(analyze_fusion(model, options.level, options.pipeline, dims));
    OnnxExportOptions export_options;
    export_options.standard_only = standard_only;
    export_options.target = std::string(isa_tier_name(active_target().isa));
    bytes = value_or_throw(export_onnx(analysis.after, export_options));
    throw_if_error(write_file_atomically(path, bytes, force));
  }
  py::dict out;
  out["path"] = path;
  out["level"] = level();
  out["nodes_before"] = analysis.before.num_nodes();
  out["nodes_after"] = analysis.after.num_nodes();
  out["bytes"] = bytes.size();
  out["rules_left_out"] = disabled;
  return out;
}

}  // namespace opfuse::python
