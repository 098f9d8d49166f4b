// opfuse errors as Python exceptions. A Status keeps its message, word for word what the CLI
// prints; its kind picks the class: a user error (bad model, input or option) raises
// opfuse.InvalidArgument, which is both an opfuse.Error and a ValueError; an internal error (a
// bug in opfuse) raises opfuse.Error, a RuntimeError, as onnxruntime's exceptions are.
#pragma once

#include <pybind11/pybind11.h>

#include <stdexcept>

#include "core/status.h"

namespace opfuse::python {

// Thrown by the binding code for a failed Status; translated into the Python classes above.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(const Status& status) : std::runtime_error(status.message()), kind_(status.kind()) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Throws StatusError unless `status` is ok.
inline void throw_if_error(const Status& status) {
  if (!status.is_ok()) throw StatusError(status);
}
// The value, or throws StatusError.
template <typename T>
T value_or_throw(Result<T> result) {
  if (!result.is_ok()) throw StatusError(result.status());
  return std::move(result).value();
}
// A user error (StatusError of kind kUser) with this message.
[[noreturn]] inline void throw_user_error(std::string message) {
  throw StatusError(Status::user_error(std::move(message)));
}

// Creates opfuse.Error and opfuse.InvalidArgument in `module` (as Error and InvalidArgument)
// and registers the translation of StatusError into them.
void register_errors(pybind11::module_& module);

}  // namespace opfuse::python
