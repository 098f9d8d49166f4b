// opfuse::FusedAttention: softmax(scale * Q K^T + mask) V per (batch, head), written by
// patterns/attention.cc, run by kernels/cpu/attention_kernel.cc (the reference in
// ops/fused_attention.cc is the oracle).
//
//   opfuse::FusedAttention(Q, K, V, [mask]) {num_heads, scale, q_layout, k_layout, v_layout, out_layout}
//
// Each operand is a tensor whose axes are named by its layout string, a sequence of the letters
//   B (batch, optional: absent means 1), H (head), S (sequence), D (head dim),
// each at most once, H, S and D required, and where "(HD)" as the LAST group is one tensor axis
// of size H*D (the projection layout the Q/K/V MatMuls produce, before the head split):
//   "BS(HD)"  [B, S, H*D]   BERT's projections (the head Reshape/Transpose absorbed)
//   "BHSD"    [B, H, S, D]  heads already split
//   "BHDS"    [B, H, D, S]  K already transposed (what MatMul(Q, K^T) reads)
//   "HSD"     [H, S, D]     a batched MatMul over merged batch*heads (torch MultiheadAttention)
// The layouts are only strides: no operand is ever copied into another layout. Q's S is the
// query length Sq, K's and V's the key length Sk; Q and K share D, V's D is the output's.
// The mask (optional, f32) broadcasts (numpy, right-aligned) to the scores [B, H, Sq, Sk] (or
// [H, Sq, Sk] when the layouts have no B). The output's layout is `out_layout` with S = Sq, D = V's D.
// Every layout has B, or none has.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace opfuse {

// One operand's layout, parsed.
struct AttentionLayout {
  std::string letters;      // the axes' letters in order, "(HD)" expanded: "BSHD"
  bool merged_hd = false;   // the last two letters are "HD" and form one tensor axis
  int rank() const { return static_cast<int>(letters.size()) - (merged_hd ? 1 : 0); }
  bool has_batch() const { return letters.find('B') != std::string::npos; }
  std::string to_string() const;
};

// "BS(HD)" -> {"BSHD", merged}; an error says what is wrong with the text.
Result<AttentionLayout> parse_attention_layout(std::string_view text);

// The sizes of one attention, resolved from the operands' dims.
struct AttentionDims {
  int64_t batch = 1, heads = 1, q_len = 0, kv_len = 0, head_dim = 0, v_head_dim = 0;
};

// Element strides of one operand's logical axes (b, h, s, d); 0 for an absent B.
struct AttentionStrides {
  int64_t b = 0, h = 0, s = 0, d = 0;
};

// The fully parsed attributes of one FusedAttention node and its concrete sizes.
struct AttentionGeometry {
  AttentionDims dims;
  AttentionStrides q, k, v, out;
  // The mask's strides over the scores' axes (b, h, i, j), 0 where it broadcasts; all 0 and
  // has_mask false when there is none.
  std::array<int64_t, 4> mask = {0, 0, 0, 0};
  bool has_mask = false;
  float scale = 1.0f;
  std::vector<int64_t> out_dims;
};

// Layout strings and num_heads as attributes say them (the reference, the kernel and the
// pattern all go through this).
struct AttentionAttrs {
  int64_t num_heads = 1;
  float scale = 1.0f;
  std::string q_layout, k_layout, v_layout, out_layout;
};

class AttrReader;
AttentionAttrs read_attention_attrs(const AttrReader& attrs);

// Resolves sizes and strides from concrete dims; errors name the operand and its dims.
// `mask_dims` null when there is no mask.
Result<AttentionGeometry> attention_geometry(const AttentionAttrs& attrs,
                                             const std::vector<int64_t>& q_dims,
                                             const std::vector<int64_t>& k_dims,
                                             const std::vector<int64_t>& v_dims,
                                             const std::vector<int64_t>* mask_dims);

// The dims of the tensor with this layout for the given sizes (S and D of that operand).
std::vector<int64_t> attention_operand_dims(const AttentionLayout& layout, int64_t batch,
                                            int64_t heads, int64_t seq, int64_t head_dim);

}  // namespace opfuse
