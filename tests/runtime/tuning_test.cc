// Tuning records (passes/tuning_record.h) and the tuner (runtime/tuner.h): the file format, the
// refusals for another model or target, kernel choices replayed by graph mode, and a real tuning
// run within its budget.
#include <gtest/gtest.h>

#include <sstream>

#include "ir/text_format.h"
#include "passes/tuning_record.h"
#include "pipelines/pipeline.h"
#include "runtime/compare.h"
#include "runtime/tuner.h"

namespace opfuse {
namespace {

constexpr const char* kMlp = R"(graph @main opset 13 (%x: f32[8,64]) {
  %w1: f32[64,48] = const splat 0.03125
  %w2: f32[48,16] = const splat -0.0625
  %h: f32[8,48] = MatMul(%x, %w1) #mm1
  %r: f32[8,48] = Relu(%h) #relu
  %y: f32[8,16] = MatMul(%r, %w2) #mm2
  return %y
}
)";

Graph mlp() {
  auto g = parse_graph(kMlp);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::move(*g);
}

TensorMap mlp_inputs() {
  Tensor x = Tensor::zeros(DType::kF32, {8, 64}).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 13) - 6.0f;
  return {{"x", std::move(x)}};
}

TuningRecord record_for(const Graph& g) {
  TuningRecord r;
  r.model_digest = model_digest(g);
  r.target = isa_tier_name(active_target().isa);
  r.source = "tuning record 'test'";
  return r;
}

TEST(TuningRecordTest, JsonRoundTripKeepsEveryChoice) {
  TuningRecord r = record_for(mlp());
  r.use_layouts = true;
  r.layout_ms = {{"conv 16 0 [1,3,8,8] [4,3,3,3] 10", 0.25}, {"reorder 8 [1,4,8,8]", 0.01}};
  r.kernels = {{"mm1", "onednn.matmul"}};
  r.measurements = {"a line"};
  auto back = parse_tuning_record(tuning_record_to_json(r), "round trip");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->model_digest, r.model_digest);
  EXPECT_EQ(back->target, r.target);
  EXPECT_TRUE(back->use_layouts);
  EXPECT_EQ(back->layout_ms, r.layout_ms);
  EXPECT_EQ(back->kernels, r.kernels);
  EXPECT_EQ(back->measurements, r.measurements);
}

TEST(TuningRecordTest, MalformedFilesAreUserErrorsNamingTheFile) {
  for (const char* text : {"not json", "[1, 2]", R"({"model_digest": "x"})", R"({"opfuse_tuning": 99})",
                           R"({"opfuse_tuning": 1, "model_digest": 5, "target": "avx2"})"}) {
    auto r = parse_tuning_record(text, "tuning record 'bad.json'");
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.status().kind(), ErrorKind::kUser) << text;
    EXPECT_NE(r.status().message().find("'bad.json'"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(load_tuning_record("/nonexistent/t.json").is_ok());
}

TEST(TuningRecordTest, DigestTellsModelsApartAndIsStable) {
  const Graph a = mlp();
  EXPECT_EQ(model_digest(a), model_digest(mlp()));
  std::string other = kMlp;
  other.replace(other.find("splat 0.03125"), 13, "splat 0.03124");  // one weight value
  auto b = parse_graph(other);
  ASSERT_TRUE(b.is_ok());
  EXPECT_NE(model_digest(a), model_digest(*b));
}

TEST(TuningRecordTest, SessionRefusesARecordForAnotherModelOrTarget) {
  SessionOptions options;
  options.level = OptLevel::kO3;
  TuningRecord wrong_model = record_for(mlp());
  wrong_model.model_digest = "0123456789abcdef";
  options.pipeline.fusion.tuning = std::make_shared<const TuningRecord>(wrong_model);
  auto s = Session::create(mlp(), options);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().kind(), ErrorKind::kUser);
  EXPECT_NE(s.status().message().find("another model"), std::string::npos) << s.status().message();

  TuningRecord wrong_target = record_for(mlp());
  wrong_target.target = active_target().isa == IsaTier::kAvx2 ? "avx512_core" : "avx2";
  options.pipeline.fusion.tuning = std::make_shared<const TuningRecord>(wrong_target);
  s = Session::create(mlp(), options);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("measured for target " + wrong_target.target), std::string::npos)
      << s.status().message();
}

// The record's kernel runs where it names one (and says so); a kernel that cannot run the node
// falls back to the table's choice; outputs match either way.
TEST(TuningRecordTest, GraphModeRunsTheRecordedKernels) {
  SessionOptions options;
  options.level = OptLevel::kO1;
  auto plain = Session::create(mlp(), options);
  ASSERT_TRUE(plain.is_ok());
  const auto want = plain->run(mlp_inputs());
  ASSERT_TRUE(want.is_ok());

  TuningRecord r = record_for(mlp());
  r.kernels = {{"mm1", "reference"}, {"mm2", "hwy.softmax"}};  // mm2: not a MatMul kernel
  options.pipeline.fusion.tuning = std::make_shared<const TuningRecord>(r);
  auto tuned = Session::create(mlp(), options);
  ASSERT_TRUE(tuned.is_ok()) << tuned.status().message();
  auto plan = tuned->plan_for(mlp_inputs());
  ASSERT_TRUE(plan.is_ok());
  for (size_t s = 0; s < (*plan)->kernels_per_run(); ++s) {
    const std::string& name = (*plan)->step_node(s).name();
    if (name == "mm1") {
      EXPECT_EQ((*plan)->step_kernel_label(s), "reference (tuning record)");
    }
    if (name == "mm2") {
      EXPECT_NE((*plan)->step_kernel_name(s), "hwy.softmax");
      EXPECT_EQ((*plan)->step_kernel_label(s).find("tuning record"), std::string::npos);
    }
  }
  const auto got = tuned->run(mlp_inputs());
  ASSERT_TRUE(got.is_ok());
  EXPECT_LE(max_relative_difference(*got, *want), 1e-5);
}

// A record's region threshold replaces the configured one: at 1.0 (every byte must be saved)
// nothing fuses into a region that fuses by default.
TEST(TuningRecordTest, RegionThresholdFromTheRecordApplies) {
  constexpr const char* kChain = R"(graph @main opset 13 (%x: f32[4,256]) {
  %a: f32[4,256] = Exp(%x)
  %b: f32[4,256] = Tanh(%a)
  %c: f32[4,256] = Sigmoid(%b)
  %y: f32[4,256] = Add(%c, %x)
  return %y
}
)";
  auto regions = [&](std::optional<double> threshold) {
    auto g = parse_graph(kChain);
    EXPECT_TRUE(g.is_ok());
    SessionOptions options;
    options.level = OptLevel::kO2;
    if (threshold) {
      TuningRecord r = record_for(*g);
      r.region_threshold = threshold;
      options.pipeline.fusion.tuning = std::make_shared<const TuningRecord>(r);
    }
    auto s = Session::create(std::move(*g), options);
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    Tensor x = Tensor::zeros(DType::kF32, {4, 256}).value();
    auto plan = s->plan_for({{"x", x}});
    EXPECT_TRUE(plan.is_ok());
    int n = 0;
    for (size_t i = 0; i < (*plan)->kernels_per_run(); ++i) n += (*plan)->step_node(i).op_type() == "FusedRegion";
    return n;
  };
  EXPECT_GT(regions(std::nullopt), 0);
  EXPECT_EQ(regions(1.0), 0);
  EXPECT_FALSE(parse_tuning_record(R"({"opfuse_tuning": 1, "model_digest": "x", "target": "avx2", "region_threshold": 2})",
                                   "t").is_ok());
}

// A real tuning run: both MatMuls can run on two kernels, so there is one candidate class; the
// record is for this model and target, every candidate left a measurement line, and the tuned
// session (replaying it) computes what the default one does.
TEST(TunerTest, MeasuresTheCandidatesAndWritesAUsableRecord) {
  TuneOptions options;
  options.session.level = OptLevel::kO3;
  options.rounds = 1;
  options.runs_per_round = 2;
  std::ostringstream progress;
  options.progress = &progress;
  auto record = tune_model(mlp(), mlp_inputs(), options);
  ASSERT_TRUE(record.is_ok()) << record.status().message();
  EXPECT_EQ(record->model_digest, model_digest(mlp()));
  EXPECT_EQ(record->target, isa_tier_name(active_target().isa));
  ASSERT_FALSE(record->measurements.empty());
  EXPECT_NE(record->measurements[0].find("MatMul"), std::string::npos) << record->measurements[0];
  EXPECT_NE(progress.str().find("[1/"), std::string::npos) << progress.str();
  for (const auto& [node, kernel] : record->kernels) EXPECT_TRUE(node == "mm1" || node == "mm2") << node;

  auto parsed = parse_tuning_record(tuning_record_to_json(*record), "t");
  ASSERT_TRUE(parsed.is_ok());
  SessionOptions with_record = options.session;
  with_record.pipeline.fusion.tuning = std::make_shared<const TuningRecord>(*parsed);
  auto tuned = Session::create(mlp(), with_record);
  ASSERT_TRUE(tuned.is_ok()) << tuned.status().message();
  auto plain = Session::create(mlp(), options.session);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_LE(max_relative_difference(*tuned->run(mlp_inputs()), *plain->run(mlp_inputs())), 1e-5);
}

// A candidate whose plan runs the same kernels as the incumbent's is not timed: the two would
// differ only by the machine's noise, which could then be kept as a choice. A relu after a conv
// runs inside oneDNN's kernel by default on finite inputs, so "in the library kernel" changes
// nothing, while "in our own pass" does.
TEST(TunerTest, DoesNotTimeACandidateThatChangesNothing) {
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[1,8,16,16]) {
  %w: f32[8,8,3,3] = const splat 0.05
  %c: f32[1,8,16,16] = Conv(%x, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} #conv
  %y: f32[1,8,16,16] = Relu(%c) #relu
  return %y
}
)");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  Tensor x = Tensor::zeros(DType::kF32, {1, 8, 16, 16}).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  TuneOptions options;
  options.session.level = OptLevel::kO2;
  options.rounds = 1;
  options.runs_per_round = 2;
  options.keep_ratio = 0;  // the default stays the incumbent whatever the timings
  auto record = tune_model(*g, {{"x", x}}, options);
  ASSERT_TRUE(record.is_ok()) << record.status().message();
  int library = 0, own_pass = 0;
  for (const std::string& line : record->measurements) {
    if (line.starts_with("1 FusedConv [relu] with the epilogue in the library kernel: ")) {
      ++library;
      EXPECT_NE(line.find("runs the same kernels as default, not measured"), std::string::npos) << line;
    }
    if (line.starts_with("1 FusedConv [relu] with the epilogue in our own pass: ")) {
      ++own_pass;
      EXPECT_NE(line.find(" ms (default), ratio "), std::string::npos) << line;
      EXPECT_NE(line.find(" over 1 round: not kept"), std::string::npos) << line;  // no win to confirm
    }
  }
  EXPECT_EQ(library, 1);
  EXPECT_EQ(own_pass, 1);
}

// The per-node evidence a class measurement leaves: a node counts with the step after it (which
// reads its output), medians over rounds, and is taken only at or below the ratio.
TEST(TunerTest, NarrowsAClassToTheNodesFasterInTheirOwnSteps) {
  StepTimes incumbent{{"a", "a_reader", "b", "b_reader", "c"}, {}};
  StepTimes candidate = incumbent;
  // Per round: a is faster alone, b is faster but leaves its reader slower (no gain in all), c,
  // the last step, is faster alone; round 2 is an outlier the median ignores.
  incumbent.rounds_us = {{100, 50, 100, 50, 40}, {100, 50, 100, 50, 40}, {100, 50, 100, 50, 40}};
  candidate.rounds_us = {{70, 50, 70, 85, 30}, {400, 400, 400, 400, 400}, {70, 50, 70, 85, 30}};
  EXPECT_EQ(nodes_faster_in_their_steps(incumbent, candidate, {"a", "b", "c"}, 0.9),
            (std::vector<std::string>{"a", "c"}));
  // At a stricter ratio only c (0.75) is left; a node absent from a plan is never taken.
  EXPECT_EQ(nodes_faster_in_their_steps(incumbent, candidate, {"a", "c", "gone"}, 0.78),
            (std::vector<std::string>{"c"}));
  // The step after a node is found by name in the candidate's plan, wherever it runs there.
  StepTimes reordered{{"a", "b", "a_reader", "b_reader", "c"}, {{70, 70, 50, 85, 30}}};
  StepTimes one_round{incumbent.nodes, {incumbent.rounds_us[0]}};
  EXPECT_EQ(nodes_faster_in_their_steps(one_round, reordered, {"a", "b"}, 0.9), (std::vector<std::string>{"a"}));
  // No rounds, no evidence.
  EXPECT_TRUE(nodes_faster_in_their_steps(StepTimes{incumbent.nodes, {}}, StepTimes{incumbent.nodes, {}}, {"a"}, 0.9)
                  .empty());
}

TEST(TunerTest, StopsMeasuringAtTheBudget) {
  TuneOptions options;
  options.session.level = OptLevel::kO3;
  options.budget_seconds = 1e-9;
  auto record = tune_model(mlp(), mlp_inputs(), options);
  ASSERT_TRUE(record.is_ok()) << record.status().message();
  EXPECT_TRUE(record->kernels.empty());
  ASSERT_FALSE(record->measurements.empty());
  EXPECT_NE(record->measurements.back().find("time budget"), std::string::npos) << record->measurements.back();
}

}  // namespace
}  // namespace opfuse
