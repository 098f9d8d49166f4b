#include "errors.h"

namespace opfuse::python {
namespace py = pybind11;

void register_errors(py::module_& module) {
  // Made with the C API rather than py::exception<> because InvalidArgument has two bases:
  // code catching ValueError (Python's convention for a bad argument) and code catching
  // opfuse.Error (everything opfuse raises) both see it.
  PyObject* error = PyErr_NewExceptionWithDoc(
      "opfuse.Error", "An opfuse error; the message names the file, node, input or option at fault.",
      PyExc_RuntimeError, nullptr);
  if (error == nullptr) throw py::error_already_set();
  py::object error_class = py::reinterpret_steal<py::object>(error);
  py::tuple bases = py::make_tuple(error_class, py::reinterpret_borrow<py::object>(PyExc_ValueError));
  PyObject* invalid = PyErr_NewExceptionWithDoc(
      "opfuse.InvalidArgument", "A user error: a bad model, input or option (the CLI's exit code 1).",
      bases.ptr(), nullptr);
  if (invalid == nullptr) throw py::error_already_set();
  py::object invalid_class = py::reinterpret_steal<py::object>(invalid);
  module.attr("Error") = error_class;
  module.attr("InvalidArgument") = invalid_class;

  // The translator outlives this function; the module keeps both classes alive, so borrowed
  // pointers are safe for the interpreter's lifetime.
  static PyObject* error_type = error_class.ptr();
  static PyObject* invalid_type = invalid_class.ptr();
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const StatusError& e) {
      PyErr_SetString(e.kind() == ErrorKind::kUser ? invalid_type : error_type, e.what());
    }
  });
}

}  // namespace opfuse::python
