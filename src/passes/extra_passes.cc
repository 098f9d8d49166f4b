#include "passes/extra_passes.h"

#include <list>
#include <mutex>


namespace opfuse {
namespace {

struct Entry {
  std::string name, summary;  // owned here: PassDef holds views of them
  PassDef def;
};

struct Registry {
  std::mutex mutex;
  std::list<Entry> entries;  // list: PassDef pointers handed out stay valid
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

Status register_extra_pass(std::string_view name, std::string_view summary, PassFn run) {
  for (const PassDef& p : all_passes()) {
    if (p.name == name) return Status::user_error(str_cat("a pass named '", name, "' exists already"));
  }
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    for (const Entry& e : r.entries) {
      if (e.name == name) return Status::user_error(str_cat("a pass named '", name, "' exists already"));
    }
    Entry& e = r.entries.emplace_back();
    e.name = name;
    e.summary = summary;
    e.def = PassDef{e.name, e.summary, run};
  }
  return Status::ok();
}

bool unregister_extra_pass(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto it = r.entries.begin(); it != r.entries.end(); ++it) {
    if (it->name == name) {
      r.entries.erase(it);
      return true;
    }
  }
  return false;
}

const PassDef* find_extra_pass(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    if (e.name == name) return &e.def;
  }
  return nullptr;
}

std::vector<PassDef> extra_passes() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<PassDef> out;
  for (const Entry& e : r.entries) out.push_back(e.def);
  return out;
}

}  // namespace opfuse
