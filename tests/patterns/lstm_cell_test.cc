// The unrolled LSTM cell pattern (patterns/lstm_cell.cc) and the step merge after it
// (passes/merge_rnn_steps.cc) numerically: three steps of a cell as PyTorch exports nn.LSTMCell
// in a loop, with distinct weights in every row (a gate taken from the wrong chunk changes the
// result), compiled at O2 and O3 against eager mode, for both Split gate orders the structure can
// say. The steps must run as one cpu.rnn over the sequence (their inputs stacked, every step's h
// read back from Y), with no Split or Sigmoid left; with the merge switched off, as three.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph_test_util.h"

namespace opfuse {
namespace {

std::string values(int64_t n, int salt) {
  std::string s = "[";
  for (int64_t i = 0; i < n; ++i) {
    // Deterministic, distinct, in [-0.5, 0.5).
    const int64_t k = (i * 7919 + salt * 104729) % 1000;
    s += str_cat(i == 0 ? "" : ", ", static_cast<double>(k) / 1000.0 - 0.5);
  }
  return s + "]";
}

// Three steps, batch 3, input 5, hidden 6; `order` names the Split's chunks (torch: "ifgo").
// `zero_h0`: the first step's h0 is zero and its product folded away, as an exporter writes a
// loop that starts from zeros (h0 · R + b is b, broadcast over the batch).
std::string unrolled_cell(const std::string& order, bool zero_h0 = false) {
  const int64_t b = 3, in = 5, h = 6;
  std::string s = str_cat("graph @main opset 13 (%x0: f32[", b, ",", in, "], %x1: f32[", b, ",", in, "], %x2: f32[", b,
                          ",", in, "], %h0: f32[", b, ",", h, "], %c0: f32[", b, ",", h, "]) {\n");
  s += str_cat("  %wx: f32[", 4 * h, ",", in, "] = const ", values(4 * h * in, 1), "\n");
  s += str_cat("  %wh: f32[", 4 * h, ",", h, "] = const ", values(4 * h * h, 2), "\n");
  s += str_cat("  %bx: f32[", 4 * h, "] = const ", values(4 * h, 3), "\n");
  s += str_cat("  %bh: f32[", 4 * h, "] = const ", values(4 * h, 4), "\n");
  const std::string t = str_cat("f32[", b, ",", h, "]");
  for (int k = 0; k < 3; ++k) {
    const std::string p = str_cat("s", k, "_"), hp = k == 0 ? "h0" : str_cat("s", k - 1, "_h"),
                      cp = k == 0 ? "c0" : str_cat("s", k - 1, "_c");
    s += str_cat("  %", p, "gx: f32[", b, ",", 4 * h, "] = Gemm(%x", k, ", %wx, %bx) {transB = 1}\n");
    if (k == 0 && zero_h0) {
      std::string rows = "[";
      for (int64_t r = 0; r < b; ++r) rows += str_cat(r == 0 ? "" : ", ", values(4 * h, 4).substr(1, values(4 * h, 4).size() - 2));
      s += str_cat("  %", p, "gh: f32[", b, ",", 4 * h, "] = const ", rows, "]\n");
    } else {
      s += str_cat("  %", p, "gh: f32[", b, ",", 4 * h, "] = Gemm(%", hp, ", %wh, %bh) {transB = 1}\n");
    }
    s += str_cat("  %", p, "gates: f32[", b, ",", 4 * h, "] = Add(%", p, "gh, %", p, "gx)\n");
    s += "  ";
    for (size_t j = 0; j < 4; ++j) s += str_cat(j == 0 ? "" : ", ", "%", p, order[j], ": ", t);
    s += str_cat(" = Split(%", p, "gates) {axis = 1}\n");
    s += str_cat("  %", p, "si: ", t, " = Sigmoid(%", p, "i)\n  %", p, "sf: ", t, " = Sigmoid(%", p, "f)\n");
    s += str_cat("  %", p, "tg: ", t, " = Tanh(%", p, "g)\n  %", p, "so: ", t, " = Sigmoid(%", p, "o)\n");
    s += str_cat("  %", p, "fc: ", t, " = Mul(%", p, "sf, %", cp, ")\n  %", p, "ig: ", t, " = Mul(%", p, "si, %", p, "tg)\n");
    s += str_cat("  %", p, "c: ", t, " = Add(%", p, "fc, %", p, "ig)\n  %", p, "tc: ", t, " = Tanh(%", p, "c)\n");
    s += str_cat("  %", p, "h: ", t, " = Mul(%", p, "so, %", p, "tc)\n");
  }
  s += "  return %s0_h, %s1_h, %s2_h, %s2_c\n}\n";
  return s;
}

TEST(LstmCellPattern, UnrolledStepsRunAsLstmAndMatchEager) {
  for (const auto& [order, zero_h0] : {std::pair<std::string, bool>{"ifgo", false}, {"oigf", false}, {"ifgo", true}}) {
    for (OptLevel level : {OptLevel::kO2, OptLevel::kO3}) {
      SCOPED_TRACE(str_cat(order, zero_h0 ? " zero h0 " : " ", opt_level_name(level)));
      const testing_graphs::CompiledRun run = testing_graphs::compile_and_compare(unrolled_cell(order, zero_h0), level);
      ASSERT_FALSE(run.steps.empty());
      EXPECT_LE(run.diff, 1e-5);
      auto count = [&](const std::string& what) {
        return std::count_if(run.steps.begin(), run.steps.end(),
                             [&](const std::string& s) { return s.find(what) != std::string::npos; });
      };
      EXPECT_EQ(count("cpu.rnn"), 1) << ::testing::PrintToString(run.steps);
      EXPECT_EQ(count("Split"), 0);
      EXPECT_EQ(count("Sigmoid"), 0);
    }
  }
}

TEST(LstmCellPattern, WithoutTheMergeEachStepIsOneLstm) {
  auto g = parse_graph(unrolled_cell("ifgo"));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const TensorMap inputs = testing_graphs::random_inputs(*g, 5);
  auto want = run_eager(*g, inputs);
  ASSERT_TRUE(want.is_ok());
  SessionOptions options;
  options.level = OptLevel::kO2;
  options.pipeline.fusion.disabled_rules.insert("merge_rnn_steps");
  auto session = Session::create(std::move(*g), options);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto plan = session->plan_for(inputs);
  ASSERT_TRUE(plan.is_ok());
  const auto steps = (*plan)->describe_steps();
  EXPECT_EQ(std::count_if(steps.begin(), steps.end(), [](const std::string& s) { return s.find("cpu.rnn") != std::string::npos; }), 3);
  auto got = session->run(inputs);
  ASSERT_TRUE(got.is_ok());
  EXPECT_LE(max_relative_difference(*got, *want), 1e-5);
}

}  // namespace
}  // namespace opfuse
