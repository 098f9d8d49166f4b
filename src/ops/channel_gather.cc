// opfuse::ChannelGather: an output made of whole channels of its inputs, in any order. It is what
// a chain of Concat / Reshape / Transpose / Split / Slice ... becomes when the chain only moves
// channels (ShuffleNet's channel shuffle: Concat -> Reshape [N,g,C/g,H,W] -> Transpose(0,2,1,3,4)
// -> Reshape -> Split; passes/channel_gather.cc), so that it is one copy instead of several, and
// so that the layout pass can run it on blocked activations, where the chain's Reshapes could not.
//
//   opfuse::ChannelGather(X0, X1, ...) {sources, channels, [block]}
//     Y[n, c, ...] = X_{sources[c]}[n, channels[c], ...]      Y has len(sources) channels
//   Plain (no `block`): every X and Y are [N, C_i, d2, d3, ...], equal outside axis 1, any dtype.
//   Blocked (`block` 16 or 8, or 0 for channels-last; passes/layout.cc): f32 [N, Cb, H, W, b] in
//   the layouts of ops/layout_ops.cc, each tensor with its own Cb and b; Y's padded lanes are 0.
#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/channel_gather.h"
#include "ops/fused.h"
#include "ops/op_list.h"
#include "ops/registry.h"

namespace opfuse {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How channel c of a tensor is laid out: element (n, c, s) (s the flat position after axis 1) is
// at ((n * blocks + c / lanes) * positions + s) * lanes + c % lanes. Plain is lanes = 1.
struct ChannelLayout {
  int64_t blocks = 0, lanes = 1, positions = 1;
  int64_t channels() const { return blocks * lanes; }  // addressable channels (padded lanes too)
  int64_t offset(int64_t n, int64_t c, int64_t s) const { return ((n * blocks + c / lanes) * positions + s) * lanes + c % lanes; }
};

// The layout of a tensor of `dims`: plain [N, C, ...] or blocked [N, Cb, H, W, b].
ChannelLayout layout_of(const std::vector<int64_t>& dims, bool blocked) {
  ChannelLayout l;
  l.blocks = dims[1];
  if (blocked) {
    l.lanes = dims[4];
    l.positions = dims[2] * dims[3];
  } else {
    for (size_t i = 2; i < dims.size(); ++i) l.positions *= dims[i];
  }
  return l;
}

Status check_attrs(const AttrReader& attrs, size_t inputs, const std::string& where) {
  const std::vector<int64_t> sources = attrs.get_ints("sources");
  const std::vector<int64_t> channels = attrs.get_ints("channels");
  if (sources.empty() || sources.size() != channels.size()) {
    return Status::user_error(str_cat(where, ": 'sources' and 'channels' must be non-empty and of equal length, got ",
                                      sources.size(), " and ", channels.size()));
  }
  for (size_t c = 0; c < sources.size(); ++c) {
    if (sources[c] < 0 || sources[c] >= static_cast<int64_t>(inputs) || channels[c] < 0) {
      return Status::user_error(str_cat(where, ": output channel ", c, " reads input ", sources[c], " channel ",
                                        channels[c], ", but there are ", inputs, " inputs"));
    }
  }
  if (attrs.has("block")) {
    const int64_t b = attrs.get_int("block");
    if (b != 0 && b != 8 && b != 16) return Status::user_error(str_cat(where, ": block must be 0, 8 or 16, got ", b));
  }
  return Status::ok();
}

Status infer_channel_gather(InferContext& ctx) {
  OPFUSE_TRY(check_attrs(ctx.attrs(), ctx.num_inputs(), ctx.node().describe()));
  const std::vector<int64_t> sources = ctx.attrs().get_ints("sources");
  const std::vector<int64_t> channels = ctx.attrs().get_ints("channels");
  const bool blocked = ctx.attrs().has("block");
  const DType dtype = ctx.input_dtype(0);
  std::optional<Shape> first;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error(str_cat("input ", i, " is missing"));
    if (ctx.input_dtype(i) != dtype) {
      return ctx.error(str_cat("input ", i, " is ", dtype_name(ctx.input_dtype(i)), " but input 0 is ", dtype_name(dtype)));
    }
    if (blocked && dtype != DType::kF32 && dtype != DType::kUndefined) return ctx.error("blocked layouts are f32 only");
    const auto& s = ctx.input_shape(i);
    if (!s) continue;
    if (s->size() < 2 || (blocked && s->size() != 5)) {
      return ctx.error(str_cat("input ", i, " ", shape_to_string(*s), blocked ? " is not blocked [N,Cb,H,W,b]" : " has no channel axis"));
    }
    if (!first) {
      first = *s;
      continue;
    }
    for (size_t d = 0; d < s->size(); ++d) {
      const bool channel_dim = d == 1 || (blocked && d == 4);
      if (!channel_dim && (*s)[d].is_known() && d < first->size() && (*first)[d].is_known() && (*s)[d] != (*first)[d]) {
        return ctx.error(str_cat("input ", i, " ", shape_to_string(*s), " differs from input 0 ",
                                 shape_to_string(*first), " outside the channels"));
      }
    }
    if (s->size() != first->size()) return ctx.error(str_cat("input ", i, " has another rank than input 0"));
  }
  if (!first) {
    ctx.set_output(0, dtype, std::nullopt);
    return Status::ok();
  }
  const int64_t c = static_cast<int64_t>(sources.size());
  Shape y = *first;
  if (blocked) {
    const int64_t b = ctx.attrs().get_int("block");
    const int64_t lanes = b == 0 ? c : b;
    y[1] = Dim(ceil_div(c, lanes));
    y[4] = Dim(lanes);
  } else {
    y[1] = Dim(c);
  }
  ctx.set_output(0, dtype, std::move(y));
  return Status::ok();
}

// One block of a blocked gather's output, `to` (`positions` x `lanes`; lane l from from[l] at
// stride[l] per position, lanes past from.size() zero), when one input block gives most of its
// lanes, each at its own lane (a Concat's block of one input; not the alternating lanes of a
// shuffle): that block's positions are one run in the input and in Y, copied whole, and only the
// other lanes are patched. False, writing nothing, otherwise. Lane l is at its own lane when it
// is lane l of a block of as many lanes; from[l] - l is then where that block starts. Not
// inlined: inlined into gather(), fr_pose's shuffle gathers (which never take it) ran 10% slower.
template <typename T>
[[gnu::noinline]] bool copy_whole_block(std::span<const T* const> from, const std::vector<int64_t>& stride,
                                        const std::vector<int64_t>& channels, int64_t c0, int64_t lanes,
                                        int64_t positions, T* to) {
  const int64_t live = static_cast<int64_t>(from.size());
  auto at_own_lane = [&](int64_t l) { return stride[l] == lanes && channels[c0 + l] % lanes == l; };
  const T* whole = nullptr;
  int64_t most = 0;
  for (int64_t l = 0; l < live; ++l) {
    int64_t same = 0;
    for (int64_t k = 0; at_own_lane(l) && k < live; ++k) same += at_own_lane(k) && from[k] - k == from[l] - l;
    if (same > most) std::tie(whole, most) = std::pair(from[l] - l, same);
  }
  if (2 * most < live) return false;
  std::vector<int64_t> patched;
  for (int64_t l = 0; l < lanes; ++l) {
    if (l >= live || !at_own_lane(l) || from[l] - l != whole) patched.push_back(l);
  }
  // In chunks of positions that stay in L1 while their other lanes are patched.
  constexpr int64_t kChunk = 128;
  for (int64_t s0 = 0; s0 < positions; s0 += kChunk) {
    const int64_t s1 = std::min(positions, s0 + kChunk);
    std::memcpy(to + s0 * lanes, whole + s0 * lanes, static_cast<size_t>((s1 - s0) * lanes) * sizeof(T));
    for (int64_t s = s0; s < s1; ++s) {
      for (int64_t l : patched) to[s * lanes + l] = l < live ? from[l][s * stride[l]] : T{};
    }
  }
  return true;
}

// Copies with elements of type T (the dtype's size: the op only moves bits), item by item: a
// plane of the plain output, a block of the blocked one. Blocked outputs from this size on are
// copied on every thread; below it, one: splitting the blocks of fr_pose's gathers (up to 0.4 MB)
// over two threads measured no faster (their time goes to cache misses on the lines they draw
// from); BlazeFace's 64 x 64 x 28 padding (0.5 MB) took 36 instead of 44 us over two, but the
// gathers after it longer, the model 0.98 of its time (5 pairs).
constexpr int64_t kParallelGatherBytes = int64_t{2} << 20;
template <typename T>
void gather(std::span<const Tensor* const> inputs, Tensor& y, const std::vector<int64_t>& sources,
            const std::vector<int64_t>& channels, bool blocked) {
  const ChannelLayout out = layout_of(y.dims(), blocked);
  std::vector<ChannelLayout> in;
  std::vector<const T*> base;
  for (const Tensor* x : inputs) {
    in.push_back(layout_of(x->dims(), blocked));
    base.push_back(static_cast<const T*>(x->raw_data()));
  }
  const int64_t batch = y.dim(0), c_out = static_cast<int64_t>(sources.size()), positions = out.positions;
  T* dst = static_cast<T*>(y.raw_data());
  // Where channel c of output item n starts in its input, and that input's lane stride.
  auto source = [&](int64_t n, int64_t c) {
    const ChannelLayout& l = in[static_cast<size_t>(sources[c])];
    return std::pair<const T*, int64_t>(base[static_cast<size_t>(sources[c])] + l.offset(n, channels[c], 0), l.lanes);
  };
  if (out.lanes == 1) {
    // Plain output: each channel is a contiguous plane.
    for (int64_t item = 0; item < batch * c_out; ++item) {
      const int64_t n = item / c_out, c = item % c_out;
      const auto [from, stride] = source(n, c);
      T* to = dst + out.offset(n, c, 0);
      if (stride == 1) {
        std::memcpy(to, from, static_cast<size_t>(positions) * sizeof(T));
      } else {
        for (int64_t s = 0; s < positions; ++s) to[s] = from[s * stride];
      }
    }
    return;
  }
  // Blocked output: one block's lanes at each position, so every line written is whole. Blocks
  // over the threads when Y is large (ppocr_v4_det's 9.8 MB Concat of four 24-channel maps).
  const bool parallel = y.nbytes() >= kParallelGatherBytes;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t item = 0; item < batch * out.blocks; ++item) {
    std::vector<const T*> from(static_cast<size_t>(out.lanes));
    std::vector<int64_t> stride(static_cast<size_t>(out.lanes));
    const int64_t n = item / out.blocks, c0 = (item % out.blocks) * out.lanes, live = std::min(out.lanes, c_out - c0);
    for (int64_t l = 0; l < live; ++l) std::tie(from[l], stride[l]) = source(n, c0 + l);
    const std::span<const T* const> sources_of_lanes(from.data(), static_cast<size_t>(live));
    if (copy_whole_block(sources_of_lanes, stride, channels, c0, out.lanes, positions, dst + out.offset(n, c0, 0))) {
      continue;
    }
    // One loop over the lanes, the padded ones zero: a second loop for those is a memset call
    // per position (GCC), and fr_pose's shuffles took 5% longer with it.
    for (int64_t s = 0; s < positions; ++s) {
      T* to = dst + out.offset(n, c0, s);
      for (int64_t l = 0; l < out.lanes; ++l) to[l] = l < live ? from[l][s * stride[l]] : T{};
    }
  }
}

Status channel_gather_kernel(KernelContext& ctx) {
  OPFUSE_TRY(check_attrs(ctx.attrs(), ctx.num_inputs(), ctx.node().describe()));
  const std::vector<int64_t> sources = ctx.attrs().get_ints("sources");
  const std::vector<int64_t> channels = ctx.attrs().get_ints("channels");
  const bool blocked = ctx.attrs().has("block");
  const Tensor& x0 = ctx.input(0);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    const bool shaped = blocked ? x.rank() == 5 && x.dtype() == DType::kF32 : x.rank() >= 2;
    bool same = shaped && x.dtype() == x0.dtype() && x.rank() == x0.rank();
    for (int64_t d = 0; same && d < x.rank(); ++d) same = d == 1 || (blocked && d == 4) || x.dim(d) == x0.dim(d);
    if (!same) {
      return ctx.error(str_cat("input ", i, " ", x.type_string(), " does not match input 0 ", x0.type_string(),
                               blocked ? " as a blocked f32 [N,Cb,H,W,b]" : " outside the channels"));
    }
  }
  for (size_t c = 0; c < sources.size(); ++c) {
    const Tensor& x = ctx.input(static_cast<size_t>(sources[c]));
    if (channels[c] >= layout_of(x.dims(), blocked).channels()) {
      return ctx.error(str_cat("output channel ", c, " reads channel ", channels[c], " of input ", sources[c], " ",
                               x.type_string()));
    }
  }
  std::vector<int64_t> dims = x0.dims();
  const int64_t c = static_cast<int64_t>(sources.size());
  if (blocked) {
    const int64_t b = ctx.attrs().get_int("block");
    dims[4] = b == 0 ? c : b;
    dims[1] = ceil_div(c, dims[4]);
  } else {
    dims[1] = c;
  }
  if (dtype_size(x0.dtype()) != 1 && dtype_size(x0.dtype()) != 2 && dtype_size(x0.dtype()) != 4 &&
      dtype_size(x0.dtype()) != 8) {
    return ctx.error(str_cat("unsupported dtype ", dtype_name(x0.dtype())));
  }
  OPFUSE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x0.dtype(), dims));
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(&ctx.input(i));
  gather_channels(inputs, *y, sources, channels, blocked);
  return Status::ok();
}

}  // namespace

void gather_channels(std::span<const Tensor* const> inputs, Tensor& y, const std::vector<int64_t>& sources,
                     const std::vector<int64_t>& channels, bool blocked) {
  switch (dtype_size(y.dtype())) {
    case 1: gather<uint8_t>(inputs, y, sources, channels, blocked); break;
    case 2: gather<uint16_t>(inputs, y, sources, channels, blocked); break;
    case 4: gather<uint32_t>(inputs, y, sources, channels, blocked); break;
    case 8: gather<uint64_t>(inputs, y, sources, channels, blocked); break;
    default: break;  // the reference kernel refuses other sizes before calling
  }
}

std::vector<OpDef> channel_gather_ops() {
  OpDef d = op_record("ChannelGather", 1, std::numeric_limits<int>::max(), FusionKind::kOpaque, infer_channel_gather,
                      channel_gather_kernel, "whole channels of its inputs in any order: Y[n,c] = X_sources[c][n,channels[c]]");
  d.domain = std::string(kFusedDomain);
  d.min_opset = 1;
  d.max_opset = 1;
  d.attrs = {{"sources", AttrType::kInts, std::nullopt, true},
             {"channels", AttrType::kInts, std::nullopt, true},
             {"block", AttrType::kInt, std::nullopt, false}};
  return {std::move(d)};
}

}  // namespace opfuse
