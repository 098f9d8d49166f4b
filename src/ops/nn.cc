#include "ops/nn_common.h"
#include "ops/op_list.h"

namespace opfuse {

std::vector<OpDef> nn_ops() {
  std::vector<OpDef> all;
  for (auto family : {conv_ops, pool_ops, matmul_ops, batch_norm_ops}) {
    for (OpDef& def : family()) all.push_back(std::move(def));
  }
  return all;
}

}  // namespace opfuse
