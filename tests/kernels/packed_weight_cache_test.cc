// Weights packed once per session (kernels/packed_weight_cache.h): the cache itself, oneDNN's
// packing (onednn::pack, every oneDNN kernel's constant weights) and cpu.gemm's panels made once
// for equal weights packed alike, and again for other bytes or another packing.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/onednn_common.h"
#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/onednn_test_util.h"
#include "kernels/packed_weight_cache.h"
#include "runtime/compare.h"

namespace opfuse {
namespace {

using onednn_test::cst;
using onednn_test::in;
using onednn_test::make_node;
using onednn_test::random_f32;

std::function<std::shared_ptr<const int>()> counting(int& made, int value) {
  return [&made, value] {
    ++made;
    return std::make_shared<const int>(value);
  };
}

TEST(PackedWeightCache, EqualBytesPackedAlikeAreMadeOnce) {
  PackedWeightCache cache;
  const std::vector<float> a = {1, 2, 3}, same_as_a = {1, 2, 3}, b = {1, 2, 4};
  int made = 0;
  auto first = cache.get<int>(a.data(), 12, "p", counting(made, 1));
  auto again = cache.get<int>(same_as_a.data(), 12, "p", counting(made, 2));
  EXPECT_EQ(first.get(), again.get()) << "equal bytes elsewhere in memory";
  EXPECT_EQ(*again, 1);
  EXPECT_EQ(*cache.get<int>(b.data(), 12, "p", counting(made, 3)), 3) << "other bytes";
  EXPECT_EQ(*cache.get<int>(a.data(), 12, "q", counting(made, 4)), 4) << "another packing";
  EXPECT_EQ(*cache.get<int>(a.data(), 8, "p", counting(made, 5)), 5) << "fewer bytes";
  EXPECT_EQ(made, 4);
  EXPECT_EQ(cache.reused(), 1);
  EXPECT_EQ(cache.size(), 4u);
}

TEST(PackedWeightCache, OnlyInsideAScopeOnItsThread) {
  const std::vector<float> w = {1, 2};
  int made = 0;
  packed_once<int>(w.data(), 8, "p", counting(made, 1));
  packed_once<int>(w.data(), 8, "p", counting(made, 1));
  EXPECT_EQ(made, 2) << "no cache: every packing is made";
  PackedWeightCache outer, inner;
  {
    const ScopedPackedWeightCache a(&outer);
    packed_once<int>(w.data(), 8, "p", counting(made, 1));
    {
      const ScopedPackedWeightCache b(&inner);
      EXPECT_EQ(current_packed_weight_cache(), &inner);
      packed_once<int>(w.data(), 8, "p", counting(made, 1));
    }
    EXPECT_EQ(current_packed_weight_cache(), &outer);
    packed_once<int>(w.data(), 8, "p", counting(made, 1));
  }
  EXPECT_EQ(current_packed_weight_cache(), nullptr);
  EXPECT_EQ(made, 4);
  EXPECT_EQ(outer.reused(), 1);
  EXPECT_EQ(inner.size(), 1u);
}

TEST(PackedWeightCache, OneDnnPackingsOfEqualWeightsShareTheirBuffer) {
  std::mt19937 gen(3);
  const Tensor w = random_f32({16, 8, 3, 3}, gen);
  const Tensor copy = w.clone();
  const auto plain = onednn::plain_desc({16, 8, 3, 3});
  const dnnl::memory::desc blocked({16, 8, 3, 3}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::OIhw8i8o);
  auto handle = [](const dnnl::memory& m) { return m.get_data_handle(); };
  EXPECT_NE(handle(onednn::pack(plain, w.raw_data(), blocked)), handle(onednn::pack(plain, w.raw_data(), blocked)));
  PackedWeightCache cache;
  const ScopedPackedWeightCache scope(&cache);
  const dnnl::memory first = onednn::pack(plain, w.raw_data(), blocked);
  EXPECT_EQ(handle(onednn::pack(plain, copy.raw_data(), blocked)), handle(first));
  const dnnl::memory::desc other({16, 8, 3, 3}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::OIhw16i16o);
  EXPECT_NE(handle(onednn::pack(plain, w.raw_data(), other)), handle(first)) << "another layout";
  // The packed values are the weights' (read back to the plain layout).
  const dnnl::memory back = onednn::pack(blocked, first.get_data_handle(), plain);
  const auto* p = static_cast<const float*>(back.get_data_handle());
  for (int64_t i = 0; i < w.numel(); ++i) ASSERT_EQ(p[i], w.data<float>()[i]) << i;
  EXPECT_EQ(cache.reused(), 1);
}

// Two cpu.gemm kernels of one cache with equal weights (other rows of A) share their panels;
// other weights, or the same weights scaled by Gemm's alpha, are packed anew. Each computes its
// own product.
TEST(PackedWeightCache, GemmKernelsShareThePanelsOfEqualWeights) {
  std::mt19937 gen(5);
  const Tensor b = random_f32({40, 24}, gen);
  PackedWeightCache cache;
  const ScopedPackedWeightCache scope(&cache);
  auto check = [&](const std::string& op, std::vector<onednn_test::Arg> args, const Attributes& attrs) {
    auto n = make_node(op, std::move(args), attrs);
    ASSERT_NE(n, nullptr);
    const KernelImpl impl = op == "Gemm" ? packed_gemm_kernel() : packed_matmul_kernel();
    auto kernel = impl.create(KernelCompileContext{*n->node, n->constants, 1});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
    EXPECT_LE(max_relative_difference(n->run(**kernel), n->run(*make_reference_kernel(*n->node))), 2e-5) << op;
  };
  check("MatMul", {in(random_f32({5, 40}, gen)), cst(b)}, {});
  check("MatMul", {in(random_f32({9, 40}, gen)), cst(b.clone())}, {});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.reused(), 1);
  check("MatMul", {in(random_f32({5, 40}, gen)), cst(random_f32({40, 24}, gen))}, {});
  check("Gemm", {in(random_f32({5, 40}, gen)), cst(b.clone())}, {{"alpha", -0.5f}});
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.reused(), 1);
}

}  // namespace
}  // namespace opfuse
