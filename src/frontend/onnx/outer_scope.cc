#include "frontend/onnx/outer_scope.h"

#include <unordered_set>

namespace opfuse::onnx_import {
namespace {

void add_once(const std::string& name, std::vector<std::string>& out, std::unordered_set<std::string>& seen) {
  if (!name.empty() && seen.insert(name).second) out.push_back(name);
}

// The names `graph` reads that it does not define itself.
std::vector<std::string> free_names(const onnx::GraphProto& graph) {
  std::unordered_set<std::string> defined;
  for (const auto& t : graph.initializer()) defined.insert(t.name());
  for (const auto& v : graph.input()) defined.insert(v.name());
  for (const auto& n : graph.node()) defined.insert(n.output().begin(), n.output().end());
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  auto read = [&](const std::string& name) {
    if (!defined.count(name)) add_once(name, out, seen);
  };
  for (const auto& n : graph.node()) {
    for (const std::string& in : n.input()) read(in);
    for (const std::string& name : outer_scope_reads(n)) read(name);
  }
  // A body may return an outer value unchanged (an If branch passing a tensor through).
  for (const auto& v : graph.output()) read(v.name());
  return out;
}

}  // namespace

std::vector<std::string> outer_scope_reads(const onnx::NodeProto& node) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& a : node.attribute()) {
    std::vector<const onnx::GraphProto*> bodies;
    if (a.has_g()) bodies.push_back(&a.g());
    for (const auto& g : a.graphs()) bodies.push_back(&g);
    for (const onnx::GraphProto* body : bodies) {
      for (const std::string& name : free_names(*body)) add_once(name, out, seen);
    }
  }
  return out;
}

}  // namespace opfuse::onnx_import
