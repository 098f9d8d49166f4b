#include "ops/registry.h"

#include "ops/op_list.h"

namespace opfuse {

std::string display_domain(const std::string& domain) {
  return domain.empty() ? "ai.onnx" : domain;
}

OpRegistry& OpRegistry::global() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry();  // never destroyed: ops are referenced until exit
    for (OpDef& def : builtin_ops()) {
      Status s = r->add(std::move(def));
      if (!s.is_ok()) {
        // A malformed built-in record is a programming error caught by the first test run.
        fprintf(stderr, "opfuse: bad built-in op record: %s\n", s.message().c_str());
        abort();
      }
    }
    return r;
  }();
  return *registry;
}

Status OpRegistry::add(OpDef def) {
  if (def.name.empty()) return Status::user_error("op record has no name");
  const std::string who = str_cat("op ", def.name, " (domain ", display_domain(def.domain), ")");
  if (def.min_inputs > def.max_inputs || def.min_outputs > def.max_outputs) {
    return Status::user_error(who + ": min arity above max arity");
  }
  if (def.infer == nullptr) return Status::user_error(who + ": no shape inference function");
  if (def.reference == nullptr && def.scalar == nullptr) {
    return Status::user_error(who + ": neither a reference kernel nor a scalar expression");
  }
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(def.domain, def.name);
  if (by_name_.count(key)) return Status::user_error(who + " is already registered");
  defs_.push_back(std::move(def));
  by_name_[key] = &defs_.back();
  return Status::ok();
}

const OpDef* OpRegistry::find(const std::string& domain, const std::string& op_type) const {
  std::lock_guard lock(mutex_);
  // "ai.onnx" is another spelling of the default domain.
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  auto it = by_name_.find(std::make_pair(d, op_type));
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::lock_guard lock(mutex_);
  std::vector<const OpDef*> out;
  for (const auto& [key, def] : by_name_) out.push_back(def);
  return out;
}

}  // namespace opfuse
