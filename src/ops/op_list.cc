#include "ops/op_list.h"

namespace opfuse {

std::vector<OpDef> builtin_ops() {
  std::vector<OpDef> all;
  for (auto family : {elementwise_ops, nn_ops, reduction_ops, tensor_ops, resize_ops, fused_ops,
                      fused_region_ops, fused_matmul_ops,
                      fused_attention_ops, skip_layer_norm_ops,
                      layout_ops}) {
    for (OpDef& def : family()) all.push_back(std::move(def));
  }
  return all;
}

}  // namespace opfuse
