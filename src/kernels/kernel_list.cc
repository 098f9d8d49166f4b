// The dispatch table: every optimised kernel, in order of preference per op.
#include "kernels/cpu/depthwise_conv_kernel.h"
#include "kernels/cpu/depthwise_stages_kernel.h"
#include "kernels/cpu/direct_conv_kernel.h"
#include "kernels/cpu/gemv_kernel.h"
#include "kernels/cpu/hwy_kernels.h"
#include "kernels/cpu/integer_gemm_kernel.h"
#include "kernels/cpu/onednn_blocked.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/onednn_conv_transpose.h"
#include "kernels/cpu/onednn_fused_matmul.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/onednn_matmul.h"
#include "kernels/cpu/packed_gemm_kernel.h"
#include "kernels/cpu/quantized_conv_kernel.h"
#include "kernels/cpu/rnn_kernel.h"
#include "kernels/cpu/winograd_conv_kernel.h"
#include "kernels/cpu/onednn_pool.h"
#include "kernels/cpu/onednn_tap_regions.h"
#include "kernels/kernel.h"

namespace opfuse {

KernelImpl fused_region_kernel_impl();  // kernels/cpu/fused_region_kernel.cc
KernelImpl fused_attention_kernel_impl();  // kernels/cpu/attention_kernel.cc
KernelImpl control_flow_kernel(std::string_view op_type);  // kernels/cpu/control_flow_kernel.cc
KernelImpl plain_max_pool_kernel();  // kernels/cpu/plain_pool.cc
KernelImpl plain_avg_pool_kernel();  // kernels/cpu/plain_pool.cc
KernelImpl channel_gather_kernel();  // kernels/cpu/channel_gather_kernel.cc
namespace onednn {
KernelImpl onednn_conv_integer_kernel();  // kernels/cpu/onednn_conv_integer.cc
}

const std::vector<KernelImpl>& all_kernels() {
  static const std::vector<KernelImpl> kernels = [] {
    std::vector<KernelImpl> list = {
        // 1x1 convs over a 1x1 map (squeeze-excitation): a matrix-vector product
        // (kernels/cpu/gemv_kernel.cc).
        gemv_conv_kernel(),
        gemv_fused_conv_kernel(),
        gemv_blocked_conv_kernel(),
        // oneDNN (kernels/cpu/onednn_*.cc): anchors and pooling.
        onednn::onednn_conv_kernel(),
        onednn::onednn_fused_conv_kernel(),
        onednn::onednn_conv_transpose_kernel(),
        onednn::onednn_fused_conv_transpose_kernel(),
        // ConvInteger on int8 VNNI convolutions (weight zero points folded in by a window sum).
        onednn::onednn_conv_integer_kernel(),
        // M = 1 with constant weights (classifier heads): packed weight streaming, before
        // oneDNN's matmul (kernels/cpu/gemv_kernel.cc).
        gemv_matmul_kernel(),
        gemv_gemm_kernel(),
        gemv_fused_matmul_kernel(),
        gemv_fused_gemm_kernel(),
        packed_matmul_kernel(),
        packed_gemm_kernel(),
        packed_fused_matmul_kernel(),
        packed_fused_gemm_kernel(),
        packed_blocked_conv_kernel(),  // 1x1, before oneDNN's blocked conv
        // Dynamically quantized products: exact 16-bit multiply-adds (kernels/cpu/integer_gemm_kernel.cc).
        integer_gemm_kernel(),
        integer_gemm_sums_kernel(),
        // Dynamically quantized convolutions, likewise (kernels/cpu/quantized_conv_kernel.cc).
        quantized_conv_kernel(),
        onednn::onednn_matmul_kernel(),
        onednn::onednn_gemm_kernel(),
        onednn::onednn_fused_matmul_kernel(),
        onednn::onednn_fused_gemm_kernel(),
        // Means over whole axes (global average pooling), before oneDNN's pooling.
        hwy_cpu::global_average_pool_kernel(),
        hwy_cpu::whole_axis_average_pool_kernel(),
        onednn::onednn_max_pool_kernel(),
        // 2-D max pooling on plain NCHW where oneDNN declines (only its scalar simple_nchw, or
        // reference loops for dilated windows).
        plain_max_pool_kernel(),
        onednn::onednn_average_pool_kernel(),
        // 2-D average pooling on plain NCHW where oneDNN has only its scalar simple_nchw.
        plain_avg_pool_kernel(),
        onednn::onednn_global_average_pool_kernel(),
        onednn::onednn_global_max_pool_kernel(),
        // Region fusion's generated kernels (codegen/: FusedProgram on the Highway backend).
        fused_region_kernel_impl(),
        // Streaming attention (opfuse::FusedAttention): oneDNN sgemm tiles + online softmax.
        fused_attention_kernel_impl(),
        // If, Loop, Scan with bodies compiled like the main graph (needs the runtime's compiler).
        control_flow_kernel("If"),
        control_flow_kernel("Loop"),
        control_flow_kernel("Scan"),
        // LSTM / GRU / RNN in f32 with constant weights (kernels/cpu/rnn_kernel.cc): one GEMM for
        // every step's input projection, R packed once for the per-step product.
        rnn_lstm_kernel(),
        rnn_gru_kernel(),
        rnn_simple_kernel(),
        // opfuse::ChannelGather (channel shuffles), its copy without a zero fill first.
        channel_gather_kernel(),
        // Blocked activation layouts (O3; kernels/cpu/onednn_blocked.cc).
        // Padded dilated convs that read padding for much of their work: regions of in-range taps.
        onednn::onednn_tap_regions_kernel(),
        // 3x3 convs of stride 1 by Winograd's F(2x2, 3x3) (kernels/cpu/winograd_conv_kernel.cc);
        // spatial convs on the vector's block (kernels/cpu/direct_conv_kernel.cc), depthwise ones
        // (kernels/cpu/depthwise_conv_kernel.cc).
        winograd_conv_kernel(),
        direct_conv_kernel(),
        depthwise_conv_kernel(),
        onednn::onednn_blocked_conv_kernel(),
        // a pointwise conv with the depthwise conv after it: one oneDNN kernel, else the two apart
        onednn::onednn_blocked_conv_depthwise_kernel(),
        depthwise_stages_kernel(),
        onednn::onednn_to_blocked_kernel(),
        onednn::onednn_from_blocked_kernel(),
        onednn::onednn_reblock_kernel(),
    };
    // Highway kernels (kernels/cpu/hwy_kernels.h) last: the elementwise kernel is one entry per
    // op with a scalar expression, generated from the registry.
    for (const KernelImpl& k : hwy_kernels()) list.push_back(k);
    return list;
  }();
  return kernels;
}

}  // namespace opfuse
