// ONNX export: optimize -> export -> load -> run gives exactly the in-memory compiled result, for
// every tiny zoo model at every level; --standard-only leaves no opfuse op and stays correct.
#include "frontend/onnx/exporter.h"

#include <gtest/gtest.h>

#include "core/target.h"
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "frontend/onnx/importer.h"
#include "ir/text_format.h"
#include "pipelines/pipeline.h"
#include "report/fusion_analysis.h"
#include "runtime/compare.h"
#include "runtime/session.h"
#include "testing/fusion_models.h"
#include "testing/zoo.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

TEST(OnnxExport, FusedOpsGoToTheOpfuseDomainWithTheirAttributes) {
  Graph g = parse_graph(testing_models::kBlockAndHead).value();
  auto analysis = analyze_fusion(g, OptLevel::kO2, {});
  ASSERT_TRUE(analysis.is_ok());
  auto bytes = export_onnx(analysis->after);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(*bytes));
  ASSERT_EQ(model.opset_import_size(), 2);
  EXPECT_EQ(model.opset_import(0).domain(), "");
  EXPECT_EQ(model.opset_import(0).version(), 13);
  EXPECT_EQ(model.opset_import(1).domain(), "opfuse");
  EXPECT_EQ(model.opset_import(1).version(), 1);
  ASSERT_EQ(model.graph().node_size(), 2);
  const onnx::NodeProto& n = model.graph().node(0);
  EXPECT_EQ(n.op_type(), "FusedConv");
  EXPECT_EQ(n.domain(), "opfuse");
  EXPECT_EQ(n.name(), "/block/conv/Conv");
  bool epilogue = false;
  for (const auto& a : n.attribute()) {
    if (a.name() == "epilogue") {
      epilogue = true;
      ASSERT_EQ(a.strings_size(), 1);
      EXPECT_EQ(a.strings(0), "relu");
    }
  }
  EXPECT_TRUE(epilogue);
  // Folded weights and bias are initializers: W_folded, its bias, and the head's W.
  EXPECT_EQ(model.graph().initializer_size(), 3);

  OnnxExportOptions standard;
  standard.standard_only = true;
  auto refused = export_onnx(analysis->after, standard);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("domain 'opfuse'"), std::string::npos);
}

// A model optimised for one ISA tier records it; loading it where the active target is lower
// is refused with a message naming both (its layouts would run on reference loops).
TEST(OnnxExport, OptimisedModelRecordsItsTargetAndIsRefusedBelowIt) {
  auto g = parse_graph(R"(graph @main opset 13 (%x: f32[2]) {
  %y: f32[2] = Relu(%x) #relu
  return %y
})");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const IsaTier here = active_target().isa;
  OnnxExportOptions options;
  options.target = std::string(isa_tier_name(here));
  auto same = export_onnx(*g, options);
  ASSERT_TRUE(same.is_ok());
  EXPECT_TRUE(load_onnx_bytes(*same, "", {}, "same.onnx").is_ok());
  if (here == IsaTier::kAvx512CoreAmx) GTEST_SKIP() << "no tier above this one";
  options.target = std::string(isa_tier_name(static_cast<IsaTier>(static_cast<int>(here) + 1)));
  auto higher = export_onnx(*g, options);
  ASSERT_TRUE(higher.is_ok());
  auto refused = load_onnx_bytes(*higher, "", {}, "higher.onnx");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().kind(), ErrorKind::kUser);
  EXPECT_NE(refused.status().message().find("was optimised for " + options.target), std::string::npos)
      << refused.status().message();
}

TEST(OnnxExport, StandardOnlyDisablesRulesThatMakeOpfuseOps) {
  Graph g = parse_graph(testing_models::kBlockAndHead).value();
  std::vector<std::string> disabled;
  auto analysis = analyze_fusion_standard_only(g, OptLevel::kO2, {}, {}, disabled);
  ASSERT_TRUE(analysis.is_ok()) << analysis.status().message();
  EXPECT_EQ(disabled, std::vector<std::string>{"epilogue_relu"});
  for (const Node* n : analysis->after.nodes()) EXPECT_TRUE(n->domain().empty()) << n->describe();
  EXPECT_EQ(analysis->after.num_nodes(), 4u);  // BN still folded: Conv, Relu, Conv, Relu
  OnnxExportOptions standard;
  standard.standard_only = true;
  EXPECT_TRUE(export_onnx(analysis->after, standard).is_ok());
}

struct RoundTripCase {
  std::string model;
  OptLevel level;
};

class OnnxRoundTrip : public testing::TestWithParam<RoundTripCase> {};

std::vector<RoundTripCase> round_trip_cases() {
  std::vector<RoundTripCase> cases;
  for (const std::string& model : testing_zoo::models_in_tier()) {
    for (OptLevel l : {OptLevel::kO0, OptLevel::kO1, OptLevel::kO2, OptLevel::kO3}) cases.push_back({model, l});
  }
  return cases;
}

TEST_P(OnnxRoundTrip, LoadsBackAndRunsIdentically) {
  const nlohmann::json entry = testing_zoo::load_manifest()[GetParam().model];
  const fs::path dir = testing_zoo::zoo_dir();
  Graph graph = load_onnx_file((dir / entry["file"].get<std::string>()).string()).value();
  TensorMap inputs;
  for (const auto& in : entry["inputs"]) {
    inputs[in["name"].get<std::string>()] = read_npy((dir / in["file"].get<std::string>()).string()).value();
  }
  // Symbolic dims bound to the sizes of the given inputs; unnamed ones (no symbol to bind) set
  // on the input itself.
  std::map<std::string, int64_t> dims;
  for (Value* in : graph.inputs()) {
    const Tensor& t = inputs.at(in->name());
    for (size_t i = 0; in->shape && i < in->shape->size(); ++i) {
      Dim& d = (*in->shape)[i];
      if (d.is_symbolic()) dims[d.symbol_name()] = t.dims()[i];
      else if (!d.is_known()) d = Dim(t.dims()[i]);
    }
  }
  // Scalar settings an If depends on (Silero's sample rate) are bound as graph mode binds them.
  TensorMap values;
  for (size_t i : inputs_deciding_ifs(graph)) values[graph.inputs()[i]->name()] = inputs.at(graph.inputs()[i]->name());
  auto analysis = analyze_fusion(graph, GetParam().level, {}, dims, values);
  ASSERT_TRUE(analysis.is_ok()) << analysis.status().message();
  auto bytes = export_onnx(analysis->after);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();

  auto plan = CompiledPlan::compile(analysis->after.clone(), {});
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  const TensorMap in_memory = (*plan)->run(inputs).value();

  auto loaded = load_onnx_bytes(*bytes, "", {}, "exported");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(loaded->num_nodes(), analysis->after.num_nodes());
  SessionOptions o0;
  o0.level = OptLevel::kO0;  // the file is already optimised: run it as it is
  auto session = Session::create(std::move(*loaded), o0);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  auto outputs = session->run(inputs);
  ASSERT_TRUE(outputs.is_ok()) << outputs.status().message();
  for (const auto& [name, want] : in_memory) {
    ASSERT_TRUE(outputs->count(name)) << name;
    // Same graph, same kernels, same shapes: bit-identical.
    EXPECT_EQ(max_relative_difference(outputs->at(name), want), 0.0) << GetParam().model << " " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, OnnxRoundTrip, testing::ValuesIn(round_trip_cases()),
                         [](const testing::TestParamInfo<RoundTripCase>& info) {
                           return info.param.model + "_" + std::string(opt_level_name(info.param.level));
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OnnxRoundTrip);

}  // namespace
}  // namespace opfuse
