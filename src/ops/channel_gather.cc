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

// Copies with elements of type T (the dtype's size: the op only moves bits), item by item: a
// plane of the plain output, a block of the blocked one. On one thread: splitting the blocks of
// fr_pose's gathers over two threads measured no faster (their time goes to cache misses on the
// lines they draw from); BlazeFace's 64 x 64 x 28 padding took 36 instead of 44 us over two, but
// the gathers after it longer, the model 0.98 of its time (5 pairs): too little for a threshold.
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
  // Blocked output: one block's lanes at each position, so every line written is whole. Per
  // block of Y, the input block that gives the most lanes, each at its own lane (a Concat's
  // block of one input, a shuffle's runs), is copied whole (its positions are one run in the
  // input and in Y) and the other lanes are patched after.
  struct BlockCopy {
    T* to;
    const T* whole;                                  // or null: every lane is patched
    std::vector<int64_t> patched;                    // lanes the whole-block copy does not give
    std::vector<std::pair<const T*, int64_t>> from;  // per patched lane: source and stride, or null (0)
  };
  std::vector<BlockCopy> copies;
  for (int64_t item = 0; item < batch * out.blocks; ++item) {
    const int64_t n = item / out.blocks, c0 = (item % out.blocks) * out.lanes, live = std::min(out.lanes, c_out - c0);
    std::vector<std::pair<const T*, int64_t>> lane(static_cast<size_t>(out.lanes), {nullptr, 0});
    for (int64_t l = 0; l < live; ++l) lane[l] = source(n, c0 + l);
    // Lane l of a block of as many lanes: lane[l].first - l is where that block starts.
    auto at_own_lane = [&](int64_t l) {
      return l < live && lane[l].second == out.lanes && channels[c0 + l] % out.lanes == l;
    };
    BlockCopy b{dst + out.offset(n, c0, 0), nullptr, {}, {}};
    int64_t most = 0;
    for (int64_t l = 0; l < live; ++l) {
      if (!at_own_lane(l)) continue;
      int64_t same = 0;
      for (int64_t k = 0; k < live; ++k) same += at_own_lane(k) && lane[k].first - k == lane[l].first - l;
      if (same > most) std::tie(b.whole, most) = std::pair(lane[l].first - l, same);
    }
    for (int64_t l = 0; l < out.lanes; ++l) {
      if (b.whole != nullptr && at_own_lane(l) && lane[l].first - l == b.whole) continue;
      b.patched.push_back(l);
      b.from.push_back(lane[l]);
    }
    copies.push_back(std::move(b));
  }
  // In chunks of positions that stay in L1 while their other lanes are patched, lane by lane (a
  // strided copy the compiler keeps tight).
  constexpr int64_t kChunk = 128;
  for (const BlockCopy& b : copies) {
    for (int64_t s0 = 0; s0 < positions; s0 += kChunk) {
      const int64_t n = std::min(positions, s0 + kChunk) - s0;
      T* to = b.to + s0 * out.lanes;
      if (b.whole != nullptr) std::memcpy(to, b.whole + s0 * out.lanes, static_cast<size_t>(n * out.lanes) * sizeof(T));
      for (size_t i = 0; i < b.patched.size(); ++i) {
        T* lane = to + b.patched[i];
        const auto [from, stride] = b.from[i];
        if (from == nullptr) {
          for (int64_t s = 0; s < n; ++s) lane[s * out.lanes] = T{};
        } else {
          for (int64_t s = 0; s < n; ++s) lane[s * out.lanes] = from[(s0 + s) * stride];
        }
      }
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
