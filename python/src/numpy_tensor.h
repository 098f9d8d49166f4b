// Tensors in and out of numpy, without copying where the memory allows it.
//
// In: an array that is C-contiguous, aligned for its element type and of the input's dtype is
// wrapped in place (Tensor::wrap), the Tensor holding a reference to the array; any other
// layout is made contiguous first (one copy). A dtype other than the model's is an error: like
// onnxruntime, opfuse does not cast silently. Out: the result Tensor is moved into a capsule
// that owns it and becomes the array's base, so outputs are not copied either.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "core/tensor.h"
#include "runtime/session.h"

namespace opfuse::python {

// "tensor(float)", "tensor(int64)" ...: onnxruntime's spelling of an element type.
std::string_view onnx_type_name(DType dtype);
// numpy's dtype for it (float16 for kF16, bool for kBool).
pybind11::dtype numpy_dtype(DType dtype);

// `value` (a numpy array, or anything numpy.asarray takes) as the model input `sig`. Raises
// opfuse.InvalidArgument naming the input when it is not an array or has another dtype.
// Checking the shape is left to Session::run, which names the dim at fault.
Tensor tensor_from_numpy(pybind11::handle value, const TensorSignature& sig);

// A numpy array over the tensor's memory, owning the tensor.
pybind11::array numpy_from_tensor(Tensor tensor);

// A dict {name: array} as the inputs of `session`: known names converted as above, unknown
// names kept as undefined tensors so that Session::run reports them with the list of inputs.
TensorMap tensors_from_feeds(const pybind11::dict& feeds, const Session& session);

}  // namespace opfuse::python
