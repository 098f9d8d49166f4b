// The tensor/shape family: ops that rearrange, select or create data without arithmetic on it.
// The records live in one file per concept (see ops/tensor_helpers.h); this joins them.
#include "ops/op_list.h"
#include "ops/tensor_helpers.h"

namespace opfuse {

std::vector<OpDef> tensor_ops() {
  std::vector<OpDef> all;
  for (auto part : {tensor_shape_ops, tensor_data_ops, tensor_index_ops, tensor_join_ops,
                    tensor_mover_ops, tensor_diagonal_ops, tensor_reorder_ops,
                    tensor_scatter_ops}) {
    for (OpDef& def : part()) all.push_back(std::move(def));
  }
  return all;
}

}  // namespace opfuse
