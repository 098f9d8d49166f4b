#include "frontend/onnx/opsets.h"

#include <algorithm>
#include <span>
#include <string_view>

#include "frontend/onnx/canonicalize.h"

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
// clang-format off
constexpr UnchangedSince kUnchangedBefore11[] = {
    {"Abs", 6}, {"Acos", 7}, {"Acosh", 9}, {"Add", 7}, {"And", 7}, {"Asin", 7}, {"Asinh", 9},
    {"Atan", 7}, {"Atanh", 9}, {"BatchNormalization", 9}, {"Cast", 9}, {"Ceil", 6},
    {"ConstantOfShape", 9}, {"ConvInteger", 10}, {"Cos", 7}, {"Cosh", 9}, {"DequantizeLinear", 10},
    {"Div", 7}, {"Dropout", 10}, {"Elu", 6}, {"Erf", 9}, {"Exp", 6}, {"Expand", 8}, {"EyeLike", 9},
    {"Floor", 6}, {"GRU", 7}, {"GlobalAveragePool", 1}, {"GlobalLpPool", 2}, {"GlobalMaxPool", 1},
    {"Greater", 9}, {"HardSigmoid", 6}, {"Identity", 1}, {"InstanceNormalization", 6},
    {"IsInf", 10}, {"IsNaN", 9}, {"LRN", 1}, {"LSTM", 7}, {"LeakyRelu", 6}, {"Less", 9}, {"Log", 6},
    {"LpNormalization", 1}, {"MatMul", 9}, {"MatMulInteger", 10}, {"Max", 8}, {"MaxRoiPool", 1},
    {"Mean", 8}, {"MeanVarianceNormalization", 9}, {"Min", 8}, {"Mod", 10}, {"Mul", 7},
    {"Multinomial", 7}, {"Neg", 6}, {"NonZero", 9}, {"Not", 1}, {"Or", 7}, {"PRelu", 9}, {"Pow", 7},
    {"QLinearConv", 10}, {"QLinearMatMul", 10}, {"QuantizeLinear", 10}, {"RNN", 7},
    {"RandomNormal", 1}, {"RandomNormalLike", 1}, {"RandomUniform", 1}, {"RandomUniformLike", 1},
    {"Reciprocal", 6}, {"Relu", 6}, {"Reshape", 5}, {"ReverseSequence", 10}, {"RoiAlign", 10},
    {"Selu", 6}, {"Shape", 1}, {"Shrink", 9}, {"Sigmoid", 6}, {"Sign", 9}, {"Sin", 7}, {"Sinh", 9},
    {"Size", 1}, {"Softplus", 1}, {"Softsign", 1}, {"SpaceToDepth", 1}, {"Sqrt", 6},
    {"StringNormalizer", 10}, {"Sub", 7}, {"Sum", 8}, {"Tan", 7}, {"Tanh", 6},
    {"TfIdfVectorizer", 9}, {"ThresholdedRelu", 10}, {"Tile", 6}, {"Transpose", 1}, {"Where", 9},
    {"Xor", 7},
};
// clang-format on

// Ops whose schema changed at opset 11 only by accepting more than before (negative axes or
// indices, an input made optional, more types, new attributes whose defaults keep the old
// behaviour): a node of an older version from `since` on means what it means at 11. Checked
// against the ONNX changelog; sorted by name.
// clang-format off
constexpr UnchangedSince kCompatibleBefore11[] = {
    {"ArgMax", 1}, {"ArgMin", 1},                 // 11: negative axis
    {"AveragePool", 1},                            // 7 count_include_pad, 10 ceil_mode: default off
    {"Cast", 6},                                   // 9: string types
    {"Concat", 4},                                 // 11: negative axis (4: axis required)
    {"Conv", 1}, {"ConvTranspose", 1},             // 11: pads may be omitted
    {"Dropout", 7},                                // 10: the mask's type
    {"Equal", 7},                                  // 11: float types
    {"Flatten", 1},                                // 9: types; 11: negative axis
    {"Gather", 1},                                 // 11: negative indices
    {"Gemm", 7},                                   // 9: types; 11: C optional
    {"Greater", 7},                                // 9: types
    {"Hardmax", 1},                                // 11: negative axis (2-D coercion: canonicalize)
    {"If", 1},                                     // 11: branches' output shapes may differ
    {"Less", 7},                                   // 9: types
    {"LogSoftmax", 1},                             // 11: negative axis (2-D coercion: canonicalize)
    {"Loop", 1},                                   // 11: shapes of carried values may change
    {"MatMul", 1},                                 // 9: types
    {"Max", 6},                                    // 8: broadcasting
    {"MaxPool", 1},                                // 8 indices, 10 ceil_mode and dilations
    {"Mean", 6}, {"Min", 6},                       // 8: broadcasting
    {"PRelu", 7},                                  // 9: types
    {"ReduceL1", 1}, {"ReduceL2", 1}, {"ReduceLogSum", 1}, {"ReduceLogSumExp", 1},
    {"ReduceMax", 1}, {"ReduceMean", 1}, {"ReduceMin", 1}, {"ReduceProd", 1}, {"ReduceSum", 1},
    {"ReduceSumSquare", 1},                        // 11: negative axes
    {"Scan", 9},                                   // 11: negative axes (8 had another signature)
    {"Slice", 10},                                 // 11: negative axes
    {"Softmax", 1},                                // 11: negative axis
    {"Split", 2},                                  // 11: negative axis
    {"Squeeze", 1},                                // 11: negative axes
    {"Sum", 6},                                    // 8: broadcasting
    {"Unsqueeze", 1},                              // 11: negative axes
};
// clang-format on

// Ops whose meaning changed in opsets 18-21 beyond new types and that canonicalize.cc does not
// rewrite: a newer model using them is refused rather than read with opset-17 semantics.
constexpr UnchangedSince kChangedAfter17[] = {
    {"GridSample", 20},          // modes renamed, N-d
    {"GroupNormalization", 21},  // per-channel scale and bias
    {"LpPool", 18},              // ceil_mode
};

int64_t since_in(std::span<const UnchangedSince> table, const std::string& op_type) {
  for (const UnchangedSince& e : table) {
    if (e.op == op_type) return e.since;
  }
  return 0;
}

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
    if (domain.empty() && (entry.version() < 1 || entry.version() > kMaxImportedOpset)) {
      return Status::user_error(str_cat(
          "opset ", entry.version(), " of domain ai.onnx is not supported (opfuse reads opsets up to ",
          kMaxImportedOpset, ")"));
    }
    versions[domain] = entry.version();
  }
  return versions;
}

Result<int64_t> record_opset(const std::string& op_type, int64_t opset) {
  if (opset >= kMinOnnxOpset && opset <= kMaxOnnxOpset) return opset;
  if (has_version_rewrite(op_type, opset)) return opset < kMinOnnxOpset ? kMinOnnxOpset : kMaxOnnxOpset;
  if (opset > kMaxOnnxOpset) {
    const int64_t changed = since_in(kChangedAfter17, op_type);
    if (changed == 0 || changed > opset) return kMaxOnnxOpset;
    return Status::user_error(str_cat("op ", op_type, " (domain ai.onnx, opset ", opset,
                                      ") is not supported: its meaning changed at opset ", changed,
                                      " and opfuse implements the opset-", kMaxOnnxOpset, " form"));
  }
  const int64_t unchanged = since_in(kUnchangedBefore11, op_type);
  const int64_t compatible = since_in(kCompatibleBefore11, op_type);
  if ((unchanged != 0 && unchanged <= opset) || (compatible != 0 && compatible <= opset)) return kMinOnnxOpset;
  return Status::user_error(str_cat("op ", op_type, " (domain ai.onnx, opset ", opset,
                                    ") is not supported: opfuse reads it from opset ",
                                    std::max(unchanged, compatible) != 0 ? std::max(unchanged, compatible) : kMinOnnxOpset,
                                    " on, and ", op_type, " changed between opset ", opset, " and ", kMinOnnxOpset));
}

}  // namespace opfuse::onnx_import
