#include "runtime/random_inputs.h"

#include <vector>

#include "core/random.h"

namespace opfuse {

std::vector<int64_t> concrete_dims(const Shape& shape, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> sizes;
  for (const Dim& d : shape) {
    if (d.is_known()) {
      sizes.push_back(d.value());
    } else if (d.is_symbolic() && dims.count(d.symbol_name())) {
      sizes.push_back(dims.at(d.symbol_name()));
    } else {
      sizes.push_back(1);
    }
  }
  return sizes;
}

Result<TensorMap> random_inputs(const Session& session, uint64_t seed, const std::map<std::string, int64_t>& dims,
                                TensorMap given) {
  Random rng(seed);
  for (const TensorSignature& sig : session.inputs()) {
    if (given.count(sig.name)) continue;
    if (!sig.shape) {
      return Status::user_error(str_cat("input '", sig.name, "' has unknown rank: give its data explicitly"));
    }
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(sig.dtype, concrete_dims(*sig.shape, dims),
                                                     str_cat("input '", sig.name, "'")));
    fill_uniform(t, rng, is_float(sig.dtype) ? -1.0 : 0.0, is_float(sig.dtype) ? 1.0 : 2.0);
    given[sig.name] = std::move(t);
  }
  return given;
}

}  // namespace opfuse
