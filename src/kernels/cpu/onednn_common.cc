#include "kernels/cpu/onednn_common.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "kernels/omp_threads.h"
#include "kernels/packed_weight_cache.h"
#include "kernels/target_caps.h"
#include "ops/op_def.h"

namespace opfuse::onednn {
namespace {

constexpr size_t kAlign = 64;

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A growing, 64-byte aligned buffer owned by one thread: the scratchpad and the temporaries of
// internal reorders of every run on that thread are carved out of it.
class ThreadScratch {
 public:
  ~ThreadScratch() { std::free(data_); }
  void* reserve(size_t bytes) {
    if (bytes > size_) {
      std::free(data_);
      size_ = round_up(bytes);
      data_ = std::aligned_alloc(kAlign, size_);
      if (data_ == nullptr) size_ = 0;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, cpu_engine(), const_cast<void*>(data));
}

}  // namespace

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine = [] {
    apply_target_caps();  // oneDNN takes its ISA cap only before it first dispatches
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

std::optional<Dims> static_f32_dims(const Value* value) {
  if (value == nullptr || value->dtype != DType::kF32 || !value->shape) return std::nullopt;
  return static_dims(*value->shape);
}

Dims row_major_strides(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

dnnl::memory::desc plain_desc(const Dims& dims) {
  return strided_desc(dims, row_major_strides(dims));
}

dnnl::memory::desc strided_desc(const Dims& dims, const Dims& strides) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc any_desc(const Dims& dims) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

dnnl::memory pack(const dnnl::memory::desc& from, const void* data, const dnnl::memory::desc& to) {
  // The two layouts as they are stored: equal bytes are equal layouts (descriptors that differ
  // only in unused bytes would just be packed twice).
  std::string how("onednn.reorder ");
  how.append(reinterpret_cast<const char*>(&from.data), sizeof(from.data));
  how.append(reinterpret_cast<const char*>(&to.data), sizeof(to.data));
  // A dnnl::memory is a counted handle: the copy returned shares the packed buffer.
  return *packed_once<dnnl::memory>(data, from.get_size(), how, [&] {
    dnnl::memory src = wrap(from, data);
    dnnl::memory dst(to, cpu_engine());  // owns its buffer
    dnnl::reorder(src, dst).execute(thread_stream(), src, dst);
    thread_stream().wait();
    return std::make_shared<const dnnl::memory>(dst);
  });
}

WeightScale make_weight_scale(const dnnl::memory::desc& user_md, const dnnl::memory::desc& packed_md,
                              const Dims& onnx_w_dims, int64_t group, int input, Dims s_dims) {
  const int64_t m = onnx_w_dims[0], per_group = onnx_w_dims[1];
  int64_t taps = 1;
  for (size_t i = 2; i < onnx_w_dims.size(); ++i) taps *= onnx_w_dims[i];
  // Channel numbers from 1, so the zero padding a packed layout adds reads as "no channel".
  std::vector<float> numbers(static_cast<size_t>(m * per_group * taps));
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t j = 0; j < per_group; ++j) {
      const float channel = static_cast<float>((o / (m / group)) * per_group + j + 1);
      std::fill_n(numbers.begin() + (o * per_group + j) * taps, taps, channel);
    }
  }
  const dnnl::memory packed = pack(user_md, numbers.data(), packed_md);
  const float* p = static_cast<const float*>(packed.get_data_handle());
  const int64_t count = static_cast<int64_t>(packed_md.get_size() / sizeof(float));
  WeightScale ws{input, std::move(s_dims), group * per_group, {}, {}};
  for (int64_t i = 0; i < count;) {
    const int32_t c = static_cast<int32_t>(p[i]) - 1;
    const int32_t next = i + 1 < count ? static_cast<int32_t>(p[i + 1]) - 1 : c;
    const int32_t step = c >= 0 && next == c + 1 ? 1 : 0;
    int64_t n = 1;
    while (i + n < count && static_cast<int32_t>(p[i + n]) - 1 == (step ? c + n : c)) ++n;
    ws.starts.push_back(i);
    ws.segments.push_back({c, step, n});
    i += n;
  }
  ws.starts.push_back(count);
  return ws;
}

namespace {

// Above this many weights the scale is split between the kernel's threads. The weights come from
// L3 (the rest of the model evicted them) while the other thread waits for the primitive
// anyway: on one thread MobileNetV3-Large's five scaled convs (150K floats, 9400 segments)
// spent ~65 us per run here, 2.4% of the model (Zen 5, perf).
constexpr int64_t kParallelScaleFloats = int64_t{1} << 14;

void scale_weights(const WeightScale& ws, const float* s, const float* src, float* dst) {
  const int64_t total = ws.starts.back();
  const int threads = total >= kParallelScaleFloats ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    // The segments starting in this thread's share of the floats.
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const auto first = std::lower_bound(ws.starts.begin(), ws.starts.end(), total * t / nt);
    const auto last = std::lower_bound(ws.starts.begin(), ws.starts.end(), total * (t + 1) / nt);
    const size_t i0 = static_cast<size_t>(first - ws.starts.begin());
    const size_t n = static_cast<size_t>(last - first);
    const int64_t at = ws.starts[i0];
    if (n > 0) hwy_cpu::scale_channel_segments(std::span(ws.segments).subspan(i0, n), s, src + at, dst + at);
  }
}

}  // namespace

dnnl::primitive_attr make_attr(const dnnl::post_ops& ops) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(ops);
  return attr;
}

void add_layout_reorders(PrimitivePlan& plan, const dnnl::memory::desc& plain_src,
                         const dnnl::memory::desc& pd_src, const dnnl::memory::desc& plain_dst,
                         const dnnl::memory::desc& pd_dst) {
  auto make = [](const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                 const dnnl::memory::desc& temp) {
    dnnl::reorder::primitive_desc pd(cpu_engine(), from, cpu_engine(), to, make_attr());
    return InternalReorder{dnnl::reorder(pd), temp, pd.scratchpad_desc()};
  };
  if (pd_src != plain_src) plan.src_reorder = make(plain_src, pd_src, pd_src);
  if (pd_dst != plain_dst) plan.dst_reorder = make(pd_dst, plain_dst, pd_dst);
}

// Below this many FLOPs per vector byte of the target, an op runs on one thread: measured on
// Zen 5 (AVX-512, 2 cores) over the convs of fr_landmark/fr_eye/fr_gender/ppocr_cls/MobileNetV2
// at 1 and 2 threads, waking the second thread costs ~5 us, so convs under 2 MFLOP were 1.2-6x
// faster on one thread and two threads won from ~4 MFLOP (~20 us on one core). The crossover is
// a time, so it scales with the per-core FLOP rate: half the FLOPs on 32-byte vectors.
constexpr double kSerialFlopsPerVectorByte = 3e6 / 64;
// FLOPs undercount ops that do little arithmetic per byte: a depthwise conv does ~18 FLOPs per
// element it reads and runs at memory speed, so a 14x14x384 one (1.4 MFLOP) takes ~30 us on one
// core. Above this many bytes of input and output an op runs on every thread whatever its FLOPs:
// on a Xeon (2 threads) MobileNetV2's depthwise convs took 1.3-1.6x ORT's time on one thread.
constexpr double kSerialBytes = 256 * 1024;
// Those two crossovers are the Zen 5 guests' cores, 430-500 ns apart (across CCDs): the second
// core pulls its half of the input and the weights from the other CCD. Cores that share an L3
// (Target::near_cores) hand data over for much less: on a Zen 4 guest (76 ns apart) two threads
// took 7.5 us where one took 12 (1x1 convs of 1 MFLOP), 5.5 where one took 7.7 (a 64x16x16
// depthwise conv, 128 KB), but lost below ~3 us on one thread (each of fr_eye's convs, up to
// 0.46 MFLOP and 50 KB, ~1.5 us slower): both limits at 0.3 keep those on one thread and made
// fr_landmark 0.34 -> 0.29 ms.
constexpr double kNearCoresSerialScale = 0.3;

namespace {
// Bytes of a value of static shape (0 when the shape is not static).
double static_bytes(const Value* v) {
  if (v == nullptr || !v->shape) return 0;
  const auto dims = static_dims(*v->shape);
  if (!dims) return 0;
  double n = static_cast<double>(dtype_size(v->dtype));
  for (int64_t d : *dims) n *= static_cast<double>(d);
  return n;
}
}  // namespace

int threads_for_work(const Node& node) {
  if (node.def().flops == nullptr) return 0;
  const double flops = static_cast<double>(node.def().flops(node));
  const double bytes = static_bytes(node.input(0)) + static_bytes(node.output(0));
  const Target target = active_target();
  const double scale = target.near_cores() ? kNearCoresSerialScale : 1.0;
  return flops > 0 && flops < scale * kSerialFlopsPerVectorByte * target.vector_bytes() &&
                 bytes < scale * kSerialBytes
             ? 1
             : 0;
}

Result<std::unique_ptr<Kernel>> make_kernel(std::string_view name, const Node& node,
                                            const std::function<PrimitivePlan()>& build) {
  try {
    const int threads = threads_for_work(node);
    ScopedOmpThreads scoped(threads);
    return std::unique_ptr<Kernel>(std::make_unique<OneDnnKernel>(name, node, build(), threads));
  } catch (const dnnl::error& e) {
    return Status::internal_error(
        str_cat(node.describe(), ": oneDNN kernel ", name, " could not be created: ", e.what()));
  }
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  // "ref:any", "ref_int8:any", "gemm:ref" ...: every oneDNN reference implementation says so.
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
}

std::string OneDnnKernel::impl_info() const {
  const_dnnl_primitive_desc_t pd = nullptr;
  if (dnnl_primitive_get_primitive_desc(plan_.prim.get(), &pd) != dnnl_success) return "";
  const char* info = nullptr;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info) != dnnl_success) return "";
  return info ? info : "";
}

Status OneDnnKernel::run(std::span<const Tensor* const> inputs,
                         std::span<Tensor* const> outputs) const {
  // The primitive was built for the compile-time shapes; a buffer of any other shape would be
  // read out of bounds, so check rather than trust the memory plan.
  auto check = [&](const Tensor* t, const Dims& dims, const char* what, size_t index) -> Status {
    if (t == nullptr || t->dtype() != DType::kF32 || t->dims() != dims) {
      return Status::internal_error(str_cat(node_.describe(), ": ", name_, " was compiled for ",
                                            what, " ", index, " f32", dims_to_string(dims),
                                            " but got ", t ? t->type_string() : "nothing"));
    }
    return Status::ok();
  };
  if (outputs.empty()) return Status::internal_error(str_cat(node_.describe(), ": no output"));
  OPFUSE_TRY(check(outputs[0], plan_.dst_dims, "output", 0));
  if (plan_.accumulate_input >= 0) {
    const size_t i = static_cast<size_t>(plan_.accumulate_input);
    OPFUSE_TRY(check(i < inputs.size() ? inputs[i] : nullptr, plan_.dst_dims, "input", i));
    if (inputs[i]->raw_data() != outputs[0]->raw_data()) {
      std::memcpy(outputs[0]->raw_data(), inputs[i]->raw_data(), inputs[i]->nbytes());
    }
  }
  std::unordered_map<int, dnnl::memory> args;
  for (const Binding& b : plan_.bindings) {
    if (b.input < 0) {
      args.emplace(b.arg, b.constant);
      continue;
    }
    const size_t i = static_cast<size_t>(b.input);
    OPFUSE_TRY(check(i < inputs.size() ? inputs[i] : nullptr, b.dims, "input", i));
    args.emplace(b.arg, wrap(b.md, inputs[i]->raw_data()));
  }

  // One per-thread block holds the scratchpad and the reorder temporaries.
  // The primitive and the reorders run one after another, so they share the scratchpad.
  size_t pad_bytes = round_up(plan_.scratchpad.get_size());
  for (const auto* r : {&plan_.src_reorder, &plan_.dst_reorder}) {
    if (*r) pad_bytes = std::max(pad_bytes, round_up((*r)->scratchpad.get_size()));
  }
  const size_t src_bytes = plan_.src_reorder ? round_up(plan_.src_reorder->md.get_size()) : 0;
  const size_t dst_bytes = plan_.dst_reorder ? round_up(plan_.dst_reorder->md.get_size()) : 0;
  const size_t w_bytes = plan_.weight_scale ? round_up(args.at(DNNL_ARG_WEIGHTS).get_desc().get_size()) : 0;
  const size_t total = pad_bytes + src_bytes + dst_bytes + w_bytes;
  char* block = static_cast<char*>(thread_scratch().reserve(total));
  if (block == nullptr && total > 0) {
    return Status::user_error(str_cat(node_.describe(), ": out of memory for ", total, " scratch bytes"));
  }
  dnnl::stream& stream = thread_stream();
  ScopedOmpThreads scoped(threads_);
  if (plan_.weight_scale) {
    const WeightScale& ws = *plan_.weight_scale;
    const size_t i = static_cast<size_t>(ws.input);
    OPFUSE_TRY(check(i < inputs.size() ? inputs[i] : nullptr, ws.dims, "input", i));
    const dnnl::memory& packed = args.at(DNNL_ARG_WEIGHTS);
    float* scaled = reinterpret_cast<float*>(block + pad_bytes + src_bytes + dst_bytes);
    scale_weights(ws, inputs[i]->data<float>(), static_cast<const float*>(packed.get_data_handle()), scaled);
    args[DNNL_ARG_WEIGHTS] = wrap(packed.get_desc(), scaled);
  }
  try {
    auto with_scratchpad = [&](std::unordered_map<int, dnnl::memory> a,
                               const dnnl::memory::desc& md) {
      if (md.get_size() > 0) a.emplace(DNNL_ARG_SCRATCHPAD, wrap(md, block));
      return a;
    };
    if (plan_.scratchpad.get_size() > 0) {
      args.emplace(DNNL_ARG_SCRATCHPAD, wrap(plan_.scratchpad, block));
    }
    dnnl::memory dst = wrap(plan_.dst_md, outputs[0]->raw_data());
    if (plan_.src_reorder) {
      dnnl::memory plain = args.at(DNNL_ARG_SRC);
      dnnl::memory blocked = wrap(plan_.src_reorder->md, block + pad_bytes);
      plan_.src_reorder->prim.execute(
          stream, with_scratchpad({{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, blocked}},
                                  plan_.src_reorder->scratchpad));
      args[DNNL_ARG_SRC] = blocked;
    }
    if (plan_.dst_reorder) {
      args.emplace(DNNL_ARG_DST, wrap(plan_.dst_reorder->md, block + pad_bytes + src_bytes));
    } else {
      args.emplace(DNNL_ARG_DST, dst);
    }
    plan_.prim.execute(stream, args);
    if (plan_.dst_reorder) {
      plan_.dst_reorder->prim.execute(
          stream, with_scratchpad({{DNNL_ARG_FROM, args.at(DNNL_ARG_DST)}, {DNNL_ARG_TO, dst}},
                                  plan_.dst_reorder->scratchpad));
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    return Status::internal_error(
        str_cat(node_.describe(), ": oneDNN ", name_, " failed: ", e.what()));
  }
  return Status::ok();
}

bool OneDnnKernel::reads_input(size_t input) const {
  const auto is = [&](int i) { return i >= 0 && static_cast<size_t>(i) == input; };
  return is(plan_.accumulate_input) || (plan_.weight_scale && is(plan_.weight_scale->input)) ||
         std::any_of(plan_.bindings.begin(), plan_.bindings.end(), [&](const Binding& b) { return is(b.input); });
}

}  // namespace opfuse::onednn
