#include "frontend/onnx/constant_if.h"

#include <map>
#include <set>
#include <string>

#include "frontend/onnx/opsets.h"
#include "frontend/onnx/tensor_proto.h"

namespace opfuse::onnx_import {
namespace {

constexpr int kMaxRounds = 64;  // nesting depth of constant Ifs inlined

// The bool value of a one-element tensor, or nullopt.
std::optional<bool> truth_of(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::BOOL) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  if (n != 1) return std::nullopt;
  if (t.int32_data_size() == 1) return t.int32_data(0) != 0;
  if (t.raw_data().size() == 1) return t.raw_data()[0] != 0;
  return std::nullopt;
}

// The constant bool values the main graph defines by name (initializers and Constant nodes).
std::map<std::string, bool> constant_conditions(const onnx::GraphProto& g) {
  std::map<std::string, bool> out;
  for (const auto& t : g.initializer()) {
    if (auto v = truth_of(t)) out[t.name()] = *v;
  }
  for (const auto& n : g.node()) {
    if (n.op_type() != "Constant" || !canonical_domain(n.domain()).empty() || n.output_size() != 1) continue;
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t()) {
        if (auto v = truth_of(a.t())) out[n.output(0)] = *v;
      }
    }
  }
  // A graph input of the same name would let the caller override it: not a constant.
  for (const auto& in : g.input()) out.erase(in.name());
  return out;
}

// Renames references (node inputs) to the names in `renamed`, in `g` and the subgraphs of its
// nodes, except where a subgraph defines the name itself.
void rename_references(onnx::GraphProto& g, const std::map<std::string, std::string>& renamed) {
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input()) {
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    }
    for (auto& a : *n.mutable_attribute()) {
      std::vector<onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(a.mutable_g());
      for (auto& sg : *a.mutable_graphs()) subs.push_back(&sg);
      for (onnx::GraphProto* sub : subs) {
        std::map<std::string, std::string> visible = renamed;
        for (const auto& t : sub->initializer()) visible.erase(t.name());
        for (const auto& i : sub->input()) visible.erase(i.name());
        for (const auto& sn : sub->node()) {
          for (const auto& o : sn.output()) visible.erase(o);
        }
        rename_references(*sub, visible);
      }
    }
  }
}

class IfInliner {
 public:
  explicit IfInliner(onnx::ModelProto& model) : g_(*model.mutable_graph()) {
    for (const auto& t : g_.initializer()) taken_.insert(t.name());
    for (const auto& v : g_.input()) taken_.insert(v.name());
    for (const auto& v : g_.output()) taken_.insert(v.name());
    for (const auto& n : g_.node()) {
      taken_.insert(n.name());
      taken_.insert(n.output().begin(), n.output().end());
    }
  }

  // One pass over the main graph; whether anything was inlined.
  Result<bool> round() {
    const std::map<std::string, bool> constants = constant_conditions(g_);
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    nodes.Swap(g_.mutable_node());
    bool changed = false;
    for (int i = 0; i < nodes.size(); ++i) {
      onnx::NodeProto& n = nodes[i];
      const bool is_if = n.op_type() == "If" && canonical_domain(n.domain()).empty() && n.input_size() == 1;
      auto cond = is_if ? constants.find(n.input(0)) : constants.end();
      if (cond == constants.end()) {
        *g_.add_node() = std::move(n);
        continue;
      }
      OPFUSE_TRY(inline_branch(n, i, cond->second));
      changed = true;
    }
    return changed;
  }

 private:
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = str_cat(base, "_", k);
    taken_.insert(name);
    return name;
  }

  Status inline_branch(const onnx::NodeProto& n, int index, bool cond) {
    const std::string label = str_cat("node '", n.name().empty() ? str_cat("If_", index) : n.name(), "' (If)");
    const std::string branch_name = cond ? "then_branch" : "else_branch";
    const onnx::GraphProto* branch = nullptr;
    for (const auto& a : n.attribute()) {
      if (a.name() == branch_name && a.has_g()) branch = &a.g();
    }
    if (branch == nullptr) return Status::user_error(str_cat(label, ": has no ", branch_name));
    if (branch->output_size() != n.output_size()) {
      return Status::user_error(str_cat(label, ": its ", branch_name, " has ", branch->output_size(),
                                        " outputs but the If has ", n.output_size()));
    }
    const std::string prefix = n.name().empty() ? str_cat("If_", index) : n.name();
    // Names the branch defines get fresh ones; everything else it reads is outer scope.
    std::map<std::string, std::string> renamed;
    for (const auto& t : branch->initializer()) renamed[t.name()] = fresh(str_cat(prefix, "/", t.name()));
    for (const auto& bn : branch->node()) {
      for (const auto& o : bn.output()) {
        if (!o.empty()) renamed[o] = fresh(str_cat(prefix, "/", o));
      }
    }
    onnx::GraphProto body = *branch;
    rename_references(body, renamed);
    for (auto& t : *body.mutable_initializer()) {
      t.set_name(renamed.at(t.name()));
      *g_.add_initializer() = std::move(t);
    }
    for (auto& bn : *body.mutable_node()) {
      for (auto& o : *bn.mutable_output()) {
        if (!o.empty()) o = renamed.at(o);
      }
      bn.set_name(fresh(str_cat(prefix, "/", bn.name().empty() ? bn.op_type() : bn.name())));
      *g_.add_node() = std::move(bn);
    }
    // The If's outputs keep their names (later nodes and graph outputs read them).
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty()) continue;
      const std::string& from = branch->output(k).name();
      auto it = renamed.find(from);
      onnx::NodeProto* id = g_.add_node();
      id->set_op_type("Identity");
      id->set_name(fresh(str_cat(prefix, "/output_", k)));
      id->add_input(it != renamed.end() ? it->second : from);
      id->add_output(n.output(k));
    }
    return Status::ok();
  }

  onnx::GraphProto& g_;
  std::set<std::string> taken_;
};

}  // namespace

Status inline_constant_ifs(onnx::ModelProto& model) {
  IfInliner inliner(model);
  for (int round = 0; round < kMaxRounds; ++round) {
    OPFUSE_ASSIGN_OR_RETURN(bool changed, inliner.round());
    if (!changed) return Status::ok();
  }
  return Status::user_error(str_cat("If nodes on constant conditions are nested more than ", kMaxRounds, " deep"));
}

}  // namespace opfuse::onnx_import
