#include "runtime/session.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/digest.h"
#include "ir/verifier.h"
#include "kernels/packed_weight_cache.h"
#include "kernels/target_caps.h"
#include "ops/infer_shapes.h"
#include "passes/fusion_rules.h"
#include "passes/tuning_record.h"
#include "pipelines/pipeline.h"
#include "runtime/measuring_layout_timer.h"
#include "runtime/non_finite.h"

namespace opfuse {

// Compiled plans by input dims: a model with symbolic dims is compiled once per shape it meets.
struct Session::PlanCache {
  using Key = std::pair<std::vector<std::vector<int64_t>>, bool>;
  struct Entry {
    std::shared_ptr<const CompiledPlan> plan;
    uint64_t last_used = 0;
  };
  std::mutex mutex;
  // By input dims, and whether the plan assumes finite inputs (CompileOptions::inputs_finite).
  std::map<Key, Entry> plans;
  uint64_t clock = 0;  // ticks on every lookup: the LRU order
  int64_t compiles = 0;

  std::shared_ptr<const CompiledPlan> find(const Key& key) {
    auto it = plans.find(key);
    if (it == plans.end()) return nullptr;
    it->second.last_used = ++clock;
    return it->second.plan;
  }
  // Keeps the first plan if two threads compiled the same key; then evicts down to `max_plans`.
  std::shared_ptr<const CompiledPlan> insert(const Key& key, std::shared_ptr<const CompiledPlan> plan,
                                             size_t max_plans) {
    ++compiles;
    auto [it, inserted] = plans.try_emplace(key, Entry{std::move(plan), 0});
    it->second.last_used = ++clock;
    while (max_plans > 0 && plans.size() > max_plans) {
      auto oldest = plans.begin();
      for (auto e = plans.begin(); e != plans.end(); ++e) {
        if (e->second.last_used < oldest->second.last_used) oldest = e;
      }
      plans.erase(oldest);  // a run holding it keeps it alive through its shared_ptr
    }
    return it->second.plan;
  }
};

// The model's weights the session gave to its compiles, and the file to read them again from.
// Shared by copies of the session, as the graph is.
struct Session::Weights {
  std::mutex mutex;
  std::shared_ptr<const ConstantSource> source;  // null: the session keeps every weight
  // The weights the source reads on their own, the only ones given away: the others (made by
  // the importer, small) would need the whole model parsed again. Asked at the first compile.
  std::optional<std::unordered_set<std::string>> readable;
  // The digest of each weight given away, as loaded: what the file must still hold.
  std::unordered_map<const Value*, uint64_t> digests;
  std::vector<Value*> released;  // given away, and not held by a plan's graph since
  // Whether the session keeps every weight rather than give any away: decided at the first
  // compile (SessionOptions::keep_weights_bytes), so later compiles do not read weights back.
  std::optional<bool> keeps_all;
  // The packed weights of every plan compiled (kernels/packed_weight_cache.h): later plans share
  // them rather than pack again. Held for the session's life, so a plan evicted (max_plans)
  // leaves its packings here for the next compile; they are the model's own weights, each in
  // the few layouts its kernels ask for, not one copy per plan.
  PackedWeightCache packed;
};

namespace {

uint64_t digest_of(const Tensor& t) { return digest_bytes(t.raw_data(), t.nbytes()); }

}  // namespace

std::string_view execution_mode_name(ExecutionMode mode) {
  return mode == ExecutionMode::kEager ? "eager" : "graph";
}

Result<ExecutionMode> parse_execution_mode(std::string_view name) {
  if (name == "eager") return ExecutionMode::kEager;
  if (name == "graph") return ExecutionMode::kGraph;
  return Status::user_error(str_cat("unknown mode '", name, "' (valid: eager, graph)"));
}

std::string TensorSignature::to_string() const {
  return str_cat(name, ": ", dtype_name(dtype), shape ? shape_to_string(*shape) : "[*]");
}

Result<Session> Session::create(Graph graph, SessionOptions options) {
  if (options.target.empty()) {
    apply_target_caps();
  } else {
    OPFUSE_TRY(select_target(options.target).status());
  }
  if (const auto& tuning = options.pipeline.fusion.tuning) {
    OPFUSE_TRY(check_tuning_record(*tuning, graph, active_target()));
  }
  // Graph mode's run_pipeline checks the fusion settings; eager mode runs no pipeline, but a
  // bad rule name must not be silently ignored there either.
  if (options.mode == ExecutionMode::kEager) OPFUSE_TRY(validate_fusion_config(options.pipeline.fusion));
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
  session.specialized_ = inputs_deciding_ifs(graph);
  session.weights_ = std::make_shared<Weights>();
  session.weights_->source = graph.constant_source;
  session.graph_ = std::make_shared<Graph>(std::move(graph));
  session.plans_ = std::make_shared<PlanCache>();
  // A model with static inputs is compiled now, so errors and compile time surface here (unless
  // its plans depend on input values).
  if (options.mode == ExecutionMode::kGraph && session.specialized_.empty()) {
    std::vector<Shape> shapes;
    bool all_static = true;
    for (const auto& sig : session.inputs_) {
      all_static = all_static && sig.shape && is_static(*sig.shape);
      if (sig.shape) shapes.push_back(*sig.shape);
    }
    if (all_static) {
      OPFUSE_ASSIGN_OR_RETURN(auto plan, session.compile_for(shapes, /*inputs_finite=*/true));
      std::vector<std::vector<int64_t>> dims;
      for (const Shape& s : shapes) dims.push_back(*static_dims(s));
      session.plans_->insert({dims, true}, std::move(plan), options.max_plans);
    }
  }
  return session;
}

namespace {

// A control-flow body in graph mode: a Session of its own over the body, with the owning
// session's options (level, target, threads) but no tuning record (its node names are the main
// graph's). Plans are compiled per input shape met, like the main graph's.
class SessionBody final : public CompiledBody {
 public:
  explicit SessionBody(Session session) : session_(std::move(session)) {}
  Result<std::vector<Tensor>> run(std::vector<Tensor> inputs) const override {
    TensorMap feeds;
    for (size_t i = 0; i < inputs.size(); ++i) feeds[session_.inputs()[i].name] = std::move(inputs[i]);
    // The run this body belongs to: the same deadline, cancel flag and loop cap.
    OPFUSE_ASSIGN_OR_RETURN(TensorMap outs, session_.run(feeds, current_run_limits()));
    std::vector<Tensor> results;
    for (const auto& out : session_.outputs()) results.push_back(outs.at(out.name));
    return results;
  }

 private:
  Session session_;
};

class SessionBodyCompiler final : public SubgraphCompiler {
 public:
  explicit SessionBodyCompiler(const SessionOptions& options) : options_(options) {
    options_.pipeline.fusion.tuning.reset();
    options_.max_plans = 8;  // shapes a Loop's carried values take; each a plan
  }
  Result<std::unique_ptr<CompiledBody>> compile(const Graph& body,
                                                const std::vector<ValueType>& input_types) const override {
    Graph graph = body.clone();
    for (size_t i = 0; i < graph.inputs().size(); ++i) {
      graph.inputs()[i]->dtype = input_types[i].dtype;
      graph.inputs()[i]->shape = input_types[i].shape;
    }
    graph.captured_inputs = 0;  // a graph of its own now: its captures are ordinary inputs
    OPFUSE_TRY(infer_shapes(graph));
    OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(std::move(graph), options_));
    return std::unique_ptr<CompiledBody>(new SessionBody(std::move(session)));
  }

 private:
  SessionOptions options_;
};

}  // namespace

Status Session::read_released_weights(Graph& graph) const {
  if (weights_->released.empty()) return Status::ok();
  auto as_loaded = [&](const Value* v, const Tensor* t) {
    return t != nullptr && t->dtype() == v->dtype && t->dims() == v->constant()->dims() &&
           digest_of(*t) == weights_->digests.at(v);
  };
  std::vector<std::string> names;
  for (const Value* v : weights_->released) names.push_back(v->name());
  std::unordered_map<std::string, Tensor> read = weights_->source->read_constants(names);
  // A weight read otherwise than the model held it after loading (the file was rewritten, or
  // the importer changed the constant) is looked up in the whole model parsed again: only a
  // difference there is the file's.
  std::vector<const Value*> rest;
  for (const Value* v : weights_->released) {
    auto it = read.find(v->name());
    if (it == read.end() || !as_loaded(v, &it->second)) rest.push_back(v);
  }
  if (!rest.empty()) {
    const std::string source = weights_->source->describe();
    Result<Graph> reloaded = weights_->source->reload();
    if (!reloaded.is_ok()) {
      return Status::user_error(str_cat("cannot read the model's weights again from ", source, ": ",
                                        reloaded.status().message()));
    }
    for (const Value* v : rest) {
      const Value* again = reloaded->find_value(v->name());
      const Tensor* t = again != nullptr ? again->constant() : nullptr;
      if (!as_loaded(v, t)) {
        return Status::user_error(str_cat("the weights '", v->name(), "' in ", source,
                                          " changed since the session loaded them; create the session again"));
      }
      read.insert_or_assign(v->name(), *t);
    }
  }
  for (const Value* v : weights_->released) graph.set_constant(graph.find_value(v->name()), read.at(v->name()));
  return Status::ok();
}

Result<Graph> Session::model() const {
  std::lock_guard lock(weights_->mutex);
  Graph copy = graph_->clone();
  OPFUSE_TRY(read_released_weights(copy));
  return copy;
}

Result<Graph> Session::graph_for_compile(const std::vector<Shape>& input_shapes) const {
  std::lock_guard lock(weights_->mutex);
  OPFUSE_TRY(read_released_weights(*graph_));
  weights_->released.clear();
  // The compile gets the only copy of the weights the session alone holds: each is freed as soon
  // as the passes replace it or the kernels reading it have packed it (CompiledPlan::compile),
  // not kept beside the packed copies. Weights a plan or the caller holds stay: giving them away
  // would free nothing.
  std::vector<Value*> given;
  if (weights_->source != nullptr) {
    if (!weights_->readable) weights_->readable = weights_->source->constants_read_alone();
    size_t given_bytes = 0;
    for (Value* v : graph_->values()) {
      const Tensor* t = v->constant();
      if (t == nullptr || t->nbytes() == 0 || !t->sole_owner() || !weights_->readable->count(v->name())) continue;
      given.push_back(v);
      given_bytes += t->nbytes();
    }
    // A model compiled per input shape (or per value of an input deciding an If) keeps small
    // weights. Measured on ppocr_v4_rec (PaddleOCR's recognizer, 10 MB of weights, a compile per
    // image width; Zen 4, 2 threads): each new width compiled in 35-36 ms instead of 42-47.
    if (!weights_->keeps_all) {
      const bool per_input = !specialized_.empty() || std::any_of(inputs_.begin(), inputs_.end(), [](const auto& sig) {
                               return !sig.shape || !is_static(*sig.shape);
                             });
      weights_->keeps_all = per_input && given_bytes <= options_.keep_weights_bytes;
    }
    if (*weights_->keeps_all) given.clear();
    for (const Value* v : given) {
      if (!weights_->digests.count(v)) weights_->digests[v] = digest_of(*v->constant());
    }
  }
  OPFUSE_ASSIGN_OR_RETURN(Graph bound, bind_input_shapes(*graph_, input_shapes));
  for (Value* v : given) graph_->release_constant_data(v);
  weights_->released = std::move(given);
  return bound;
}

void Session::keep_weights_the_plan_holds(const Graph& plan_graph) const {
  std::lock_guard lock(weights_->mutex);
  std::vector<Value*> released;
  for (Value* v : weights_->released) {
    // The plan's graph still has this weight as loaded (a kernel reads it when run): share it.
    const Value* kept = plan_graph.find_value(v->name());
    const Tensor* t = kept != nullptr ? kept->constant() : nullptr;
    if (t != nullptr && t->raw_data() != nullptr && t->dtype() == v->dtype && t->dims() == v->constant()->dims() &&
        digest_of(*t) == weights_->digests.at(v)) {
      graph_->set_constant(v, *t);
    } else {
      released.push_back(v);
    }
  }
  weights_->released = std::move(released);
}

Result<std::shared_ptr<const CompiledPlan>> Session::compile_for(const std::vector<Shape>& input_shapes,
                                                                 bool inputs_finite, const TensorMap& values) const {
  const ScopedMappedTensors mapped;  // the weights this compile folds, and frees once packed
  const ScopedPackedWeightCache packing(&weights_->packed);
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, graph_for_compile(input_shapes));
  PassContext context;
  bind_input_values(graph, values, context);
  PipelineOptions pipeline = options_.pipeline;
  supply_layout_timer(pipeline);  // per compile: a measuring timer is not shared between threads
  OPFUSE_TRY(run_pipeline(graph, options_.level, pipeline, context));
  OPFUSE_TRY(verify_graph(graph));
  CompileOptions compile;
  compile.threads = options_.threads;
  compile.flush_denormals = options_.flush_denormals;
  compile.inputs_finite = inputs_finite;
  if (const auto& tuning = options_.pipeline.fusion.tuning) {
    compile.kernels = &tuning->kernels;
    compile.epilogues = &tuning->epilogues;
  }
  compile.list_alternatives = options_.list_kernel_alternatives;
  const SessionBodyCompiler bodies(options_);
  compile.subgraphs = &bodies;
  OPFUSE_ASSIGN_OR_RETURN(auto plan, CompiledPlan::compile(std::move(graph), compile));
  plan->set_pass_decisions(std::move(context.decisions));
  if (weights_->source != nullptr) keep_weights_the_plan_holds(plan->graph());
  return std::shared_ptr<const CompiledPlan>(std::move(plan));
}

Result<std::shared_ptr<const CompiledPlan>> Session::plan_for(const TensorMap& inputs) const {
  OPFUSE_TRY(check_inputs(inputs));
  std::pair<std::vector<std::vector<int64_t>>, bool> key{{}, true};
  std::vector<Shape> shapes;
  for (const auto& sig : inputs_) {
    const Tensor& t = inputs.at(sig.name);
    key.first.push_back(t.dims());
    shapes.push_back(make_shape(key.first.back()));
    key.second = key.second && all_finite(t);  // one pass over the inputs (an image: ~20 us)
  }
  TensorMap values;
  for (size_t i : specialized_) {
    const Tensor& t = inputs.at(inputs_[i].name);
    key.first.push_back({t.get_int(0)});
    values[inputs_[i].name] = t.clone();
  }
  {
    std::lock_guard lock(plans_->mutex);
    if (auto plan = plans_->find(key)) return plan;
    // A plan compiled for the other finiteness serves when it would come out the same: no second
    // compile, and no second read of weights the session released.
    if (auto plan = plans_->find({key.first, !key.second}); plan != nullptr && plan->same_for_any_finiteness()) {
      return plan;
    }
  }
  // Compiled outside the lock; if two threads race, both compile and the first result is kept.
  OPFUSE_ASSIGN_OR_RETURN(auto plan, compile_for(shapes, key.second, values));
  std::lock_guard lock(plans_->mutex);
  return plans_->insert(key, std::move(plan), options_.max_plans);
}

int Session::packed_weights_reused() const { return weights_->packed.reused(); }

int64_t Session::compile_count() const {
  std::lock_guard lock(plans_->mutex);
  return plans_->compiles;
}

size_t Session::cached_plan_count() const {
  std::lock_guard lock(plans_->mutex);
  return plans_->plans.size();
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
    // Built only for an error: every run checks its inputs.
    const auto expected = [&] {
      return str_cat("expected ", dtype_name(sig.dtype), sig.shape ? shape_to_string(*sig.shape) : "[*]", ", given ",
                     t.type_string());
    };
    if (!t.defined()) return Status::user_error(str_cat("input '", sig.name, "' is empty"));
    if (t.dtype() != sig.dtype) {
      return Status::user_error(str_cat("input '", sig.name, "' has the wrong dtype: ", expected()));
    }
    if (!sig.shape) continue;
    if (static_cast<size_t>(t.rank()) != sig.shape->size()) {
      return Status::user_error(str_cat("input '", sig.name, "' has the wrong rank: ", expected()));
    }
    for (size_t i = 0; i < sig.shape->size(); ++i) {
      const Dim& d = (*sig.shape)[i];
      const int64_t given = t.dims()[i];
      if (d.is_known() && d.value() != given) {
        return Status::user_error(
            str_cat("input '", sig.name, "' has the wrong shape (dim ", i, "): ", expected()));
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

Result<TensorMap> Session::run_eager_with_stats(const TensorMap& inputs, EagerStats& stats) const {
  OPFUSE_TRY(check_inputs(inputs));
  return run_eager(*graph_, inputs, &stats);
}

Result<TensorMap> Session::run(const TensorMap& inputs, const RunLimits& limits) const {
  if (options_.mode == ExecutionMode::kEager) {
    OPFUSE_TRY(check_inputs(inputs));
    ScopedRunLimits scoped(limits);
    return run_eager(*graph_, inputs);
  }
  OPFUSE_ASSIGN_OR_RETURN(auto plan, plan_for(inputs));
  return plan->run(inputs, limits);
}

}  // namespace opfuse
