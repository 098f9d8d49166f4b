#include "ops/tensor_helpers.h"

#include <cstring>

namespace opfuse {

std::optional<std::vector<int64_t>> constant_ints(const InferContext& ctx, size_t i) {
  const Tensor* t = ctx.input_constant(i);
  if (t == nullptr || !is_integer(t->dtype())) return std::nullopt;
  return t->to_int_vector();
}

Status check_integer_input(const InferContext& ctx, size_t i, const char* what) {
  if (!ctx.has_input(i)) return Status::ok();
  const DType t = ctx.input_dtype(i);
  if (t != DType::kUndefined && !is_integer(t)) {
    return ctx.error(str_cat("input ", i, " (", what, ") must be an integer tensor, got ",
                             dtype_name(t)));
  }
  return Status::ok();
}

std::optional<int64_t> known_length(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const auto& shape = ctx.input_shape(i);
  if (!shape || shape->size() != 1 || !(*shape)[0].is_known()) return std::nullopt;
  return (*shape)[0].value();
}

std::string ints_to_string(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "]";
}

Shape unknown_shape(size_t rank) { return Shape(rank, Dim::unknown()); }

Result<std::optional<Shape>> shape_from_input(const InferContext& ctx, size_t i) {
  if (auto dims = constant_ints(ctx, i)) {
    for (int64_t d : *dims) {
      if (d < 0) return ctx.error(str_cat("negative dim in shape ", ints_to_string(*dims)));
    }
    return std::optional<Shape>(make_shape(*dims));
  }
  if (auto len = known_length(ctx, i)) return std::optional<Shape>(unknown_shape(*len));
  return std::optional<Shape>();
}

Result<std::vector<int64_t>> int_input(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (!is_integer(t.dtype())) {
    return ctx.error(str_cat("input ", i, " (", what, ") must be an integer tensor, got ",
                             t.type_string()));
  }
  return t.to_int_vector();
}

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

Dim dim_product(const Shape& shape, size_t begin, size_t end) {
  int64_t known = 1;
  const Dim* symbol = nullptr;
  int non_known = 0;
  for (size_t i = begin; i < end; ++i) {
    const Dim& d = shape[i];
    if (d.is_known()) {
      auto p = checked_mul(known, d.value());
      if (!p) return Dim::unknown();
      known = *p;
    } else {
      ++non_known;
      if (d.is_symbolic()) symbol = &d;
    }
  }
  if (non_known == 0) return Dim(known);
  if (known == 0) return Dim(0);
  if (non_known == 1 && symbol != nullptr && known == 1) return *symbol;
  return Dim::unknown();
}

std::vector<int64_t> row_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

namespace {

// Element movers instantiated per element width: the dtype does not matter, only its size.
template <typename U>
void strided_copy_typed(const U* src, const std::vector<int64_t>& dims,
                        const std::vector<int64_t>& strides, int64_t offset, U* dst) {
  const size_t rank = dims.size();
  const int64_t total = numel_of(dims);
  if (total == 0) return;
  if (rank == 0) {
    dst[0] = src[offset];
    return;
  }
  const int64_t inner = dims[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t pos = offset;
  for (int64_t done = 0; done < total; done += inner) {
    const U* s = src + pos;
    if (inner_stride == 1) {
      std::memcpy(dst, s, static_cast<size_t>(inner) * sizeof(U));
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[j] = s[j * inner_stride];
    }
    dst += inner;
    // Odometer over the outer dims, keeping `pos` in step.
    for (size_t d = rank - 1; d-- > 0;) {
      pos += strides[d];
      if (++index[d] < dims[d]) break;
      pos -= strides[d] * dims[d];
      index[d] = 0;
    }
  }
}

template <typename U>
struct MappedCopier {
  const U* src;
  const std::vector<int64_t>& dims;
  const std::vector<std::vector<int64_t>>& maps;
  const std::vector<int64_t>& strides;
  U fill;
  U* dst;

  // Fills the output block of axis `axis` onward; `base` is the source offset so far, or -1 when
  // an outer axis already landed in the padding.
  void run(size_t axis, int64_t base) {
    const int64_t n = dims[axis];
    const std::vector<int64_t>& map = maps[axis];
    if (axis + 1 == dims.size()) {
      for (int64_t o = 0; o < n; ++o) {
        *dst++ = (base < 0 || map[o] < 0) ? fill : src[base + map[o] * strides[axis]];
      }
      return;
    }
    for (int64_t o = 0; o < n; ++o) {
      run(axis + 1, (base < 0 || map[o] < 0) ? -1 : base + map[o] * strides[axis]);
    }
  }
};

template <typename U>
void mapped_copy_typed(const U* src, const std::vector<int64_t>& dims,
                       const std::vector<std::vector<int64_t>>& maps,
                       const std::vector<int64_t>& strides, const void* fill, U* dst) {
  if (numel_of(dims) == 0) return;
  U fill_value{};
  if (fill != nullptr) std::memcpy(&fill_value, fill, sizeof(U));
  if (dims.empty()) {
    dst[0] = src[0];
    return;
  }
  MappedCopier<U>{src, dims, maps, strides, fill_value, dst}.run(0, 0);
}

template <typename Fn>
void dispatch_width(size_t elem_size, Fn&& fn) {
  switch (elem_size) {
    case 1: fn(uint8_t{}); break;
    case 2: fn(uint16_t{}); break;
    case 4: fn(uint32_t{}); break;
    default: fn(uint64_t{}); break;
  }
}

}  // namespace

void strided_copy(const void* src, size_t elem_size, const std::vector<int64_t>& out_dims,
                  const std::vector<int64_t>& src_strides, int64_t src_offset, void* dst) {
  dispatch_width(elem_size, [&](auto tag) {
    using U = decltype(tag);
    strided_copy_typed(static_cast<const U*>(src), out_dims, src_strides, src_offset,
                       static_cast<U*>(dst));
  });
}

void mapped_copy(const void* src, size_t elem_size, const std::vector<int64_t>& out_dims,
                 const std::vector<std::vector<int64_t>>& maps,
                 const std::vector<int64_t>& src_strides, const void* fill, void* dst) {
  dispatch_width(elem_size, [&](auto tag) {
    using U = decltype(tag);
    mapped_copy_typed(static_cast<const U*>(src), out_dims, maps, src_strides, fill,
                      static_cast<U*>(dst));
  });
}

OpDef injective_op(std::string name, int min_inputs, int max_inputs, InferFn infer, KernelFn reference,
                   std::string summary) {
  return op_record(std::move(name), min_inputs, max_inputs, FusionKind::kInjective, infer, reference,
                   std::move(summary));
}

}  // namespace opfuse
