#include "frontend/onnx/opsets.h"

#include <algorithm>
#include <string_view>

namespace opfuse::onnx_import {
namespace {

struct UnchangedSince {
  std::string_view op;
  int64_t since;
};

// For every default-domain op that exists at opset 11, the version of its opset-11 schema
// (ONNX's since_version), when that is below 11: the op's semantics are the same at every
// opset from `since` to 11. Generated from the ONNX 1.12 operator schemas
// (onnx.defs.get_schema(op, 11).since_version); sorted by name. Ops absent here changed in
// opset 11 (or are new or deprecated), so older models using them are refused.
constexpr UnchangedSince kUnchangedBefore11[] = {
    {"Abs", 6}, {"Acos", 7}, {"Acosh", 9}, {"Add", 7}, {"And", 7}, {"Asin", 7}, {"Asinh", 9},
    {"Atan", 7}, {"Atanh", 9}, {"BatchNormalization", 9}, {"Cast", 9}, {"Ceil", 6},
    {"ConstantOfShape", 9}, {"ConvInteger", 10}, {"Cos", 7}, {"Cosh", 9},
    {"DequantizeLinear", 10}, {"Div", 7}, {"Dropout", 10}, {"Elu", 6}, {"Erf", 9}, {"Exp", 6},
    {"Expand", 8}, {"EyeLike", 9}, {"Floor", 6}, {"GRU", 7}, {"GlobalAveragePool", 1},
    {"GlobalLpPool", 2}, {"GlobalMaxPool", 1}, {"Greater", 9}, {"HardSigmoid", 6},
    {"Identity", 1}, {"InstanceNormalization", 6}, {"IsInf", 10}, {"IsNaN", 9}, {"LRN", 1},
    {"LSTM", 7}, {"LeakyRelu", 6}, {"Less", 9}, {"Log", 6}, {"LpNormalization", 1}, {"MatMul", 9},
    {"MatMulInteger", 10}, {"Max", 8}, {"MaxRoiPool", 1}, {"Mean", 8},
    {"MeanVarianceNormalization", 9}, {"Min", 8}, {"Mod", 10}, {"Mul", 7}, {"Multinomial", 7},
    {"Neg", 6}, {"NonZero", 9}, {"Not", 1}, {"Or", 7}, {"PRelu", 9}, {"Pow", 7},
    {"QLinearConv", 10}, {"QLinearMatMul", 10}, {"QuantizeLinear", 10}, {"RNN", 7},
    {"RandomNormal", 1}, {"RandomNormalLike", 1}, {"RandomUniform", 1}, {"RandomUniformLike", 1},
    {"Reciprocal", 6}, {"Relu", 6}, {"Reshape", 5}, {"ReverseSequence", 10}, {"RoiAlign", 10},
    {"Selu", 6}, {"Shape", 1}, {"Shrink", 9}, {"Sigmoid", 6}, {"Sign", 9}, {"Sin", 7},
    {"Sinh", 9}, {"Size", 1}, {"Softplus", 1}, {"Softsign", 1}, {"SpaceToDepth", 1}, {"Sqrt", 6},
    {"StringNormalizer", 10}, {"Sub", 7}, {"Sum", 8}, {"Tan", 7}, {"Tanh", 6},
    {"TfIdfVectorizer", 9}, {"ThresholdedRelu", 10}, {"Tile", 6}, {"Transpose", 1}, {"Where", 9},
    {"Xor", 7},
};

}  // namespace

std::string canonical_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

Result<std::map<std::string, int64_t>> read_opset_imports(const onnx::ModelProto& model) {
  std::map<std::string, int64_t> versions;
  for (const auto& entry : model.opset_import()) {
    const std::string domain = canonical_domain(entry.domain());
    const std::string shown = domain.empty() ? "ai.onnx" : domain;
    if (versions.count(domain)) {
      return Status::user_error(str_cat("the model imports domain ", shown, " twice"));
    }
    if (domain.empty() && (entry.version() < 1 || entry.version() > kMaxOnnxOpset)) {
      return Status::user_error(str_cat("opset ", entry.version(), " of domain ai.onnx is not supported (opfuse supports opsets ",
                                        kMinOnnxOpset, "-", kMaxOnnxOpset, ")"));
    }
    versions[domain] = entry.version();
  }
  return versions;
}

int64_t onnx_op_unchanged_since(const std::string& op_type) {
  const auto* end = std::end(kUnchangedBefore11);
  const auto* it = std::lower_bound(std::begin(kUnchangedBefore11), end, op_type,
                                    [](const UnchangedSince& e, const std::string& op) {
                                      return e.op < op;
                                    });
  return it != end && it->op == op_type ? it->since : 0;
}

}  // namespace opfuse::onnx_import
