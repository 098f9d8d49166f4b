#include "compare.h"

#include <algorithm>
#include <cmath>

namespace opfuse::conformance {
namespace {

// Flat index -> "[i,j,k]".
std::string index_string(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] == 0 ? 0 : flat % dims[d];
    flat = dims[d] == 0 ? 0 : flat / dims[d];
  }
  return dims_to_string(idx);
}

}  // namespace

Comparison compare_tensors(const Tensor& got, const Tensor& expected, const Tolerance& tol) {
  Comparison out;
  if (got.dtype() != expected.dtype() || got.dims() != expected.dims()) {
    out.ok = false;
    out.message = str_cat("got ", got.type_string(), ", expected ", expected.type_string());
    return out;
  }
  const bool floating = is_float(got.dtype());
  int64_t bad = 0, first_bad = -1;
  double max_abs = 0, max_rel = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool equal;
    double abs_diff = 0;
    if (floating) {
      const double g = got.get_double(i), e = expected.get_double(i);
      if (std::isnan(g) || std::isnan(e)) {
        equal = std::isnan(g) && std::isnan(e);
        abs_diff = equal ? 0 : INFINITY;
      } else if (std::isinf(g) || std::isinf(e)) {
        equal = g == e;
        abs_diff = equal ? 0 : INFINITY;
      } else {
        abs_diff = std::fabs(g - e);
        equal = abs_diff <= tol.atol + tol.rtol * std::fabs(e);
        if (e != 0) max_rel = std::max(max_rel, abs_diff / std::fabs(e));
      }
    } else {
      // Integers compared as integers: u64/i64 values above 2^53 would collide as doubles.
      const bool is_u64 = got.dtype() == DType::kU64;
      const uint64_t g = is_u64 ? got.data<uint64_t>()[i] : static_cast<uint64_t>(got.get_int(i));
      const uint64_t e =
          is_u64 ? expected.data<uint64_t>()[i] : static_cast<uint64_t>(expected.get_int(i));
      equal = g == e;
      abs_diff = equal ? 0 : std::fabs(got.get_double(i) - expected.get_double(i));
    }
    max_abs = std::max(max_abs, abs_diff);
    if (!equal) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  }
  if (bad == 0) return out;
  out.ok = false;
  out.message =
      str_cat(bad, "/", got.numel(), " elements differ; max abs diff ", max_abs, ", max rel diff ",
              max_rel, "; first at ", index_string(first_bad, got.dims()), ": got ",
              got.get_double(first_bad), ", expected ", expected.get_double(first_bad));
  return out;
}

}  // namespace opfuse::conformance
