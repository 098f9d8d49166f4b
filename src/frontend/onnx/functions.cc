#include "frontend/onnx/functions.h"

#include <map>
#include <set>
#include <string>

#include "frontend/onnx/opsets.h"

namespace opfuse::onnx_import {
namespace {

constexpr int kMaxDepth = 16;

using FunctionKey = std::pair<std::string, std::string>;  // (canonical domain, name)

class Inliner {
 public:
  explicit Inliner(onnx::ModelProto& model) : model_(model) {
    for (const onnx::FunctionProto& f : model.functions()) functions_[{canonical_domain(f.domain()), f.name()}] = &f;
    // A call's own name is free: the call is replaced by its body, named after it.
    for (const auto& n : model.graph().node()) {
      if (function_for(n) == nullptr) taken_.insert(n.name());
    }
  }

  Status run() {
    for (const auto& [key, f] : functions_) OPFUSE_TRY(merge_opsets(*f));
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (const onnx::NodeProto& node : model_.graph().node()) OPFUSE_TRY(emit(node, 0, out));
    model_.mutable_graph()->mutable_node()->Swap(&out);
    return Status::ok();
  }

 private:
  const onnx::FunctionProto* function_for(const onnx::NodeProto& node) const {
    auto it = functions_.find({canonical_domain(node.domain()), node.op_type()});
    return it == functions_.end() ? nullptr : it->second;
  }

  static std::string describe(const onnx::FunctionProto& f) {
    return str_cat("function ", f.name(), " (domain ", f.domain().empty() ? "ai.onnx" : f.domain(), ")");
  }

  // A function's body nodes are written against its own opset imports; they must agree with
  // the model's (the body becomes part of the model's graph).
  Status merge_opsets(const onnx::FunctionProto& f) {
    for (const auto& imp : f.opset_import()) {
      const std::string domain = canonical_domain(imp.domain());
      onnx::OperatorSetIdProto* found = nullptr;
      for (auto& m : *model_.mutable_opset_import()) {
        if (canonical_domain(m.domain()) == domain) found = &m;
      }
      if (found == nullptr) {
        auto* added = model_.add_opset_import();
        added->set_domain(imp.domain());
        added->set_version(imp.version());
      } else if (found->version() != imp.version()) {
        return Status::user_error(str_cat(describe(f), " imports domain ", domain.empty() ? "ai.onnx" : domain,
                                          " opset ", imp.version(), " but the model imports opset ",
                                          found->version(), "; opfuse inlines functions only when they agree"));
      }
    }
    return Status::ok();
  }

  std::string fresh_call_name(const onnx::NodeProto& call) {
    std::string base = call.name().empty() ? call.op_type() : call.name();
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = str_cat(base, "_", k);
    taken_.insert(name);
    return name;
  }

  Status emit(const onnx::NodeProto& node, int depth,
              google::protobuf::RepeatedPtrField<onnx::NodeProto>& out) {
    const onnx::FunctionProto* f = function_for(node);
    if (f == nullptr) {
      *out.Add() = node;
      return Status::ok();
    }
    const std::string call = fresh_call_name(node);
    const std::string who = str_cat("node '", call, "' calling ", describe(*f));
    if (depth >= kMaxDepth) {
      return Status::user_error(str_cat(who, ": functions nest more than ", kMaxDepth, " deep (recursion?)"));
    }
    if (node.input_size() > f->input_size() || node.output_size() > f->output_size()) {
      return Status::user_error(str_cat(who, ": the call has ", node.input_size(), " inputs and ",
                                        node.output_size(), " outputs; the function declares ",
                                        f->input_size(), " and ", f->output_size()));
    }
    std::map<std::string, std::string> rename;
    for (int i = 0; i < f->input_size(); ++i) rename[f->input(i)] = i < node.input_size() ? node.input(i) : "";
    for (int i = 0; i < f->output_size(); ++i) {
      rename[f->output(i)] = i < node.output_size() && !node.output(i).empty()
                                 ? node.output(i) : str_cat(call, "/", f->output(i));
    }
    std::map<std::string, const onnx::AttributeProto*> actual;
    for (const auto& a : node.attribute()) actual[a.name()] = &a;
    // (Attribute defaults, FunctionProto.attribute_proto, arrived after the ONNX release this
    // builds against: an attribute the call does not set falls back to the body op's default.)
    std::set<std::string> declared(f->attribute().begin(), f->attribute().end());
    for (const auto& a : node.attribute()) {
      if (!declared.count(a.name())) {
        return Status::user_error(str_cat(who, ": attribute '", a.name(), "' is not declared by the function"));
      }
    }
    for (const onnx::NodeProto& body : f->node()) {
      onnx::NodeProto inst = body;
      inst.set_name(str_cat(call, "/", body.name().empty() ? body.op_type() : body.name()));
      for (auto& in : *inst.mutable_input()) {
        if (in.empty()) continue;
        auto it = rename.find(in);
        if (it == rename.end()) {
          return Status::user_error(str_cat(who, ": body node '", body.name(), "' reads '", in,
                                            "', which is neither a function input nor made by an earlier body node"));
        }
        in = it->second;
      }
      for (auto& o : *inst.mutable_output()) {
        if (o.empty()) continue;
        auto it = rename.find(o);
        if (it == rename.end()) it = rename.emplace(o, str_cat(call, "/", o)).first;
        o = it->second;
      }
      inst.clear_attribute();
      for (const auto& a : body.attribute()) {
        if (a.ref_attr_name().empty()) {
          *inst.add_attribute() = a;
          continue;
        }
        const onnx::AttributeProto* src = nullptr;
        if (auto it = actual.find(a.ref_attr_name()); it != actual.end()) src = it->second;
        if (src == nullptr) continue;  // not given: the body op's own default
        onnx::AttributeProto resolved = *src;
        resolved.set_name(a.name());
        *inst.add_attribute() = std::move(resolved);
      }
      if (function_for(inst) == nullptr) taken_.insert(inst.name());
      OPFUSE_TRY(emit(inst, depth + 1, out));
    }
    return Status::ok();
  }

  onnx::ModelProto& model_;
  std::map<FunctionKey, const onnx::FunctionProto*> functions_;
  std::set<std::string> taken_;
};

}  // namespace

Status inline_local_functions(onnx::ModelProto& model) {
  if (model.functions_size() == 0) return Status::ok();
  return Inliner(model).run();
}

}  // namespace opfuse::onnx_import
