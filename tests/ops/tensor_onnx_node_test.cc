// Runs the tensor family against the ONNX backend conformance data (model.onnx holding one node
// plus test_data_set_0/{input,output}_N.pb) shipped in /usr/share/libonnx-testdata. Inputs are
// fed as constants, so shape inference must also produce the exact output shapes.
#ifndef ONNX_ML
#define ONNX_ML 1  // the installed libonnx ships only the -ml protos
#endif
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tensor_test_util.h"
#include "testing/onnx_files.h"

namespace opfuse::testing {
namespace {

using testing_onnx_files::attributes_from;
using testing_onnx_files::read_proto;
using testing_onnx_files::tensor_from;

const char* kNodeDataDir = "/usr/share/libonnx-testdata/data/node";

class OnnxNodeData : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxNodeData, MatchesExpectedOutputs) {
  const std::filesystem::path dir = std::filesystem::path(kNodeDataDir) / GetParam();
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " not installed";
  onnx::ModelProto model;
  ASSERT_TRUE(read_proto(dir / "model.onnx", model));
  ASSERT_EQ(model.graph().node_size(), 1);
  const onnx::NodeProto& node = model.graph().node(0);
  std::vector<Arg> args;
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) {
      args.push_back(none());
      continue;
    }
    onnx::TensorProto p;
    ASSERT_TRUE(read_proto(dir / "test_data_set_0" / ("input_" + std::to_string(args.size()) + ".pb"), p));
    args.push_back(cst(tensor_from(p).value()));
  }
  auto r = run_node(node.op_type(), args, attributes_from(node).value(), node.output_size());
  if (std::string(GetParam()).find("training_dropout") != std::string::npos) {
    expect_user_error(r.build, {"training_mode"});  // opfuse is inference-only
    return;
  }
  ASSERT_TRUE(r.build.is_ok()) << r.build.message();
  ASSERT_TRUE(r.run.is_ok()) << r.run.message();
  for (int o = 0; o < node.output_size(); ++o) {
    onnx::TensorProto p;
    ASSERT_TRUE(read_proto(dir / "test_data_set_0" / ("output_" + std::to_string(o) + ".pb"), p));
    const Tensor want = tensor_from(p).value();
    const Tensor& got = r.outputs[o];
    ASSERT_EQ(got.type_string(), want.type_string()) << "output " << o;
    EXPECT_EQ(r.shape(o), shape_to_string(want.shape())) << "inferred shape of output " << o;
    EXPECT_EQ(r.values[o]->dtype, want.dtype());
    for (int64_t i = 0; i < want.numel(); ++i) {
      ASSERT_DOUBLE_EQ(got.get_double(i), want.get_double(i)) << "output " << o << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TensorOps, OnnxNodeData,
    ::testing::Values(
        "test_concat_1d_axis_0", "test_concat_1d_axis_negative_1", "test_concat_2d_axis_0", "test_concat_2d_axis_1",
        "test_concat_2d_axis_negative_1", "test_concat_2d_axis_negative_2", "test_concat_3d_axis_0",
        "test_concat_3d_axis_1", "test_concat_3d_axis_2", "test_concat_3d_axis_negative_1",
        "test_concat_3d_axis_negative_2", "test_concat_3d_axis_negative_3", "test_constant", "test_constant_pad",
        "test_constantofshape_float_ones", "test_constantofshape_int_shape_zero", "test_constantofshape_int_zeros",
        "test_dropout_default", "test_dropout_default_mask", "test_dropout_default_mask_ratio",
        "test_dropout_default_ratio", "test_training_dropout", "test_training_dropout_mask", "test_edge_pad",
        "test_expand_dim_changed", "test_expand_dim_unchanged", "test_flatten_axis0", "test_flatten_axis1",
        "test_flatten_axis2", "test_flatten_axis3", "test_flatten_default_axis", "test_flatten_negative_axis1",
        "test_flatten_negative_axis2", "test_flatten_negative_axis3", "test_flatten_negative_axis4", "test_gather_0",
        "test_gather_1", "test_gather_2d_indices", "test_gather_elements_0", "test_gather_elements_1",
        "test_gather_elements_negative_indices", "test_gather_negative_indices", "test_identity",
        "test_range_float_type_positive_delta", "test_range_int32_type_negative_delta", "test_reflect_pad",
        "test_reshape_allowzero_reordered", "test_reshape_extended_dims", "test_reshape_negative_dim",
        "test_reshape_negative_extended_dims", "test_reshape_one_dim", "test_reshape_reduced_dims",
        "test_reshape_reordered_all_dims", "test_reshape_reordered_last_dims", "test_reshape_zero_and_negative_dim",
        "test_reshape_zero_dim", "test_shape", "test_shape_clip_end", "test_shape_clip_start", "test_shape_end_1",
        "test_shape_end_negative_1", "test_shape_example", "test_shape_start_1", "test_shape_start_1_end_2",
        "test_shape_start_1_end_negative_1", "test_shape_start_negative_1", "test_size", "test_size_example",
        "test_slice", "test_slice_default_axes", "test_slice_default_steps", "test_slice_end_out_of_bounds",
        "test_slice_neg", "test_slice_neg_steps", "test_slice_negative_axes", "test_slice_start_out_of_bounds",
        "test_split_equal_parts_1d", "test_split_equal_parts_2d", "test_split_equal_parts_default_axis",
        "test_split_variable_parts_1d", "test_split_variable_parts_2d", "test_split_variable_parts_default_axis",
        "test_split_zero_size_splits", "test_squeeze", "test_squeeze_negative_axes", "test_tile",
        "test_tile_precomputed", "test_transpose_all_permutations_0", "test_transpose_all_permutations_1",
        "test_transpose_all_permutations_2", "test_transpose_all_permutations_3", "test_transpose_all_permutations_4",
        "test_transpose_all_permutations_5", "test_transpose_default", "test_unsqueeze_axis_0",
        "test_unsqueeze_axis_1", "test_unsqueeze_axis_2", "test_unsqueeze_negative_axes", "test_unsqueeze_three_axes",
        "test_unsqueeze_two_axes", "test_unsqueeze_unsorted_axes"),
    [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param).substr(5); });

}  // namespace
}  // namespace opfuse::testing
