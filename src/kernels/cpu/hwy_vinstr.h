// One instruction of a vector program (hwy_vector_ops-inl.h): a ScalarInstr with its constant
// in float. `pow_exp` marks a Pow whose exponent is a known constant (value) with a cheaper exact
// form.
#pragma once

#include <cstdint>
#include <type_traits>  // std::integral_constant in hwy_vector_ops-inl.h

#include "ops/scalar_expr.h"

namespace opfuse::hwy_cpu {
struct VInstr {
  ScalarOp op;
  int32_t a = -1, b = -1, c = -1;
  float value = 0;
  bool pow_exp = false;
};
}  // namespace opfuse::hwy_cpu
