#include "numpy_tensor.h"

#include <memory>
#include <vector>

#include "errors.h"

namespace opfuse::python {
namespace py = pybind11;

std::string_view onnx_type_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "tensor(float)";
    case DType::kF16: return "tensor(float16)";
    case DType::kF64: return "tensor(double)";
    case DType::kI64: return "tensor(int64)";
    case DType::kI32: return "tensor(int32)";
    case DType::kI16: return "tensor(int16)";
    case DType::kI8: return "tensor(int8)";
    case DType::kU64: return "tensor(uint64)";
    case DType::kU32: return "tensor(uint32)";
    case DType::kU16: return "tensor(uint16)";
    case DType::kU8: return "tensor(uint8)";
    case DType::kBool: return "tensor(bool)";
    case DType::kUndefined: break;
  }
  return "tensor(undefined)";
}

namespace {

std::string_view numpy_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kF64: return "float64";
    case DType::kI64: return "int64";
    case DType::kI32: return "int32";
    case DType::kI16: return "int16";
    case DType::kI8: return "int8";
    case DType::kU64: return "uint64";
    case DType::kU32: return "uint32";
    case DType::kU16: return "uint16";
    case DType::kU8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kUndefined: break;
  }
  return "";
}

// The array holding the input's memory: a reference to the Python object, released with the
// GIL held, since the last copy of a Tensor may be dropped by a thread that does not hold it
// (Session::run runs with the GIL released).
std::shared_ptr<void> keep_alive(const py::array& array) {
  return std::shared_ptr<void>(new py::object(array), [](void* object) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(object);
  });
}

}  // namespace

py::dtype numpy_dtype(DType dtype) {
  if (dtype == DType::kUndefined) throw StatusError(Status::internal_error("no numpy dtype for an undefined tensor"));
  return py::dtype::from_args(py::str(std::string(numpy_name(dtype))));
}

Tensor tensor_from_numpy(py::handle value, const TensorSignature& sig) {
  py::array array;
  if (py::isinstance<py::array>(value)) {
    array = py::reinterpret_borrow<py::array>(value);
  } else {
    // Lists and scalars, as numpy.asarray reads them; other objects are named in the error.
    try {
      array = py::module_::import("numpy").attr("asarray")(value);
    } catch (const py::error_already_set&) {
      throw_user_error(str_cat("input '", sig.name, "' must be a numpy array; given an object of type ",
                               std::string(py::str(value.get_type().attr("__name__")))));
    }
  }
  const py::dtype expected = numpy_dtype(sig.dtype);
  if (!array.dtype().equal(expected)) {
    throw_user_error(str_cat("input '", sig.name, "' has the wrong dtype: expected ", onnx_type_name(sig.dtype),
                             " (numpy ", numpy_name(sig.dtype), "), given numpy ",
                             std::string(py::str(array.dtype())), "; opfuse does not cast inputs, convert with .astype(numpy.",
                             numpy_name(sig.dtype), ")"));
  }
  const int flags = array.flags();
  const bool in_place = (flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) != 0 &&
                        (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0;
  if (!in_place) {
    // Kernels read inputs as dense row-major buffers of aligned elements: one copy that is.
    array = py::module_::import("numpy").attr("ascontiguousarray")(array);
  }
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  // The library only reads graph inputs (in-place kernels write over arena buffers, never over
  // inputs: runtime/compiled_plan.cc), so a read-only array is wrapped as it is.
  return Tensor::wrap(sig.dtype, std::move(dims), const_cast<void*>(array.data()), keep_alive(array));
}

py::array numpy_from_tensor(Tensor tensor) {
  const py::dtype dtype = numpy_dtype(tensor.dtype());
  std::vector<py::ssize_t> shape(tensor.dims().begin(), tensor.dims().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(dtype_size(tensor.dtype()));
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  void* data = tensor.raw_data();
  auto* owner = new Tensor(std::move(tensor));
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dtype, std::move(shape), std::move(strides), data, base);
}

TensorMap tensors_from_feeds(const py::dict& feeds, const Session& session) {
  TensorMap inputs;
  for (const auto& [key, value] : feeds) {
    if (!py::isinstance<py::str>(key)) {
      throw_user_error(str_cat("input names must be strings; given a key of type ",
                               std::string(py::str(key.get_type().attr("__name__")))));
    }
    const std::string name = key.cast<std::string>();
    const TensorSignature* sig = nullptr;
    for (const TensorSignature& s : session.inputs()) {
      if (s.name == name) sig = &s;
    }
    inputs[name] = sig ? tensor_from_numpy(value, *sig) : Tensor();
  }
  return inputs;
}

}  // namespace opfuse::python
