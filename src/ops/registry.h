// The registry of operator records. Built-in ops come from op_list.cc; custom ops can be added.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ops/op_def.h"

namespace opfuse {

class OpRegistry {
 public:
  // The process-wide registry with every built-in op.
  static OpRegistry& global();

  // Fails if an op of the same domain and name exists or the record is malformed.
  Status add(OpDef def);
  const OpDef* find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpDef*> all() const;

 private:
  mutable std::mutex mutex_;
  std::deque<OpDef> defs_;  // deque: pointers stay valid as ops are added
  std::map<std::pair<std::string, std::string>, const OpDef*> by_name_;
};

// "ai.onnx" for the empty default domain, else the domain itself.
std::string display_domain(const std::string& domain);

}  // namespace opfuse
