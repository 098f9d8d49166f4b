// Compares an output tensor with the ONNX test's expected tensor.
#pragma once

#include <string>

#include "core/tensor.h"

namespace opfuse::conformance {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};

struct Comparison {
  bool ok = true;
  std::string message;  // why not, with max abs/rel diff and the first bad element
};

// Floats pass when |got - expected| <= atol + rtol * |expected| (NaN equals NaN, infinities
// must match exactly); integers and bools must be equal. Dtype and dims must match.
Comparison compare_tensors(const Tensor& got, const Tensor& expected, const Tolerance& tol);

}  // namespace opfuse::conformance
