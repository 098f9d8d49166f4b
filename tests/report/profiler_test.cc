// The profiler: one timing per step, a table that adds up, the small-op share at its extremes,
// and a Chrome trace with one complete event per step.
#include "report/profiler.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ir/text_format.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"
#include "testing/fusion_models.h"

namespace opfuse {
namespace {

struct Fixture {
  Session session;
  TensorMap inputs;
  std::shared_ptr<const CompiledPlan> plan;
};

Fixture compile(OptLevel level) {
  SessionOptions options;
  options.level = level;
  Session s = Session::create(parse_graph(testing_models::kBlockAndHead).value(), options).value();
  TensorMap inputs;
  inputs["x"] = Tensor::zeros(DType::kF32, {1, 2, 4, 4}).value();
  auto plan = s.plan_for(inputs).value();
  return {std::move(s), std::move(inputs), plan};
}

TEST(Profiler, StepsTableAndShare) {
  Fixture f = compile(OptLevel::kO1);
  ProfileOptions options;
  options.runs = 3;
  options.warmup = 1;
  options.small_op_bytes = 1 << 20;  // every kernel here writes 128 bytes: all small
  Profile p = profile_plan(*f.plan, f.inputs, options, "O1").value();
  ASSERT_EQ(p.steps.size(), 4u);  // Conv (BN folded), Relu, Conv, Relu
  EXPECT_EQ(p.steps[0].op, "Conv");
  EXPECT_EQ(p.steps[0].output_bytes, 128);
  EXPECT_EQ(p.small_kernels, 4u);
  EXPECT_DOUBLE_EQ(p.small_op_share, 1.0);
  const auto rows = p.table();
  ASSERT_EQ(rows.size(), 2u);  // (Conv, its kernel) and (Relu, its kernel)
  double percent = 0;
  for (const KernelRow& r : rows) {
    EXPECT_EQ(r.count, 6);  // 2 steps x 3 runs
    percent += r.percent;
  }
  EXPECT_NEAR(percent, 100.0, 1e-9);

  options.small_op_bytes = 128;  // "smaller than": a 128-byte output is not small
  p = profile_plan(*f.plan, f.inputs, options, "O1").value();
  EXPECT_EQ(p.small_kernels, 0u);
  EXPECT_DOUBLE_EQ(p.small_op_share, 0.0);
}

TEST(Profiler, ChromeTrace) {
  Fixture o1 = compile(OptLevel::kO1), o2 = compile(OptLevel::kO2);
  ProfileOptions options;
  options.runs = 2;
  Profile a = profile_plan(*o1.plan, o1.inputs, options, "O1").value();
  Profile b = profile_plan(*o2.plan, o2.inputs, options, "O2").value();
  const auto trace = nlohmann::json::parse(chrome_trace_json({a, b}));
  int complete = 0, processes = 0;
  double last_end = -1;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M") ++processes;
    if (e["ph"] != "X") continue;
    ++complete;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["pid"] == 2) {  // O2's steps follow one another
      EXPECT_GE(e["ts"].get<double>(), last_end - 1e-6);
      last_end = e["ts"].get<double>() + e["dur"].get<double>();
    }
  }
  EXPECT_EQ(processes, 2);
  EXPECT_EQ(complete, 4 + 2);  // O1's 4 steps, O2's 2 FusedConvs
}

TEST(Profiler, RejectsZeroRuns) {
  Fixture f = compile(OptLevel::kO1);
  ProfileOptions options;
  options.runs = 0;
  EXPECT_FALSE(profile_plan(*f.plan, f.inputs, options, "O1").is_ok());
}

}  // namespace
}  // namespace opfuse
