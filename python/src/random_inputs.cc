#include "random_inputs.h"

#include <vector>

#include "core/random.h"

namespace opfuse {

Result<TensorMap> random_inputs(const Session& session, uint64_t seed, const std::map<std::string, int64_t>& dims) {
  Random rng(seed);
  TensorMap inputs;
  for (const TensorSignature& sig : session.inputs()) {
    if (!sig.shape) {
      return Status::user_error(str_cat("input '", sig.name, "' has unknown rank; pass it in `inputs`"));
    }
    std::vector<int64_t> sizes;
    for (const Dim& d : *sig.shape) {
      if (d.is_known()) {
        sizes.push_back(d.value());
      } else if (d.is_symbolic() && dims.count(d.symbol_name())) {
        sizes.push_back(dims.at(d.symbol_name()));
      } else {
        sizes.push_back(1);
      }
    }
    OPFUSE_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(sig.dtype, sizes, str_cat("input '", sig.name, "'")));
    fill_uniform(t, rng, is_float(sig.dtype) ? -1.0 : 0.0, is_float(sig.dtype) ? 1.0 : 2.0);
    inputs[sig.name] = std::move(t);
  }
  return inputs;
}

}  // namespace opfuse
