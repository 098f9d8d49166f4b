#include "kernels/kernel_registry.h"

#include <deque>
#include <mutex>

#include "ops/registry.h"

namespace opfuse {
namespace {

struct Entry {
  std::string domain, name, op_type;
  KernelImpl impl;  // its string_views point into this entry's strings
};

struct Table {
  std::mutex mutex;
  std::deque<Entry> entries;  // deque: entries never move, so the views stay valid
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

Status register_kernel(const std::string& domain, const KernelImpl& impl) {
  const std::string op_type(impl.op_type);
  const std::string name(impl.name);
  const std::string who = str_cat("kernel '", name, "' for op ", op_type, " (domain ", display_domain(domain), ")");
  if (name.empty() || impl.supports == nullptr || impl.create == nullptr) {
    return Status::user_error(who + ": needs a name, a supports and a create function");
  }
  if (OpRegistry::global().find(domain, op_type) == nullptr) {
    return Status::user_error(who + ": the op is not registered (register the op first)");
  }
  Table& t = table();
  std::lock_guard lock(t.mutex);
  for (const Entry& e : t.entries) {
    if (e.domain == domain && e.op_type == op_type && e.name == name) {
      return Status::user_error(who + " is already registered");
    }
  }
  Entry& e = t.entries.emplace_back(Entry{domain, name, op_type, impl});
  e.impl.name = e.name;
  e.impl.op_type = e.op_type;
  return Status::ok();
}

const KernelImpl* find_registered_kernel(const KernelCompileContext& ctx) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  for (const Entry& e : t.entries) {
    if (e.domain == ctx.node.domain() && e.op_type == ctx.node.op_type() && e.impl.supports(ctx)) {
      return &e.impl;
    }
  }
  return nullptr;
}

}  // namespace opfuse
