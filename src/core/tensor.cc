#include "core/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace opfuse {
namespace {

std::atomic<size_t> g_max_allocation_bytes{size_t{16} << 30};
constexpr size_t kAlignment = 64;
// See ScopedMappedTensors.
constexpr size_t kMappedBytes = size_t{1} << 20;
thread_local int t_mapped_scopes = 0;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// A tensor's memory is written whole, so its pages are made present in one call rather than
// one fault each as they are first written: a first touch cost 11 us a page on the Zen 5 KVM
// guest of docs/benchmarks.md (wave 29), 6 us populated first, and a compile writes every
// weight it reads, folds or packs into fresh memory (ResNet-50's O3 compile 1.59-1.99 ->
// 1.39-1.64 s). Pages already present (memory the heap reuses) cost a page-table walk. Kernels
// older than 5.14 refuse the advice, and the pages fault in as before.
constexpr size_t kPopulatedBytes = size_t{64} << 10;
void populate(void* memory, size_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(memory) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(memory) + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

}  // namespace

void set_max_allocation_bytes(size_t bytes) { g_max_allocation_bytes = bytes; }
size_t max_allocation_bytes() { return g_max_allocation_bytes; }

ScopedMappedTensors::ScopedMappedTensors() { ++t_mapped_scopes; }
ScopedMappedTensors::~ScopedMappedTensors() { --t_mapped_scopes; }


Result<Tensor> Tensor::zeros(DType dtype, std::vector<int64_t> dims, const std::string& what) {
  OPFUSE_ASSIGN_OR_RETURN(Tensor t, uninitialized(dtype, std::move(dims), what));
  const size_t bytes = std::max<size_t>(t.nbytes(), 1);
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;  // as allocated
  if (rounded < kMappedBytes || t_mapped_scopes == 0) std::memset(t.data_, 0, rounded);  // a fresh mapping is zero
  return t;
}

Result<Tensor> Tensor::uninitialized(DType dtype, std::vector<int64_t> dims, const std::string& what) {
  if (dtype == DType::kUndefined) {
    return Status::internal_error(str_cat(what, ": cannot allocate an undefined dtype"));
  }
  OPFUSE_ASSIGN_OR_RETURN(int64_t numel, checked_numel(dims, what));
  const size_t elem = dtype_size(dtype);
  if (static_cast<uint64_t>(numel) > max_allocation_bytes() / elem) {
    return Status::user_error(str_cat(what, ": ", dtype_name(dtype), dims_to_string(dims), " needs ",
                                      static_cast<uint64_t>(numel) * elem,
                                      " bytes, above the allocation cap of ",
                                      max_allocation_bytes(), " bytes"));
  }
  const size_t bytes = std::max<size_t>(static_cast<size_t>(numel) * elem, 1);
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  const bool mapped = rounded >= kMappedBytes && t_mapped_scopes > 0;
  void* memory = mapped ? ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                        : std::aligned_alloc(kAlignment, rounded);
  if (memory == nullptr || memory == MAP_FAILED) {
    return Status::user_error(str_cat(what, ": out of memory allocating ", rounded, " bytes"));
  }
  if (rounded >= kPopulatedBytes) populate(memory, rounded);
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numel_ = numel;
  t.data_ = memory;
  if (mapped) {
    t.storage_ = std::shared_ptr<void>(memory, [rounded](void* p) { ::munmap(p, rounded); });
  } else {
    t.storage_ = std::shared_ptr<void>(memory, [](void* p) { std::free(p); });
  }
  return t;
}

Tensor Tensor::wrap(DType dtype, std::vector<int64_t> dims, void* data,
                    std::shared_ptr<void> keep_alive) {
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = numel_of(dims);
  t.dims_ = std::move(dims);
  t.data_ = data;
  t.storage_ = std::move(keep_alive);
  return t;
}

double Tensor::get_double(int64_t flat) const {
  return visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return element_to_double(data<T>()[flat]);
  });
}

int64_t Tensor::get_int(int64_t flat) const {
  return visit_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      return static_cast<int64_t>(data<T>()[flat]);
    } else {
      return static_cast<int64_t>(element_to_double(data<T>()[flat]));
    }
  });
}

void Tensor::set_double(int64_t flat, double v) {
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    data<T>()[flat] = element_from_double<T>(v);
  });
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> out(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[i] = get_int(i);
  return out;
}

std::vector<float> Tensor::to_float_vector() const {
  std::vector<float> out(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<float>(get_double(i));
  return out;
}

Tensor Tensor::clone() const {
  if (!defined()) return Tensor();
  Tensor t = zeros(dtype_, dims_).value();  // same size as an existing tensor: cannot fail
  std::memcpy(t.data_, data_, nbytes());
  return t;
}

Result<Tensor> Tensor::reshaped(std::vector<int64_t> dims) const {
  OPFUSE_ASSIGN_OR_RETURN(int64_t n, checked_numel(dims, "reshape"));
  if (n != numel_) {
    return Status::user_error(str_cat("cannot reshape ", type_string(), " to ",
                                      dims_to_string(dims), ": element counts differ"));
  }
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Result<Tensor> Tensor::cast(DType to) const {
  OPFUSE_ASSIGN_OR_RETURN(Tensor out, zeros(to, dims_, "cast"));
  visit_dtype(dtype_, [&](auto src_tag) {
    using S = decltype(src_tag);
    visit_dtype(to, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* src = data<S>();
      D* dst = out.data<D>();
      // Integer -> integer keeps 64-bit precision. (The test on S is its own `if constexpr`:
      // clang checks `src[i] != 0` for S = Half otherwise, as it does not depend on D.)
      auto via_double = [&](int64_t i) { dst[i] = element_from_double<D>(element_to_double(src[i])); };
      for (int64_t i = 0; i < numel_; ++i) {
        if constexpr (std::is_integral_v<S>) {
          if constexpr (std::is_same_v<D, bool>) {
            dst[i] = src[i] != 0;
          } else if constexpr (std::is_integral_v<D>) {
            dst[i] = static_cast<D>(src[i]);
          } else {
            via_double(i);
          }
        } else {
          via_double(i);
        }
      }
    });
  });
  return out;
}

std::string Tensor::type_string() const {
  return str_cat(dtype_name(dtype_), dims_to_string(dims_));
}

}  // namespace opfuse
