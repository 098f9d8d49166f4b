// The extension module `opfuse._opfuse`: what python/opfuse/*.py builds the public API on
// (docs/python.md). Kept to the parts that need C++; argument handling that is only Python
// (providers, os.PathLike, a fusion dict, NodeArg objects) lives in python/opfuse/session.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/target.h"
#include "errors.h"
#include "py_session.h"

namespace py = pybind11;
using opfuse::python::PyRunOptions;
using opfuse::python::PySession;
using opfuse::python::SessionConfig;

namespace {

SessionConfig make_config(std::optional<std::string> level, int threads, std::optional<std::string> target,
                          std::optional<std::string> fusion_json, std::optional<std::string> fusion_file,
                          std::optional<std::string> tuning, bool flush_denormals) {
  SessionConfig config;
  config.level = std::move(level);
  config.threads = threads;
  config.target = target.value_or("");
  config.fusion_json = std::move(fusion_json);
  config.fusion_file = std::move(fusion_file);
  config.tuning = std::move(tuning);
  config.flush_denormals = flush_denormals;
  return config;
}

// The CPU tier compiles are for (core/target.h): the host capped by OPFUSE_TARGET or by an
// earlier session's target=. Only reads it: fixing the target here would refuse a later
// session's target= (the tier is chosen once per process).
py::dict target_info() {
  const opfuse::Target target = opfuse::active_target();
  const opfuse::Target& host = opfuse::host_target();
  py::list available;
  for (opfuse::IsaTier tier : opfuse::all_isa_tiers()) {
    if (tier <= host.isa) available.append(std::string(opfuse::isa_tier_name(tier)));
  }
  py::dict info;
  info["isa"] = std::string(opfuse::isa_tier_name(target.isa));
  info["host_isa"] = std::string(opfuse::isa_tier_name(host.isa));
  info["available_isas"] = available;
  info["vector_bytes"] = target.vector_bytes();
  info["channel_block"] = target.channel_block();
  info["cores"] = target.cores;
  info["l1d_bytes"] = target.l1d_bytes;
  info["l2_bytes"] = target.l2_bytes;
  info["l3_bytes"] = target.l3_bytes;
  info["core_round_trip_ns"] = target.core_round_trip_ns;
  info["near_cores"] = target.near_cores();
  info["description"] = target.describe();
  return info;
}

}  // namespace

PYBIND11_MODULE(_opfuse, m) {
  m.doc() = "opfuse's C++ core; use the `opfuse` package, not this module";
  opfuse::python::register_errors(m);

  py::class_<PyRunOptions>(m, "RunOptions", "onnxruntime's RunOptions: terminate, and opfuse's timeout_ms")
      .def(py::init<>())
      .def_property(
          "terminate", [](const PyRunOptions& o) { return o.terminate->load(); },
          [](PyRunOptions& o, bool v) { o.terminate->store(v); },
          "True stops every run using these options at its next kernel boundary (from any thread)")
      .def_property(
          "timeout_ms", [](const PyRunOptions& o) { return o.timeout_ms; },
          [](PyRunOptions& o, double v) {
            if (!(v >= 0)) opfuse::python::throw_user_error(opfuse::str_cat("timeout_ms must be 0 (none) or more, given ", v));
            o.timeout_ms = v;
          },
          "> 0: a run still going after this many milliseconds stops at its next kernel boundary");

  py::class_<PySession, std::shared_ptr<PySession>>(m, "Session")
      .def_static(
          "from_path",
          [](const std::string& path, std::optional<std::string> level, int threads, std::optional<std::string> target,
             std::optional<std::string> fusion_json, std::optional<std::string> fusion_file,
             std::optional<std::string> tuning, bool flush_denormals) {
            return PySession::from_path(
                path, make_config(level, threads, target, fusion_json, fusion_file, tuning, flush_denormals));
          },
          py::arg("path"), py::kw_only(), py::arg("level") = py::none(), py::arg("threads") = 0,
          py::arg("target") = py::none(), py::arg("fusion_json") = py::none(), py::arg("fusion_file") = py::none(),
          py::arg("tuning") = py::none(), py::arg("flush_denormals") = false)
      .def_static(
          "from_bytes",
          [](const py::bytes& model, std::optional<std::string> level, int threads, std::optional<std::string> target,
             std::optional<std::string> fusion_json, std::optional<std::string> fusion_file,
             std::optional<std::string> tuning, bool flush_denormals) {
            return PySession::from_bytes(
                std::string(model),
                make_config(level, threads, target, fusion_json, fusion_file, tuning, flush_denormals));
          },
          py::arg("model"), py::kw_only(), py::arg("level") = py::none(), py::arg("threads") = 0,
          py::arg("target") = py::none(), py::arg("fusion_json") = py::none(), py::arg("fusion_file") = py::none(),
          py::arg("tuning") = py::none(), py::arg("flush_denormals") = false)
      .def("inputs", &PySession::inputs)
      .def("outputs", &PySession::outputs)
      .def_property_readonly("level", &PySession::level)
      .def_property_readonly("threads", &PySession::threads)
      .def("run", &PySession::run, py::arg("output_names"), py::arg("feeds"), py::arg("options") = nullptr)
      .def("report_json", &PySession::report_json, py::arg("dims"))
      .def("profile", &PySession::profile, py::arg("runs"), py::arg("warmup"), py::arg("inputs"), py::arg("seed"),
           py::arg("dims"), py::arg("small_bytes"))
      .def("validate", &PySession::validate, py::arg("inputs"), py::arg("level"), py::arg("rtol"), py::arg("atol"),
           py::arg("seed"), py::arg("dims"))
      .def("save_optimized", &PySession::save_optimized, py::arg("path"), py::arg("force"), py::arg("standard_only"),
           py::arg("dims"));

  m.def("target_info", &target_info, "The CPU tier compiles are for, and the host's caches and cores.");
}
