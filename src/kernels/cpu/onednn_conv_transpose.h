// ConvTranspose through oneDNN's deconvolution_forward: groups, strides, dilations, pads, and
// output_padding / output_shape as resolved into the node's inferred output shape (folded into
// the end padding). Weights must be constant; they are packed once at creation.
#pragma once

#include "kernels/kernel.h"

namespace opfuse::onednn {

KernelImpl onednn_conv_transpose_kernel();  // "onednn.conv_transpose"
// opfuse::FusedConvTranspose: the epilogue as the primitive's post-ops.
KernelImpl onednn_fused_conv_transpose_kernel();  // "onednn.fused_conv_transpose"

}  // namespace opfuse::onednn
