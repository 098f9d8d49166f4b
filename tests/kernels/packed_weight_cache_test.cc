// Weights packed once per session (kernels/packed_weight_cache.h): the cache itself, oneDNN's
// packing (onednn::pack, every oneDNN kernel's constant weights) and cpu.gemm's panels made once
// for equal weights packed alike, and again for other bytes or another packing.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/direct_conv_kernel.h"
#include "kernels/cpu/gemv_kernel.h"
#include "kernels/cpu/onednn_common.h"
#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/cpu/winograd_conv_kernel.h"
#include "kernels/onednn_test_util.h"
#include "kernels/packed_weight_cache.h"
#include "runtime/compare.h"

namespace opfuse {
namespace {

using namespace onednn_test;  // nodes with constant weights, random tensors, blocked layouts

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
// other weights, or the same weights scaled by Gemm's alpha, are packed anew; cpu.gemv packs
// its own panels (once too). Each computes its own product.
TEST(PackedWeightCache, GemmKernelsShareThePanelsOfEqualWeights) {
  std::mt19937 gen(5);
  const Tensor b = random_f32({40, 24}, gen);
  PackedWeightCache cache;
  const ScopedPackedWeightCache scope(&cache);
  auto check = [&](const KernelImpl& impl, const std::string& op, std::vector<Arg> args,
                   const Attributes& attrs) {
    auto n = make_node(op, std::move(args), attrs);
    ASSERT_NE(n, nullptr);
    auto kernel = impl.create(KernelCompileContext{*n->node, n->constants, 1});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().message();
    EXPECT_LE(max_relative_difference(n->run(**kernel), n->run(*make_reference_kernel(*n->node))), 2e-5) << op;
  };
  check(packed_matmul_kernel(), "MatMul", {in(random_f32({5, 40}, gen)), cst(b)}, {});
  check(packed_matmul_kernel(), "MatMul", {in(random_f32({9, 40}, gen)), cst(b.clone())}, {});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.reused(), 1);
  check(packed_matmul_kernel(), "MatMul", {in(random_f32({5, 40}, gen)), cst(random_f32({40, 24}, gen))}, {});
  check(packed_gemm_kernel(), "Gemm", {in(random_f32({5, 40}, gen)), cst(b.clone())}, {{"alpha", -0.5f}});
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.reused(), 1);
  check(gemv_matmul_kernel(), "MatMul", {in(random_f32({1, 40}, gen)), cst(b.clone())}, {});
  check(gemv_matmul_kernel(), "MatMul", {in(random_f32({1, 40}, gen)), cst(b.clone())}, {});
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.reused(), 2);
}

// cpu.conv and cpu.winograd of one cache, on images of two sizes with equal 3x3 weights, share
// their packed filters (cpu.winograd's transformed ones, and those of the cpu.conv it falls back
// to on non-finite inputs); other weights are packed anew.
TEST(PackedWeightCache, ConvKernelsShareTheFiltersOfEqualWeights) {
  const int64_t block = active_target().channel_block();
  std::mt19937 gen(7);
  const Tensor w = random_f32({2 * block, block, 3, 3}, gen, 0.3f), bias = random_f32({2 * block}, gen);
  for (const KernelImpl& impl : {direct_conv_kernel(), winograd_conv_kernel()}) {
    PackedWeightCache cache;
    const ScopedPackedWeightCache scope(&cache);
    // Creates the kernel on an image of `size`; false where it declines (a vector is not a block).
    auto create = [&](int64_t size, const Tensor& weights) {
      const std::vector<int64_t> y = blocked_dims(1, 2 * block, size, size, block);
      auto node = make_node("BlockedConv", {in(random_f32(blocked_dims(1, block, size, size, block), gen)), cst(weights), cst(bias)},
                            {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                             {"block", block}});
      EXPECT_NE(node, nullptr);
      if (node == nullptr || !impl.supports(node->context())) return false;
      auto kernel = impl.create(node->context());
      EXPECT_TRUE(kernel.is_ok()) << kernel.status().message();
      if (!kernel.is_ok()) return false;
      EXPECT_LE(blocked_relative_error(node->run(**kernel), node->run(*make_reference_kernel(*node->node)), y, 2 * block), 1e-5)
          << (*kernel)->name() << " " << size;
      return true;
    };
    if (!create(12, w)) continue;
    const size_t packings = cache.size();
    EXPECT_GE(packings, 1u);
    ASSERT_TRUE(create(20, w.clone()));
    EXPECT_EQ(cache.reused(), static_cast<int>(packings)) << "equal weights, another image size";
    EXPECT_EQ(cache.size(), packings);
    ASSERT_TRUE(create(12, random_f32(w.dims(), gen)));
    EXPECT_EQ(cache.size(), 2 * packings) << "other weights";
  }
}

}  // namespace
}  // namespace opfuse
