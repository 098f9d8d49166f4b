// Whole-graph test helpers: the inputs every "compile it, run it, compare with eager mode" test
// feeds, and that test itself for a graph in text IR. Eager mode is ops/eager.h's run_eager
// (the reference kernels, op by op).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"
#include "ir/graph.h"
#include "ir/text_format.h"
#include "runtime/compare.h"
#include "runtime/compiled_plan.h"
#include "ops/eager.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace opfuse::testing_graphs {

// Nodes of `op` in `g`.
inline int count_op(const Graph& g, std::string_view op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

// Whether `pass` recorded a decision that was `applied` (or refused) and whose reason (for a
// refusal) or description (for an application) contains `text`.
inline bool decided(const PassContext& ctx, std::string_view pass, bool applied, std::string_view text) {
  return std::any_of(ctx.decisions.begin(), ctx.decisions.end(), [&](const PassDecision& d) {
    return d.pass == pass && d.applied == applied && (applied ? d.what : d.reason).find(text) != std::string::npos;
  });
}

// Uniform f32 values in [lo, hi] for every (non-constant) graph input, which must have a static
// shape; input i is drawn with seed `first_seed + i`, so each input is reproducible on its own.
inline TensorMap random_inputs(const Graph& g, uint64_t first_seed, float lo = -2, float hi = 2) {
  TensorMap out;
  uint64_t seed = first_seed;
  for (const Value* v : g.inputs()) {
    if (v->is_constant()) continue;
    Tensor t = Tensor::zeros(DType::kF32, *static_dims(*v->shape)).value();
    Random rng(seed++);
    fill_uniform(t, rng, lo, hi);
    out[v->name()] = std::move(t);
  }
  return out;
}

// Parses `text` and runs `level`'s pipeline with the fusion rule `rule` switched off, as
// `--disable RULE` does; the graph after it, with the passes' decisions in `ctx`. Failures are
// test failures (the graph is then empty).
// `text` parsed and run through the pipeline at `level` (failures reported as test failures;
// an empty graph then).
inline Graph pipeline_at(const std::string& text, OptLevel level, PassContext& ctx, const PipelineOptions& options = {}) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return Graph();
  const Status s = run_pipeline(*g, level, options, ctx);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return std::move(*g);
}

inline Graph pipeline_without_rule(const std::string& text, OptLevel level, const std::string& rule,
                                   PassContext& ctx) {
  PipelineOptions options;
  options.fusion.disabled_rules.insert(rule);
  return pipeline_at(text, level, ctx, options);
}

// `g` compiled at `level` and run on `inputs`: the max relative difference of its outputs to
// `want` (failures reported as test failures; 1e9 when it could not run).
inline double difference_at_level(const Graph& g, OptLevel level, const TensorMap& inputs, const TensorMap& want) {
  SessionOptions options;
  options.level = level;
  auto session = Session::create(g.clone(), options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  if (!session.is_ok()) return 1e9;
  auto got = session->run(inputs);
  EXPECT_TRUE(got.is_ok()) << got.status().message();
  return got.is_ok() ? max_relative_difference(*got, want) : 1e9;
}

// What compiling a graph at a level and running it did.
struct CompiledRun {
  std::vector<std::string> steps;  // CompiledPlan::describe_steps (of the plan for these inputs)
  double diff = 1e9;               // max relative difference to eager mode over the runs
  TensorMap want;                  // eager mode's outputs

  // Steps whose description names `kernel` ("cpu.conv", "onednn.tap_regions" ...).
  size_t steps_running(std::string_view kernel) const {
    return static_cast<size_t>(std::count_if(steps.begin(), steps.end(), [&](const std::string& s) {
      return s.find(kernel) != std::string::npos;
    }));
  }
};

// Parses `text`, compiles it at `level` and runs it twice on `make_inputs(graph)` (the second
// run reuses the arena, which still holds the first run's values), comparing each run with
// eager mode. Failures are reported as test failures; the outcome then stays at its defaults.
template <std::invocable<const Graph&> MakeInputs>
CompiledRun compile_and_compare(const std::string& text, OptLevel level, MakeInputs make_inputs) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return {};
  const TensorMap inputs = make_inputs(*g);
  auto want = run_eager(*g, inputs);
  EXPECT_TRUE(want.is_ok()) << want.status().message();
  SessionOptions options;
  options.level = level;
  auto session = Session::create(std::move(*g), options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  if (!session.is_ok() || !want.is_ok()) return {};
  auto plan = session->plan_for(inputs);
  EXPECT_TRUE(plan.is_ok()) << plan.status().message();
  if (!plan.is_ok()) return {};
  CompiledRun out;
  out.steps = (*plan)->describe_steps();
  out.want = *want;
  for (int run = 0; run < 2; ++run) {
    auto got = session->run(inputs);
    EXPECT_TRUE(got.is_ok()) << got.status().message();
    if (!got.is_ok()) return {};
    out.diff = std::max(run == 0 ? 0.0 : out.diff, max_relative_difference(*got, *want));
  }
  return out;
}

// The same on random_inputs(seed).
inline CompiledRun compile_and_compare(const std::string& text, OptLevel level, uint64_t seed = 11) {
  return compile_and_compare(text, level, [seed](const Graph& g) { return random_inputs(g, seed); });
}

// compile_and_compare at O1, O2 and O3, each on random_inputs(seed) and on the same inputs with
// a NaN at element `nan_at` and `inf` at element `inf_at` of the first input.
struct LevelRun {
  OptLevel level;
  bool specials;
  CompiledRun run;
};
inline std::vector<LevelRun> compile_at_every_level(const std::string& text, uint64_t seed, int64_t nan_at,
                                                    int64_t inf_at, float inf) {
  const auto with_specials = [&](const Graph& g) {
    TensorMap inputs = random_inputs(g, seed);
    float* x = inputs.begin()->second.data<float>();
    x[nan_at] = std::numeric_limits<float>::quiet_NaN();
    x[inf_at] = inf;
    return inputs;
  };
  std::vector<LevelRun> runs;
  for (OptLevel level : {OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) {
    runs.push_back({level, false, compile_and_compare(text, level, seed)});
    runs.push_back({level, true, compile_and_compare(text, level, with_specials)});
  }
  return runs;
}

}  // namespace opfuse::testing_graphs
