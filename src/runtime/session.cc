#include "runtime/session.h"

#include <map>

#include "ir/verifier.h"

namespace opfuse {

std::string TensorSignature::to_string() const {
  return str_cat(name, ": ", dtype_name(dtype), shape ? shape_to_string(*shape) : "[*]");
}

Result<Session> Session::create(Graph graph, SessionOptions options) {
  OPFUSE_TRY(graph.topological_sort());
  OPFUSE_TRY(verify_graph(graph));
  Session session;
  session.options_ = options;
  for (const Value* v : graph.inputs()) {
    session.inputs_.push_back({v->name(), v->dtype, v->shape});
  }
  for (const Value* v : graph.outputs()) {
    session.outputs_.push_back({v->name(), v->dtype, v->shape});
  }
  session.graph_ = std::make_shared<const Graph>(std::move(graph));
  return session;
}

Status Session::check_inputs(const TensorMap& inputs) const {
  auto list_inputs = [&] {
    std::string names;
    for (const auto& s : inputs_) names += (names.empty() ? "" : ", ") + s.to_string();
    return names;
  };
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    for (const auto& s : inputs_) known = known || s.name == name;
    if (!known) {
      return Status::user_error(
          str_cat("unknown input '", name, "'; the model's inputs are ", list_inputs()));
    }
  }
  std::map<std::string, std::pair<int64_t, std::string>> bound;  // symbol -> (size, bound by)
  for (const auto& sig : inputs_) {
    auto it = inputs.find(sig.name);
    if (it == inputs.end()) {
      return Status::user_error(str_cat("missing input '", sig.name, "' (expected ",
                                        sig.to_string(), ")"));
    }
    const Tensor& t = it->second;
    const std::string expected = str_cat("expected ", dtype_name(sig.dtype),
                                         sig.shape ? shape_to_string(*sig.shape) : "[*]",
                                         ", given ", t.type_string());
    if (!t.defined()) return Status::user_error(str_cat("input '", sig.name, "' is empty"));
    if (t.dtype() != sig.dtype) {
      return Status::user_error(str_cat("input '", sig.name, "' has the wrong dtype: ", expected));
    }
    if (!sig.shape) continue;
    if (static_cast<size_t>(t.rank()) != sig.shape->size()) {
      return Status::user_error(str_cat("input '", sig.name, "' has the wrong rank: ", expected));
    }
    for (size_t i = 0; i < sig.shape->size(); ++i) {
      const Dim& d = (*sig.shape)[i];
      const int64_t given = t.dims()[i];
      if (d.is_known() && d.value() != given) {
        return Status::user_error(
            str_cat("input '", sig.name, "' has the wrong shape (dim ", i, "): ", expected));
      }
      if (d.is_symbolic()) {
        auto [entry, inserted] = bound.try_emplace(d.symbol_name(), given, sig.name);
        if (!inserted && entry->second.first != given) {
          return Status::user_error(str_cat(
              "input '", sig.name, "' dim ", i, " ('", d.symbol_name(), "') is ", given,
              " but input '", entry->second.second, "' bound '", d.symbol_name(), "' to ",
              entry->second.first));
        }
      }
    }
  }
  return Status::ok();
}

Result<TensorMap> Session::run(const TensorMap& inputs) const {
  OPFUSE_TRY(check_inputs(inputs));
  return run_eager(*graph_, inputs);
}

}  // namespace opfuse
