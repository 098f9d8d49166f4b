#include "runtime/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "runtime/measuring_layout_timer.h"

namespace opfuse {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", ms);
  return buf;
}

// The best plan so far: what it is and its session.
struct Candidate {
  std::string name;
  std::optional<Session> session;
};

class Tuner {
 public:
  Tuner(const Graph& model, const TensorMap& inputs, const TuneOptions& options)
      : model_(model), inputs_(inputs), options_(options), start_(Clock::now()) {}

  Result<TuningRecord> run() {
    TuningRecord best;
    best.model_digest = model_digest(model_);
    best.target = isa_tier_name(active_target().isa);
    Candidate incumbent{"default", std::nullopt};
    OPFUSE_ASSIGN_OR_RETURN(Session base, compile(nullptr, /*list_alternatives=*/true));
    OPFUSE_ASSIGN_OR_RETURN(auto base_plan, base.plan_for(inputs_));
    incumbent.session.emplace(std::move(base));

    const std::vector<Node*> nodes = base_plan->graph().nodes();
    const bool has_layouts =
        std::any_of(nodes.begin(), nodes.end(), [](const Node* n) { return n->op_type() == "BlockedConv"; });
    const auto classes = anchor_classes(*base_plan);
    const auto epilogue_classes = epilogue_anchors(*base_plan);
    // Region fusion's threshold, tried lower and higher where region fusion weighed anything.
    std::vector<double> region_thresholds;
    const auto& decisions = base_plan->pass_decisions();
    const bool region_fusion_ran = std::any_of(decisions.begin(), decisions.end(), [](const PassDecision& d) {
      return d.pass == "region_fusion" || d.rule == "region_fusion";
    });
    if (region_fusion_ran) {
      const double configured = options_.session.pipeline.fusion.region_min_traffic_saving;
      for (double t : {0.1, 0.5}) {
        if (t != configured) region_thresholds.push_back(t);
      }
    }
    total_ = (has_layouts ? 1 : 0) + static_cast<int>(region_thresholds.size()) +
             2 * static_cast<int>(epilogue_classes.size());
    for (const auto& c : classes) total_ += static_cast<int>(c.second.alternatives.size()) - 1;
    if (total_ == 0) {
      best.measurements.push_back("nothing target-dependent to measure: the default plan is kept");
      say(best.measurements.back());
      return best;
    }
    if (has_layouts) {
      TuningRecord candidate = best;
      OPFUSE_TRY(measure_layouts(candidate));
      candidate.use_layouts = true;
      OPFUSE_TRY(compare("layouts from measured conv and reorder timings", std::move(candidate), incumbent, best));
    }
    for (double threshold : region_thresholds) {
      TuningRecord candidate = best;
      candidate.region_threshold = threshold;
      OPFUSE_TRY(compare(str_cat("region fusion threshold ", threshold, " instead of ",
                                 options_.session.pipeline.fusion.region_min_traffic_saving),
                         std::move(candidate), incumbent, best));
    }
    for (const auto& entry : classes) {
      const AnchorClass& cls = entry.second;
      for (std::string_view alternative : cls.alternatives) {
        if (alternative == cls.chosen) continue;
        const auto on_alternative = [&](const std::vector<std::string>& nodes) {
          TuningRecord candidate = best;
          for (const std::string& node : nodes) candidate.kernels[node] = std::string(alternative);
          return candidate;
        };
        OPFUSE_TRY(compare(str_cat(cls.nodes.size(), " ", cls.op_type, " on ", alternative, " instead of ", cls.chosen),
                           on_alternative(cls.nodes), incumbent, best, Narrowing{cls.nodes, on_alternative}));
      }
    }
    for (const auto& [key, nodes] : epilogue_classes) {
      for (const char* place : {"own_pass", "library"}) {
        const auto placed = [&](const std::vector<std::string>& subset) {
          TuningRecord candidate = best;
          for (const std::string& node : subset) candidate.epilogues[node] = place;
          return candidate;
        };
        OPFUSE_TRY(compare(str_cat(nodes.size(), " ", key, " with the epilogue ",
                                   std::string_view(place) == "library" ? "in the library kernel" : "in our own pass"),
                           placed(nodes), incumbent, best, Narrowing{nodes, placed}));
      }
    }
    if (skipped_ > 0) {
      measurements_.push_back(str_cat("time budget of ", options_.budget_seconds, " s reached: ", skipped_,
                                      " candidate(s) not measured keep the default"));
      say(measurements_.back());
    }
    best.measurements = std::move(measurements_);
    return best;
  }

 private:
  // Anchors that more than one kernel could run, grouped by op type, the kernel chosen and the
  // kernels possible.
  struct AnchorClass {
    std::string op_type;
    std::string_view chosen;
    std::vector<std::string_view> alternatives;
    std::vector<std::string> nodes;
  };
  std::map<std::string, AnchorClass> anchor_classes(const CompiledPlan& plan) const {
    std::map<std::string, AnchorClass> out;
    for (size_t s = 0; s < plan.kernels_per_run(); ++s) {
      const auto& alternatives = plan.step_alternatives(s);
      if (alternatives.size() < 2) continue;
      std::string key = str_cat(plan.step_node(s).op_type(), " on ", plan.step_kernel_name(s));
      for (std::string_view a : alternatives) key += str_cat(a == alternatives.front() ? " (" : ", ", a);
      key += ")";
      AnchorClass& c = out[key];
      c.op_type = plan.step_node(s).op_type();
      c.chosen = plan.step_kernel_name(s);
      c.alternatives = alternatives;
      c.nodes.push_back(plan.step_node(s).name());
    }
    return out;
  }

  // Anchors running a library kernel with an epilogue, by op type and epilogue: where the post-ops
  // run (inside the library kernel or in our own pass after it) is measured per class.
  std::map<std::string, std::vector<std::string>> epilogue_anchors(const CompiledPlan& plan) const {
    std::map<std::string, std::vector<std::string>> out;
    for (size_t s = 0; s < plan.kernels_per_run(); ++s) {
      const Node& node = plan.step_node(s);
      const auto it = node.attrs.find("epilogue");
      if (it == node.attrs.end() || !plan.step_kernel_name(s).starts_with("onednn.")) continue;
      // A ConvTranspose runs its whole epilogue in our own pass either way: oneDNN 2.6's
      // deconvolution post-ops cost 10x the product (kernels/cpu/onednn_conv_transpose.cc).
      if (node.op_type() == "FusedConvTranspose") continue;
      const auto* ops = std::get_if<std::vector<std::string>>(&it->second);
      if (ops == nullptr || ops->empty()) continue;
      std::string key = str_cat(node.op_type(), " [");
      for (const std::string& op : *ops) key += str_cat(&op == &ops->front() ? "" : ", ", op);
      out[key + "]"].push_back(node.name());
    }
    return out;
  }

  Result<Session> compile(std::shared_ptr<const TuningRecord> record, bool list_alternatives = false) const {
    SessionOptions options = options_.session;
    options.pipeline.fusion.tuning = std::move(record);
    options.list_kernel_alternatives = list_alternatives;
    return Session::create(model_.clone(), options);
  }

  // Compiles the model once with the layout pass timing every conv and reorder it weighs.
  Status measure_layouts(TuningRecord& record) const {
    auto timer = std::make_shared<MeasuringLayoutTimer>();
    SessionOptions options = options_.session;
    options.pipeline.fusion.tuning = nullptr;
    options.pipeline.layout_timer = timer;
    OPFUSE_ASSIGN_OR_RETURN(Session session, Session::create(model_.clone(), options));
    OPFUSE_TRY(session.plan_for(inputs_).status());
    record.layout_ms = timer->timings();
    return Status::ok();
  }

  // One round of a plan: milliseconds per run and each step's microseconds, medians of
  // runs_per_round runs after one warm-up.
  struct Round {
    double ms = 0;
    std::vector<double> step_us;
  };
  Result<Round> time_round(const CompiledPlan& plan) const {
    std::vector<StepTiming> timings;
    OPFUSE_TRY(plan.run_timed(inputs_, timings).status());
    std::vector<double> ms;
    std::vector<std::vector<double>> steps(plan.kernels_per_run());
    for (int i = 0; i < options_.runs_per_round; ++i) {
      const auto t0 = Clock::now();
      OPFUSE_TRY(plan.run_timed(inputs_, timings).status());
      ms.push_back(seconds_since(t0) * 1e3);
      for (size_t s = 0; s < steps.size() && s < timings.size(); ++s) steps[s].push_back(timings[s].duration_us);
    }
    Round round{median(ms), {}};
    for (std::vector<double>& us : steps) round.step_us.push_back(median(std::move(us)));
    return round;
  }

  static std::vector<std::string> step_nodes(const CompiledPlan& plan) {
    std::vector<std::string> nodes;
    for (size_t s = 0; s < plan.kernels_per_run(); ++s) nodes.push_back(plan.step_node(s).name());
    return nodes;
  }

  // A candidate made of a class of nodes, and how to make it for a subset of them.
  struct Narrowing {
    std::vector<std::string> nodes;
    std::function<TuningRecord(const std::vector<std::string>&)> record_for;
  };

  // Times the candidate against the incumbent, alternating; keeps it (as `best`) if it wins. A
  // class candidate not kept is narrowed to the nodes that were faster in their own steps, which
  // are compared again (tuner.h).
  Status compare(const std::string& what, TuningRecord candidate_record, Candidate& incumbent, TuningRecord& best,
                 std::optional<Narrowing> narrowing = std::nullopt) {
    ++done_;
    if (seconds_since(start_) > options_.budget_seconds) {
      ++skipped_;
      say(str_cat("[", done_, "/", total_, "] ", what, ": skipped (time budget)"));
      return Status::ok();
    }
    auto record = std::make_shared<const TuningRecord>(std::move(candidate_record));
    OPFUSE_ASSIGN_OR_RETURN(Session session, compile(record));
    OPFUSE_ASSIGN_OR_RETURN(auto plan, session.plan_for(inputs_));
    OPFUSE_ASSIGN_OR_RETURN(auto incumbent_plan, incumbent.session->plan_for(inputs_));
    if (steps_run(*plan) == steps_run(*incumbent_plan)) {
      // The choice changes nothing that runs (an epilogue the default already places there):
      // timing two equal plans would only measure the machine's noise, and could keep it.
      measurements_.push_back(str_cat(what, ": runs the same kernels as ", incumbent.name, ", not measured"));
      say(str_cat("[", done_, "/", total_, "] ", measurements_.back()));
      return Status::ok();
    }
    std::vector<double> ratios, ms_new, ms_old;
    StepTimes steps_old{step_nodes(*incumbent_plan), {}}, steps_new{step_nodes(*plan), {}};
    const auto measure = [&](int rounds) -> Status {
      for (int r = 0; r < rounds; ++r) {
        OPFUSE_ASSIGN_OR_RETURN(Round old_round, time_round(*incumbent_plan));
        OPFUSE_ASSIGN_OR_RETURN(Round new_round, time_round(*plan));
        ms_old.push_back(old_round.ms);
        ms_new.push_back(new_round.ms);
        ratios.push_back(new_round.ms / old_round.ms);
        steps_old.rounds_us.push_back(std::move(old_round.step_us));
        steps_new.rounds_us.push_back(std::move(new_round.step_us));
      }
      return Status::ok();
    };
    // Kept when it wins by the margin at the median and in every round: one lucky round on a
    // noisy machine must not flip a choice. A win is measured again for as many rounds, and
    // must hold over all of them: on a busy host, equal plans won 3 rounds in a row.
    const auto wins = [&] {
      return median(ratios) <= options_.keep_ratio && *std::max_element(ratios.begin(), ratios.end()) < 1.0;
    };
    OPFUSE_TRY(measure(options_.rounds));
    bool keep = wins();
    if (keep) {
      OPFUSE_TRY(measure(options_.rounds));
      keep = wins();
    }
    const double ratio = median(ratios);
    const std::string line = str_cat(what, ": ", fmt_ms(median(ms_new)), " vs ", fmt_ms(median(ms_old)), " (",
                                     incumbent.name, "), ratio ", ratio, " over ", ratios.size(),
                                     ratios.size() == 1 ? " round" : " rounds",
                                     keep ? ": kept" : ": not kept");
    measurements_.push_back(line);
    say(str_cat("[", done_, "/", total_, "] ", line));
    if (keep) {
      best = *record;
      incumbent = Candidate{what, std::move(session)};
      return Status::ok();
    }
    if (narrowing && narrowing->nodes.size() > 1) {
      const std::vector<std::string> faster =
          nodes_faster_in_their_steps(steps_old, steps_new, narrowing->nodes, options_.node_ratio);
      if (!faster.empty() && faster.size() < narrowing->nodes.size()) {
        ++total_;
        return compare(str_cat(what, ", only the ", faster.size(), " of ", narrowing->nodes.size(),
                               " nodes faster in their own steps"),
                       narrowing->record_for(faster), incumbent, best);
      }
    }
    return Status::ok();
  }

  // Each step's node, kernel and implementation (without the tuning record's mark).
  static std::vector<std::string> steps_run(const CompiledPlan& plan) {
    std::vector<std::string> steps;
    for (size_t s = 0; s < plan.kernels_per_run(); ++s) steps.push_back(plan.step_node(s).name() + " " + plan.step_kernel(s));
    return steps;
  }

  void say(const std::string& line) const {
    if (options_.progress != nullptr) *options_.progress << "[tune " << static_cast<int>(seconds_since(start_))
                                                         << " s] " << line << std::endl;
  }

  const Graph& model_;
  const TensorMap& inputs_;
  const TuneOptions& options_;
  const Clock::time_point start_;
  int total_ = 0, done_ = 0, skipped_ = 0;
  std::vector<std::string> measurements_;  // one line per candidate, kept or not
};

}  // namespace

std::vector<std::string> nodes_faster_in_their_steps(const StepTimes& incumbent, const StepTimes& candidate,
                                                     const std::vector<std::string>& changed, double ratio) {
  const auto index_of = [](const StepTimes& t, const std::string& node) -> std::optional<size_t> {
    const auto it = std::find(t.nodes.begin(), t.nodes.end(), node);
    if (it == t.nodes.end()) return std::nullopt;
    return static_cast<size_t>(it - t.nodes.begin());
  };
  // The median over rounds of the node's step plus the step of `next` (when there is one).
  const auto cost = [&](const StepTimes& t, size_t step, const std::optional<std::string>& next) -> std::optional<double> {
    std::optional<size_t> after;
    if (next) {
      after = index_of(t, *next);
      if (!after) return std::nullopt;
    }
    std::vector<double> per_round;
    for (const std::vector<double>& us : t.rounds_us) {
      if (step >= us.size() || (after && *after >= us.size())) return std::nullopt;
      per_round.push_back(us[step] + (after ? us[*after] : 0.0));
    }
    if (per_round.empty()) return std::nullopt;
    return median(std::move(per_round));
  };
  std::vector<std::string> faster;
  for (const std::string& node : changed) {
    const auto old_step = index_of(incumbent, node);
    const auto new_step = index_of(candidate, node);
    if (!old_step || !new_step) continue;
    std::optional<std::string> next;
    if (*old_step + 1 < incumbent.nodes.size()) next = incumbent.nodes[*old_step + 1];
    const auto old_cost = cost(incumbent, *old_step, next);
    const auto new_cost = cost(candidate, *new_step, next);
    if (old_cost && new_cost && *old_cost > 0 && *new_cost <= ratio * *old_cost) faster.push_back(node);
  }
  return faster;
}

Result<TuningRecord> tune_model(const Graph& model, const TensorMap& inputs, const TuneOptions& options) {
  if (options.session.mode != ExecutionMode::kGraph) {
    return Status::user_error("tuning measures compiled plans: use graph mode");
  }
  return Tuner(model, inputs, options).run();
}

}  // namespace opfuse
