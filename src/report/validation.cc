#include "report/validation.h"
#include "pipelines/pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

#include "core/random.h"
#include "runtime/compare.h"

namespace opfuse {
namespace {

struct Trial {
  bool ok = false;
  std::vector<PassDecision> decisions;
};

class Bisector {
 public:
  Bisector(const Graph& model, const SessionOptions& options, const TensorMap& inputs, const TensorMap& reference,
           const Tolerance& tol, std::ostream* log)
      : model_(model), options_(options), inputs_(inputs), reference_(reference), tol_(tol), log_(log) {}

  Result<Trial> run(const FusionConfig& fusion, const std::string& what) {
    SessionOptions options = options_;
    options.mode = ExecutionMode::kGraph;
    options.pipeline.fusion = fusion;
    OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(model_.clone(), options));
    OPFUSE_ASSIGN_OR_RETURN(auto plan, session.plan_for(inputs_));
    OPFUSE_ASSIGN_OR_RETURN(TensorMap got, plan->run(inputs_));
    ++compilations;
    Trial t;
    t.ok = compare_outputs(got, reference_, tol_).ok;
    t.decisions = plan->pass_decisions();
    if (log_) *log_ << "  " << (t.ok ? "pass" : "FAIL") << "  " << what << "\n";
    return t;
  }

  int compilations = 0;

 private:
  const Graph& model_;
  const SessionOptions& options_;
  const TensorMap& inputs_;
  const TensorMap& reference_;
  Tolerance tol_;
  std::ostream* log_;
};

std::string rule_of(const PassDecision& d) { return d.rule.empty() ? d.pass : d.rule; }

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Applied decisions of `rule` grouped into units that share a node (a Conv absorbing an Add and
// then a Relu is one unit: excluding the Conv stops both).
std::vector<std::vector<const PassDecision*>> units_of(const std::vector<PassDecision>& decisions,
                                                       const std::string& rule) {
  std::vector<std::vector<const PassDecision*>> units;
  std::vector<std::set<std::string>> names;
  for (const PassDecision& d : decisions) {
    if (!d.applied || rule_of(d) != rule || d.members.empty()) continue;
    std::set<std::string> mine(d.members.begin(), d.members.end());
    if (!d.result.empty()) mine.insert(d.result);
    int home = -1;
    for (size_t u = 0; u < units.size(); ++u) {
      bool shares = false;
      for (const std::string& n : mine) shares = shares || names[u].count(n);
      if (!shares) continue;
      if (home < 0) {
        home = static_cast<int>(u);
      } else {  // joins two units: merge u into home
        units[home].insert(units[home].end(), units[u].begin(), units[u].end());
        names[home].insert(names[u].begin(), names[u].end());
        units[u].clear();
        names[u].clear();
      }
    }
    if (home < 0) {
      units.push_back({});
      names.push_back({});
      home = static_cast<int>(units.size()) - 1;
    }
    units[home].push_back(&d);
    names[home].insert(mine.begin(), mine.end());
  }
  std::vector<std::vector<const PassDecision*>> out;
  for (auto& u : units) {
    if (!u.empty()) out.push_back(std::move(u));
  }
  return out;
}

std::vector<std::string> members_of(const std::vector<const PassDecision*>& unit) {
  std::vector<std::string> out;
  for (const PassDecision* d : unit) {
    for (const std::string& m : d->members) {
      if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
    }
  }
  return out;
}

}  // namespace

ValidationResult compare_outputs(const TensorMap& got, const TensorMap& want, const Tolerance& tol) {
  ValidationResult result;
  for (const auto& [name, w] : want) {
    OutputDiff d;
    d.name = name;
    auto it = got.find(name);
    if (it == got.end() || it->second.dims() != w.dims()) {
      d.max_abs = d.max_rel = INFINITY;
      d.ok = false;
    } else {
      d.max_rel = max_relative_difference(it->second, w);
      double ref = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double g = it->second.get_double(i), v = w.get_double(i);
        if (std::isnan(v) || std::isnan(g)) continue;
        d.max_abs = std::max(d.max_abs, std::abs(g - v));
        ref = std::max(ref, std::abs(v));
      }
      if (std::isinf(d.max_rel)) d.max_abs = INFINITY;  // a NaN on one side only
      d.ok = d.max_abs <= tol.atol + tol.rtol * ref;
    }
    result.ok = result.ok && d.ok;
    result.outputs.push_back(std::move(d));
  }
  return result;
}

Result<double> rounding_sensitivity(const Session& eager, const TensorMap& inputs, const TensorMap& reference,
                                    uint64_t seed) {
  Random rng(seed);
  // x moved by one ulp, up or down at random (finite values only).
  const auto perturbed = [&](const Tensor& t) {
    Tensor p = t.clone();
    for (float& v : p.values<float>()) {
      if (std::isfinite(v)) v = std::nextafter(v, (rng.next_u64() & 1) ? INFINITY : -INFINITY);
    }
    return p;
  };
  TensorMap moved_inputs;
  for (const auto& [name, t] : inputs) moved_inputs.emplace(name, t.dtype() == DType::kF32 ? perturbed(t) : t);
  // The products' float weights and biases and the quantization scales too: a model whose first
  // op quantizes its input absorbs a ulp there, but not in the scales and weights after it.
  // (Not every float constant: Resize's scales, say, decide shapes.)
  const auto weight_like = [](const Use& use) {
    const Node& n = *use.node;
    if (!n.domain().empty() || use.input_index < 1) return false;
    const std::string& op = n.op_type();
    return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul" || op == "BatchNormalization" ||
           ((op == "QuantizeLinear" || op == "DequantizeLinear") && use.input_index == 1);
  };
  OPFUSE_ASSIGN_OR_RETURN(Graph graph, eager.model());
  for (Value* v : graph.values()) {
    if (!v->is_constant() || v->dtype != DType::kF32) continue;
    const auto& uses = v->uses();
    if (!uses.empty() && std::all_of(uses.begin(), uses.end(), weight_like)) graph.set_constant(v, perturbed(*v->constant()));
  }
  OPFUSE_ASSIGN_OR_RETURN(Session moved_session, Session::create(std::move(graph), eager.options()));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap moved, moved_session.run(moved_inputs));
  double sensitivity = 0;
  for (const OutputDiff& d : compare_outputs(moved, reference, Tolerance{}).outputs) {
    if (std::isfinite(d.max_rel)) sensitivity = std::max(sensitivity, d.max_rel);
  }
  return sensitivity;
}

Tolerance tolerance_for_sensitivity(double sensitivity) {
  Tolerance tol;
  tol.rtol = std::max(tol.rtol, 10 * sensitivity);
  return tol;
}

Result<ValidationResult> validate_against(const Graph& model, const SessionOptions& options, const TensorMap& inputs,
                                          const TensorMap& reference, const Tolerance& tol) {
  OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(model.clone(), options));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap got, session.run(inputs));
  return compare_outputs(got, reference, tol);
}

Result<BisectResult> bisect_fusion(const Graph& model, const SessionOptions& options, const TensorMap& inputs,
                                   const Tolerance& tol, std::ostream* log) {
  SessionOptions eager = options;
  eager.mode = ExecutionMode::kEager;
  OPFUSE_ASSIGN_OR_RETURN(Session oracle, Session::create(model.clone(), eager));
  OPFUSE_ASSIGN_OR_RETURN(TensorMap reference, oracle.run(inputs));
  Bisector b(model, options, inputs, reference, tol, log);
  BisectResult result;
  const FusionConfig base = options.pipeline.fusion;
  const std::string level(opt_level_name(options.level));

  OPFUSE_ASSIGN_OR_RETURN(Trial full, b.run(base, str_cat(level, " as configured")));
  if (full.ok) {
    result.summary = str_cat(level, " is within tolerance: nothing to bisect");
    result.compilations = b.compilations;
    return result;
  }
  result.level_fails = true;
  // The rules the level applied, in the order they first acted.
  std::vector<std::string> rules;
  for (const PassDecision& d : full.decisions) {
    if (d.applied && std::find(rules.begin(), rules.end(), rule_of(d)) == rules.end()) rules.push_back(rule_of(d));
  }
  auto with_only = [&](const std::vector<std::string>& on) {
    FusionConfig c = base;
    for (const std::string& r : rules) {
      if (std::find(on.begin(), on.end(), r) == on.end()) c.disabled_rules.insert(r);
    }
    return c;
  };
  OPFUSE_ASSIGN_OR_RETURN(Trial none, b.run(with_only({}), "every applied fusion rule off"));
  if (!none.ok || rules.empty()) {
    result.summary = str_cat(level, " fails even with every fusion rule off (", rules.empty() ? "none applied" : join(rules),
                             "): the difference comes from canonicalisation or a kernel, not from a fusion rule");
    result.compilations = b.compilations;
    return result;
  }
  result.fusion_at_fault = true;
  // One rule at a time, then cumulatively (a rule that breaks only with another's help).
  std::vector<std::string> context_rules;
  for (const std::string& r : rules) {
    OPFUSE_ASSIGN_OR_RETURN(Trial t, b.run(with_only({r}), str_cat("only ", r)));
    if (!t.ok) {
      result.rule = r;
      break;
    }
  }
  if (result.rule.empty()) {
    result.rule_alone = false;
    for (const std::string& r : rules) {
      context_rules.push_back(r);
      OPFUSE_ASSIGN_OR_RETURN(Trial t, b.run(with_only(context_rules), str_cat("rules ", join(context_rules))));
      if (!t.ok) {
        result.rule = r;
        context_rules.pop_back();
        break;
      }
    }
  }
  if (result.rule.empty()) {  // cannot happen when `full` failed and `none` passed; be explicit anyway
    result.summary = "no single rule could be blamed";
    result.compilations = b.compilations;
    return result;
  }
  // Within the rule: its fused kernels, halved until one is left.
  std::vector<std::string> on = context_rules;
  on.push_back(result.rule);
  const FusionConfig rule_config = with_only(on);
  OPFUSE_ASSIGN_OR_RETURN(Trial failing, b.run(rule_config, str_cat("rules ", join(on), " (kernels of ", result.rule, ")")));
  auto units = units_of(failing.decisions, result.rule);
  auto only_units = [&](size_t lo, size_t hi) {
    FusionConfig c = rule_config;
    for (size_t u = 0; u < units.size(); ++u) {
      if (u >= lo && u < hi) continue;
      for (const std::string& m : members_of(units[u])) c.excluded_node_globs.push_back(m);
    }
    return c;
  };
  size_t lo = 0, hi = units.size();
  bool narrowed = !failing.ok;
  while (narrowed && hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    OPFUSE_ASSIGN_OR_RETURN(Trial left, b.run(only_units(lo, mid), str_cat(result.rule, " kernels ", lo, "..", mid - 1)));
    if (!left.ok) {
      hi = mid;
      continue;
    }
    OPFUSE_ASSIGN_OR_RETURN(Trial right, b.run(only_units(mid, hi), str_cat(result.rule, " kernels ", mid, "..", hi - 1)));
    if (!right.ok) {
      lo = mid;
      continue;
    }
    narrowed = false;  // only the two halves together break it: stop with the whole range
  }
  if (narrowed && hi - lo == 1) {
    result.nodes = members_of(units[lo]);
    for (const PassDecision* d : units[lo]) result.decisions.push_back(d->what);
  }
  result.summary = str_cat(level, " breaks tolerance through rule '", result.rule, "'",
                           result.rule_alone ? "" : str_cat(" (together with ", join(context_rules), ")"));
  if (!result.nodes.empty()) {
    result.summary += str_cat(", in the fused kernel of ", join(result.nodes), ": ", join(result.decisions));
  } else {
    result.summary += str_cat("; no single kernel of it is to blame alone (", units.size(), " kernels)");
  }
  result.summary += str_cat(". Work around it with --disable ", result.rule);
  if (!result.nodes.empty()) result.summary += str_cat(" or --exclude '", result.nodes.front(), "'");
  result.compilations = b.compilations;
  return result;
}

}  // namespace opfuse
