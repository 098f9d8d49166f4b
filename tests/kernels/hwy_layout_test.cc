// Highway-file element movers (Transpose, Expand, Slice, Concat, Gather) against the reference
// kernels. They only copy elements, so the results must be bit-identical (tolerance 0). Resize
// linear blends in float where the reference uses double: 1e-5 relative + 1e-6 absolute.
#include "hwy_test_util.h"

namespace opfuse::hwy_test {
namespace {

Tensor ints(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v); }
In const_ints(std::vector<int64_t> v) {
  return In{{static_cast<int64_t>(v.size())}, DType::kI64, ints(std::move(v))};
}

TEST(HwyLayout, Transpose) {
  struct TCase {
    std::vector<int64_t> x, perm;
  };
  for (const TCase& t : std::vector<TCase>{{{1, 128, 12, 64}, {0, 2, 1, 3}},
                                           {{2, 12, 16, 8}, {0, 1, 3, 2}},
                                           {{1, 12, 128, 64}, {0, 1, 3, 2}},
                                           {{37, 53}, {}},
                                           {{3, 5, 7, 2, 4}, {4, 2, 0, 3, 1}},
                                           {{1, 1, 5}, {2, 0, 1}},
                                           {{1}, {0}},
                                           {{6, 1, 9}, {2, 1, 0}},
                                           {{300, 257}, {1, 0}}}) {
    SCOPED_TRACE(str_cat(dims_to_string(t.x), " perm ", dims_to_string(t.perm)));
    Attributes attrs;
    if (!t.perm.empty()) attrs["perm"] = AttrValue(t.perm);
    check_against_reference(*make_case("Transpose", {In{t.x}}, attrs), "hwy.transpose", 0, 0);
  }
}

TEST(HwyLayout, Expand) {
  check_against_reference(*make_case("Expand", {In{{3, 1}}, const_ints({2, 3, 4})}), "hwy.expand", 0, 0);
  check_against_reference(*make_case("Expand", {In{{1}}, const_ints({5, 7})}), "hwy.expand", 0, 0);
  check_against_reference(*make_case("Expand", {In{{1, 4, 1, 6}}, const_ints({3, 4, 5, 6})}), "hwy.expand", 0, 0);
  check_against_reference(*make_case("Expand", {In{{768}}, const_ints({128, 768})}), "hwy.expand", 0, 0);
}

TEST(HwyLayout, Slice) {
  struct SCase {
    std::vector<int64_t> x, starts, ends, axes, steps;
  };
  for (const SCase& t : std::vector<SCase>{{{10, 20}, {1, 2}, {8, 19}, {}, {}},
                                           {{10, 20}, {-1}, {-100}, {1}, {-3}},
                                           {{4, 5, 6}, {0, 1}, {100, 4}, {2, 0}, {2, 1}},
                                           {{4, 5, 6}, {3}, {3}, {1}, {1}},
                                           {{1, 128, 768}, {0}, {1}, {1}, {1}},
                                           {{1, 128, 2304}, {768}, {1536}, {2}, {1}},
                                           {{7}, {-2}, {INT64_MAX}, {0}, {1}},
                                           // A detector's boxes cut into pairs (runs of 2),
                                           // and every other column of short rows.
                                           {{1, 4420, 4}, {2}, {4}, {2}, {1}},
                                           {{3, 50, 6}, {1}, {6}, {2}, {2}}}) {
    SCOPED_TRACE(dims_to_string(t.x));
    std::vector<In> ins = {In{t.x}, const_ints(t.starts), const_ints(t.ends)};
    if (!t.axes.empty()) ins.push_back(const_ints(t.axes));
    if (!t.steps.empty()) ins.push_back(const_ints(t.steps));
    check_against_reference(*make_case("Slice", ins), "hwy.slice", 0, 0);
  }
}

TEST(HwyLayout, Concat) {
  check_against_reference(*make_case("Concat", {In{{2, 3, 4}}, In{{2, 5, 4}}, In{{2, 1, 4}}},
                                     {{"axis", AttrValue(int64_t{1})}}), "hwy.concat", 0, 0);
  check_against_reference(*make_case("Concat", {In{{3, 7}}, In{{2, 7}}}, {{"axis", AttrValue(int64_t{0})}}),
                          "hwy.concat", 0, 0);
  check_against_reference(*make_case("Concat", {In{{64, 300}}, In{{64, 700}}}, {{"axis", AttrValue(int64_t{-1})}}),
                          "hwy.concat", 0, 0);
  // Runs of 2 and 3 floats per row (a detector's box corners), copied by the short-run loop.
  check_against_reference(*make_case("Concat", {In{{1, 4420, 2}}, In{{1, 4420, 3}}, In{{1, 4420, 9}}},
                                     {{"axis", AttrValue(int64_t{2})}}), "hwy.concat", 0, 0);
}

TEST(HwyLayout, Gather) {
  // Constant indices (negative ones count from the end), along each axis.
  check_against_reference(*make_case("Gather", {In{{30, 8}}, const_ints({0, 29, -1, 5, 5})}), "hwy.gather", 0, 0);
  check_against_reference(*make_case("Gather", {In{{3, 30, 8}}, const_ints({2, -3})}, {{"axis", AttrValue(int64_t{1})}}),
                          "hwy.gather", 0, 0);
  check_against_reference(*make_case("Gather", {In{{3, 4, 9}}, In{{}, DType::kI64, Tensor::scalar<int64_t>(-2)}},
                                     {{"axis", AttrValue(int64_t{2})}}), "hwy.gather", 0, 0);
  // Run-time indices (an embedding lookup).
  auto c = make_case("Gather", {In{{1000, 64}}, In{{2, 7}, DType::kI64, {}, -1000, 1000}});
  check_against_reference(*c, "hwy.gather", 0, 0);
  // Out-of-range run-time indices are a user error, not a crash.
  c->inputs[1].data<int64_t>()[3] = 1000;
  auto k = compile(*c);
  auto out = allocate_outputs(*c->node);
  const Status st = run_kernel(*k, *c, out);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("out of range"), std::string::npos) << st.message();
}

TEST(HwyLayout, Resize) {
  const Tensor empty = Tensor::zeros(DType::kF32, {0}).value();
  auto scales = [&](std::vector<float> s) {
    return std::vector<In>{In{{}, DType::kF32, empty}, In{{4}, DType::kF32, Tensor::from_vector<float>({4}, s)}};
  };
  struct RCase {
    const char* mode;
    const char* coord;
    const char* nearest;
    std::vector<int64_t> x;
    std::vector<float> scales;    // or
    std::vector<int64_t> sizes;
  };
  for (const RCase& t : std::vector<RCase>{
           {"nearest", "asymmetric", "floor", {1, 3, 5, 7}, {1, 1, 2, 2}, {}},
           {"nearest", "half_pixel", "round_prefer_floor", {2, 2, 6, 4}, {1, 1, 1.5f, 3}, {}},
           {"nearest", "tf_half_pixel_for_nn", "floor", {1, 2, 5, 5}, {1, 1, 0.6f, 2}, {}},
           {"linear", "half_pixel", "round_prefer_floor", {1, 3, 5, 7}, {1, 1, 2, 2}, {}},
           {"linear", "align_corners", "round_prefer_floor", {2, 3, 4, 9}, {}, {2, 3, 7, 5}},
           {"linear", "pytorch_half_pixel", "round_prefer_floor", {1, 4, 8, 8}, {}, {1, 4, 3, 1}},
           {"linear", "asymmetric", "round_prefer_floor", {1, 64, 40, 40}, {1, 1, 2, 2}, {}},
           // NCHW linear upsampling blends each source row horizontally once for the output rows
           // reading it (kept per plane), downscaling vertically first; both wider than a vector.
           {"linear", "pytorch_half_pixel", "round_prefer_floor", {2, 3, 9, 11}, {}, {2, 3, 40, 45}},
           {"linear", "pytorch_half_pixel", "round_prefer_floor", {2, 3, 2, 11}, {}, {2, 3, 9, 45}},
           {"linear", "half_pixel", "round_prefer_floor", {1, 3, 37, 50}, {}, {1, 3, 11, 21}},
           {"linear", "align_corners", "round_prefer_floor", {1, 2, 5, 40}, {}, {1, 2, 17, 13}}}) {
    SCOPED_TRACE(str_cat(t.mode, " ", t.coord, " ", dims_to_string(t.x)));
    std::vector<In> ins = {In{t.x}};
    if (!t.scales.empty()) {
      for (In& i : scales(t.scales)) ins.push_back(i);
    } else {
      ins.push_back(In{{}, DType::kF32, empty});
      ins.push_back(In{{}, DType::kF32, empty});
      ins.push_back(const_ints(t.sizes));
    }
    Attributes attrs = {{"mode", AttrValue(std::string(t.mode))},
                        {"coordinate_transformation_mode", AttrValue(std::string(t.coord))},
                        {"nearest_mode", AttrValue(std::string(t.nearest))}};
    check_against_reference(*make_case("Resize", ins, attrs), "hwy.resize", 1e-5, 1e-6);
  }
  // tf_half_pixel_for_nn with round_prefer_ceil remaps the channels too (0.5 -> 1): declined.
  auto remap = scales({1, 1, 2, 2});
  remap.insert(remap.begin(), In{{1, 2, 4, 4}});
  EXPECT_EQ(compile(*make_case("Resize", remap, {{"coordinate_transformation_mode", AttrValue(std::string("tf_half_pixel_for_nn"))},
                                                 {"nearest_mode", AttrValue(std::string("round_prefer_ceil"))}}))->name(),
            "reference");
  // Cubic is declined.
  auto cubic = scales({1, 1, 2, 2});
  cubic.insert(cubic.begin(), In{{1, 1, 4, 4}});
  EXPECT_EQ(compile(*make_case("Resize", cubic, {{"mode", AttrValue(std::string("cubic"))}}))->name(), "reference");
}

}  // namespace
}  // namespace opfuse::hwy_test
