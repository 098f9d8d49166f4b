// A dense, row-major tensor with concrete dims. Copies share storage (cheap, like a
// shared_ptr); clone() makes a deep copy. Storage is 64-byte aligned for SIMD kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

namespace opfuse {

class Tensor {
 public:
  Tensor() = default;

  // Zero-filled tensor. Checks the element count for overflow and against the per-allocation
  // cap (set_max_allocation_bytes); the error names `what`.
  static Result<Tensor> zeros(DType dtype, std::vector<int64_t> dims,
                              const std::string& what = "tensor");
  // The same checks, without the zero fill: for buffers every element of which is written before
  // it is read (a graph mode run's outputs). Zero-filling a fresh 64 MiB output costs as much as
  // the page faults of its first write.
  static Result<Tensor> uninitialized(DType dtype, std::vector<int64_t> dims,
                                      const std::string& what = "tensor");
  // Wraps memory owned by someone else (an arena, a mapped file); `keep_alive` holds it.
  static Tensor wrap(DType dtype, std::vector<int64_t> dims, void* data,
                     std::shared_ptr<void> keep_alive);
  // A tensor holding a copy of `values`, for tests and constants built in code.
  template <typename T>
  static Tensor from_vector(std::vector<int64_t> dims, const std::vector<T>& values);
  template <typename T>
  static Tensor scalar(T value) {
    return from_vector<T>({}, {value});
  }

  bool defined() const { return dtype_ != DType::kUndefined; }
  // Whether this is the only tensor holding its storage (no copy, view or wrap of it lives).
  bool sole_owner() const { return storage_ != nullptr && storage_.use_count() == 1; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t dim(int64_t i) const { return dims_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  Shape shape() const { return make_shape(dims_); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  // Typed access; T must match dtype() (checked in debug builds by the caller's dispatch).
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }
  template <typename T>
  std::span<T> values() {
    return {data<T>(), static_cast<size_t>(numel_)};
  }
  template <typename T>
  std::span<const T> values() const {
    return {data<T>(), static_cast<size_t>(numel_)};
  }

  // Element `flat` converted to double / int64 whatever the dtype (for shape-like tensors,
  // tests and printing; not for hot loops).
  double get_double(int64_t flat) const;
  int64_t get_int(int64_t flat) const;
  void set_double(int64_t flat, double v);
  // All elements as int64 (Reshape shapes, Slice starts, axes ...).
  std::vector<int64_t> to_int_vector() const;
  std::vector<float> to_float_vector() const;

  Tensor clone() const;
  // Same storage, new dims with the same element count.
  Result<Tensor> reshaped(std::vector<int64_t> dims) const;
  // Converts to another dtype (float->int truncates toward zero, like ONNX Cast).
  Result<Tensor> cast(DType to) const;
  // "f32[2,3]".
  std::string type_string() const;

 private:
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  void* data_ = nullptr;
  std::shared_ptr<void> storage_;
};

// Cap on any single tensor allocation, in bytes (guards against hostile dims). Default 16 GiB.
void set_max_allocation_bytes(size_t bytes);
size_t max_allocation_bytes();

// While one lives, tensors of 1 MiB and more that this thread allocates are mapped from the OS
// and unmapped when freed: for weights, which a compile frees as its kernels pack them. glibc's
// malloc serves blocks of up to 32 MiB from its heap once a large one was freed, and keeps freed
// heap blocks resident (BERT-base's compile peaked 200 MB above what it kept; malloc_trim after
// it cost mobilenet_v2's runs 10-30%, later allocations faulting the trimmed pages in). Not for
// tensors allocated per run: eager ResNet-50 took 1.7x as long with its intermediates mapped.
class ScopedMappedTensors {
 public:
  ScopedMappedTensors();
  ~ScopedMappedTensors();
  ScopedMappedTensors(const ScopedMappedTensors&) = delete;
  ScopedMappedTensors& operator=(const ScopedMappedTensors&) = delete;
};

template <typename T>
Tensor Tensor::from_vector(std::vector<int64_t> dims, const std::vector<T>& values) {
  Tensor t = zeros(DTypeOf<T>::value, std::move(dims)).value();
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.numel()); ++i) {
    t.data<T>()[i] = values[i];
  }
  return t;
}

}  // namespace opfuse
