// Runs one ONNX backend conformance case (a single-node model.onnx plus test_data_set_0) through
// opfuse's op records: builds the node in a Graph (input 0 a graph input, the others constants so
// inference sees scales/sizes/axes), infers shapes, runs the reference kernel and compares every
// output with the expected .pb tensor. Test-only: the real importer lives elsewhere.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/reference.h"
#include "ops/infer_shapes.h"
#include "testing/onnx_files.h"

namespace opfuse::testing_onnx {

using testing_onnx_files::attributes_from;
using testing_onnx_files::read_proto;
using testing_onnx_files::tensor_from;

inline const char* kOnnxNodeData = "/usr/share/libonnx-testdata/data/node";

// Runs the case in directory `name`; reports failures through gtest. Returns false when the data
// is not installed (the caller skips).
inline bool run_onnx_node_case(const std::string& name, double rtol = 1e-4, double atol = 1e-5) {
  const std::string dir = std::string(kOnnxNodeData) + "/" + name;
  onnx::ModelProto model;
  if (!read_proto(dir + "/model.onnx", model)) return false;
  SCOPED_TRACE(name);
  // Inputs: the graph inputs (input_N.pb in graph order) and any Constant nodes (opset-11
  // models feed scales that way); the op under test is the one non-Constant node.
  std::map<std::string, Tensor> known;
  for (int i = 0; i < model.graph().input_size(); ++i) {
    onnx::TensorProto tp;
    const std::string path = str_cat(dir, "/test_data_set_0/input_", i, ".pb");
    EXPECT_TRUE(read_proto(path, tp)) << path;
    auto t = tensor_from(tp);
    EXPECT_TRUE(t.is_ok()) << t.status().message();
    if (!t.is_ok()) return true;
    known[model.graph().input(i).name()] = *t;
  }
  const onnx::NodeProto* main_node = nullptr;
  for (const onnx::NodeProto& n : model.graph().node()) {
    if (n.op_type() != "Constant") {
      main_node = &n;
      continue;
    }
    for (const auto& a : n.attribute()) {
      if (a.name() != "value") continue;
      auto t = tensor_from(a.t());
      EXPECT_TRUE(t.is_ok()) << t.status().message();
      if (t.is_ok()) known[n.output(0)] = *t;
    }
  }
  EXPECT_NE(main_node, nullptr);
  if (main_node == nullptr) return true;
  const onnx::NodeProto& np = *main_node;
  Graph g;
  std::vector<Value*> inputs;
  std::vector<Tensor> tensors;
  for (int i = 0; i < np.input_size(); ++i) {
    auto it = known.find(np.input(i));
    if (np.input(i).empty() || it == known.end()) {
      EXPECT_TRUE(np.input(i).empty()) << "no data for input " << np.input(i);
      inputs.push_back(nullptr);
      tensors.emplace_back();
      continue;
    }
    const Tensor& t = it->second;
    tensors.push_back(t);
    inputs.push_back(i == 0 ? g.add_input(np.input(i), t.dtype(), t.shape())
                            : g.add_constant(np.input(i), t));
  }
  std::vector<std::string> outs(np.output().begin(), np.output().end());
  auto node = g.add_node(np.op_type(), inputs, outs, attributes_from(np).value(), "n");
  EXPECT_TRUE(node.is_ok()) << node.status().message();
  if (!node.is_ok()) return true;
  Status inferred = infer_shapes(g);
  EXPECT_TRUE(inferred.is_ok()) << inferred.message();
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : tensors) ptrs.push_back(t.defined() ? &t : nullptr);
  auto result = run_reference(**node, ptrs);
  EXPECT_TRUE(result.is_ok()) << result.status().message();
  if (!result.is_ok()) return true;
  for (size_t o = 0; o < outs.size(); ++o) {
    onnx::TensorProto tp;
    const std::string path = str_cat(dir, "/test_data_set_0/output_", o, ".pb");
    EXPECT_TRUE(read_proto(path, tp)) << path;
    auto want = tensor_from(tp);
    EXPECT_TRUE(want.is_ok());
    if (!want.is_ok()) continue;
    const Tensor& got = (*result)[o];
    EXPECT_EQ(got.dtype(), want->dtype()) << "output " << o;
    EXPECT_EQ(got.dims(), want->dims()) << "output " << o;
    if (got.dims() != want->dims()) continue;
    // Inference must agree with what the kernel produced.
    const Value* v = (*node)->output(o);
    EXPECT_TRUE(v->shape && *v->shape == want->shape())
        << "output " << o << " inferred " << (v->shape ? shape_to_string(*v->shape) : "none");
    int bad = 0;
    for (int64_t i = 0; i < got.numel() && bad < 5; ++i) {
      const double a = got.get_double(i), b = want->get_double(i);
      if (std::isnan(b) ? !std::isnan(a) : std::fabs(a - b) > atol + rtol * std::fabs(b)) {
        ADD_FAILURE() << "output " << o << " element " << i << ": got " << a << ", want " << b;
        ++bad;
      }
    }
  }
  return true;
}

// The conformance case directories whose names start with `prefix` (not the *_expanded variants,
// which test a decomposition into other ops).
inline std::vector<std::string> onnx_cases(const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kOnnxNodeData, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && n.find("_expanded") == std::string::npos) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace opfuse::testing_onnx
