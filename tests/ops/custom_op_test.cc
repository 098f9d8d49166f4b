// Custom ops registered from C++: a fusible elementwise op (scalar expression), an opaque op
// (a barrier with its own reference kernel and an optimised kernel registered at run time),
// and the registration errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "frontend/builder/model_builder.h"
#include "kernels/kernel_registry.h"
#include "ops/custom_op.h"
#include "ops/registry.h"
#include "ops/scalar_expr_text.h"
#include "pipelines/pipeline.h"
#include "runtime/session.h"

namespace opfuse {
namespace {

constexpr const char* kDomain = "test.custom";

bool region_fusion_available() {
  for (const PassDef& p : all_passes()) {
    if (std::string_view(p.name).find("region") != std::string_view::npos) return true;
  }
  return false;
}

// SoftClip(x) = x / (1 + |x|): elementwise, fusible.
OpDef soft_clip_def() {
  OpDef def;
  def.name = "SoftClip";
  def.domain = kDomain;
  def.min_opset = 1;
  def.kind = FusionKind::kElementwise;
  def.infer = infer_same_as_input0;
  def.scalar = [](const ScalarExprContext&) {
    ScalarBuilder b;
    Sx x = b.arg(0);
    return b.finish(x / (1.0 + abs(x)));
  };
  return def;
}

// RowMax(x): each row's maximum broadcast over the row: opaque.
Status row_max_reference(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  const int64_t inner = x.dims().back(), rows = x.numel() / inner;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY;
    for (int64_t i = 0; i < inner; ++i) m = std::max(m, x.get_double(r * inner + i));
    for (int64_t i = 0; i < inner; ++i) y->set_double(r * inner + i, m);
  }
  return Status::ok();
}
OpDef row_max_def() {
  OpDef def;
  def.name = "RowMax";
  def.domain = kDomain;
  def.min_opset = 1;
  def.kind = FusionKind::kOpaque;
  def.infer = infer_same_as_input0;
  def.reference = row_max_reference;
  return def;
}

std::atomic<int> optimised_runs{0};
class RowMaxKernel final : public Kernel {
 public:
  Status run(std::span<const Tensor* const> in, std::span<Tensor* const> out) const override {
    ++optimised_runs;
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    const int64_t inner = in[0]->dims().back(), rows = in[0]->numel() / inner;
    for (int64_t r = 0; r < rows; ++r) {
      float m = x[r * inner];
      for (int64_t i = 1; i < inner; ++i) m = std::max(m, x[r * inner + i]);
      for (int64_t i = 0; i < inner; ++i) y[r * inner + i] = m;
    }
    return Status::ok();
  }
  std::string_view name() const override { return "test.row_max"; }
};

void register_once() {
  static const Status s = []() -> Status {
    OPFUSE_TRY(register_custom_op(soft_clip_def()));
    OPFUSE_TRY(register_custom_op(row_max_def()));
    KernelImpl impl{"test.row_max", "RowMax",
                    [](const KernelCompileContext& ctx) { return ctx.node.input(0)->dtype == DType::kF32; },
                    [](const KernelCompileContext&) -> Result<std::unique_ptr<Kernel>> {
                      return std::unique_ptr<Kernel>(std::make_unique<RowMaxKernel>());
                    }};
    return register_kernel(kDomain, impl);
  }();
  ASSERT_TRUE(s.is_ok()) << s.message();
}

// y = RowMax(SoftClip(x * 3) + 1) - x
Graph build() {
  ModelBuilder b("custom", 0);
  Var x = b.input("x", {2, 4});
  Var c = b.op("SoftClip", {x * 3.0}, {}, "soft_clip", kDomain) + 1.0;
  b.output(b.op("RowMax", {c}, {}, "row_max", kDomain) - x, "y");
  auto g = b.finish();
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::move(*g);
}

const std::vector<float> kX = {0.0f, 1.0f, -1.0f, 2.0f, -3.0f, 0.5f, -0.5f, -2.0f};
// Row maxima of softclip(3x) + 1: row 0 max at x=2: 6/7 + 1; row 1 max at x=0.5: 1.5/2.5 + 1.
std::vector<double> expected() {
  const double m0 = 6.0 / 7.0 + 1.0, m1 = 1.5 / 2.5 + 1.0;
  std::vector<double> y;
  for (int i = 0; i < 8; ++i) y.push_back((i < 4 ? m0 : m1) - kX[i]);
  return y;
}

TEST(CustomOpTest, EagerAndEveryLevelComputeTheSame) {
  register_once();
  const TensorMap in = {{"x", Tensor::from_vector<float>({2, 4}, kX)}};
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph}) {
    for (OptLevel level : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2}) {
      SessionOptions o;
      o.mode = mode;
      o.level = level;
      auto s = Session::create(build(), o);
      ASSERT_TRUE(s.is_ok()) << s.status().message();
      auto out = s->run(in);
      ASSERT_TRUE(out.is_ok()) << out.status().message();
      const auto want = expected();
      for (int i = 0; i < 8; ++i) EXPECT_NEAR(out->at("y").get_double(i), want[i], 1e-6) << i;
    }
  }
}

TEST(CustomOpTest, OpaqueOpStaysABarrierAndUsesItsRegisteredKernel) {
  register_once();
  SessionOptions o;
  o.level = OptLevel::kO2;
  auto s = Session::create(build(), o);
  ASSERT_TRUE(s.is_ok());
  const TensorMap in = {{"x", Tensor::from_vector<float>({2, 4}, kX)}};
  auto plan = s->plan_for(in);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  int row_max_nodes = 0;
  for (const Node* n : (*plan)->graph().nodes()) row_max_nodes += n->op_type() == "RowMax";
  EXPECT_EQ(row_max_nodes, 1);
  bool uses_kernel = false;
  for (const std::string& step : (*plan)->describe_steps()) uses_kernel |= step.find("test.row_max") != std::string::npos;
  EXPECT_TRUE(uses_kernel);
  const int before = optimised_runs;
  ASSERT_TRUE(s->run(in).is_ok());
  EXPECT_EQ(optimised_runs, before + 1);
}

TEST(CustomOpTest, FusibleElementwiseOpFusesIntoARegion) {
  register_once();
  if (!region_fusion_available()) {
    GTEST_SKIP() << "PENDING: region fusion is not merged into this build";
  }
  SessionOptions o;
  o.level = OptLevel::kO2;
  auto s = Session::create(build(), o);
  ASSERT_TRUE(s.is_ok());
  auto plan = s->plan_for({{"x", Tensor::from_vector<float>({2, 4}, kX)}});
  ASSERT_TRUE(plan.is_ok());
  // Mul, SoftClip and Add fuse into one region before the barrier; RowMax stays; the Sub after it
  // is one more kernel: 3 kernels, and no SoftClip node is left on its own.
  for (const Node* n : (*plan)->graph().nodes()) EXPECT_NE(n->op_type(), "SoftClip");
  EXPECT_LE((*plan)->kernels_per_run(), 3u);
}

TEST(CustomOpTest, RegistrationErrorsNameTheProblem) {
  register_once();
  Status dup = register_custom_op(soft_clip_def());
  ASSERT_FALSE(dup.is_ok());
  EXPECT_NE(dup.message().find("already registered"), std::string::npos) << dup.message();

  OpDef no_expr = soft_clip_def();
  no_expr.name = "NoExpr";
  no_expr.scalar = nullptr;
  no_expr.reference = row_max_reference;
  Status s = register_custom_op(no_expr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("scalar expression"), std::string::npos) << s.message();

  OpDef reserved = row_max_def();
  reserved.domain = "opfuse";
  EXPECT_FALSE(register_custom_op(reserved).is_ok());

  KernelImpl orphan{"x", "NotAnOp", [](const KernelCompileContext&) { return true; }, nullptr};
  EXPECT_FALSE(register_kernel(kDomain, orphan).is_ok());
}

TEST(ScalarExprTextTest, ParsesWhatToStringPrints) {
  ScalarBuilder b;
  Sx x = b.arg(0), y = b.arg(1);
  const ScalarExpr e = b.finish(select(x > 0.5, (x - y) * x, max(y, -2.5)));
  auto parsed = parse_scalar_expr(e.to_string());
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  EXPECT_EQ(parsed->to_string(), e.to_string());
  EXPECT_EQ(parsed->num_args(), 2);

  auto bad = parse_scalar_expr("mul(%0)");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("mul takes 2 operands"), std::string::npos) << bad.status().message();
  auto unknown = parse_scalar_expr("frobnicate(%0)");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("frobnicate"), std::string::npos);
  EXPECT_FALSE(parse_scalar_expr("add(%0, %1) junk").is_ok());
}

}  // namespace
}  // namespace opfuse
