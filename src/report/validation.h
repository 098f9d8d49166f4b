// Fused vs unfused: run eager mode (the oracle) and a level on the same inputs, compare every
// output (`opfuse validate`), and when a level fails, find the fusion that breaks it (--bisect):
// first the rule (every rule the level applied switched off, then each one on alone, then
// cumulatively), then the fused kernel within that rule (binary search with node-name
// exclusions).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace opfuse {

struct Tolerance {
  double rtol = 1e-4;  // relative to the largest reference magnitude (runtime/compare.h)
  double atol = 1e-6;
};

struct OutputDiff {
  std::string name;
  double max_abs = 0;  // max |got - want|
  double max_rel = 0;  // max |got - want| / max |want|
  bool ok = true;      // max_abs <= atol + rtol * max |want| (NaN only where the reference has one)
};

struct ValidationResult {
  std::vector<OutputDiff> outputs;
  bool ok = true;
};

ValidationResult compare_outputs(const TensorMap& got, const TensorMap& want, const Tolerance& tol);

// Eager mode's own sensitivity to rounding on these inputs: the largest relative change of an
// output (max |diff| / max |output|) when every f32 input element and every f32 weight, bias
// and quantization scale (constants read only by Conv, ConvTranspose, Gemm, MatMul,
// BatchNormalization, or as the scale of QuantizeLinear / DequantizeLinear) moves by one unit
// in its last place, up or down at random (seeded). A level computing the same model in another, equally valid order of float
// operations differs by about as much, so no level can be judged below it: YOLOv5s on uniform
// random inputs moves by 4e-4 to 9e-4 (its exp() box sizes amplify rounding), and ONNX Runtime's
// own optimisation levels differ from each other by 3e-4 there; a quantized model's requantizations
// turn such ulps into whole steps.
Result<double> rounding_sensitivity(const Session& eager, const TensorMap& inputs, const TensorMap& reference,
                                    uint64_t seed = 1);

// The tolerance when the user gives none: rtol = max(1e-4, 10 x sensitivity), atol 1e-6. (Most
// models stay at 1e-4: resnet50 moves by 3e-6. A wrong fusion moves outputs by far more than
// rounding does, but one that errs by less than 10x the model's own rounding noise passes.)
Tolerance tolerance_for_sensitivity(double sensitivity);

// Runs `options` (graph mode, its level and fusion config) on a clone of `model` and compares
// with `reference` (eager outputs).
Result<ValidationResult> validate_against(const Graph& model, const SessionOptions& options,
                                          const TensorMap& inputs, const TensorMap& reference,
                                          const Tolerance& tol);

struct BisectResult {
  bool level_fails = false;     // false: nothing to bisect
  bool fusion_at_fault = false;  // false: it fails with every fusion rule off too
  std::string rule;              // the rule whose enabling breaks tolerance
  bool rule_alone = true;        // false: it breaks only together with the rules enabled before it
  std::vector<std::string> nodes;      // the members of the guilty fused kernel (when found)
  std::vector<std::string> decisions;  // what the rule did to them
  std::string summary;           // one paragraph for the user
  int compilations = 0;
};

// `log` (optional) gets one line per trial.
Result<BisectResult> bisect_fusion(const Graph& model, const SessionOptions& options, const TensorMap& inputs,
                                   const Tolerance& tol, std::ostream* log = nullptr);

}  // namespace opfuse
