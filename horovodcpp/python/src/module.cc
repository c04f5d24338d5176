// The module object and its error translation (extension.h).
#include <exception>

#include "python/src/extension.h"

namespace hvd::python {
namespace {

// horovod.common.exceptions.HorovodInternalError, looked up once; kept for the life of the
// process (never decref'd at exit, when Python may already be gone).
PyObject* g_internal_error = nullptr;

void translate(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const Error& e) {
    PyErr_SetString(g_internal_error != nullptr ? g_internal_error : PyExc_RuntimeError, e.what());
  }
}

}  // namespace
}  // namespace hvd::python

PYBIND11_MODULE(_horovodcpp, m) {
  namespace py = pybind11;
  m.doc() = "horovodcpp's core for the horovod Python package (use horovod.torch)";
  py::object internal = py::module_::import("horovod.common.exceptions").attr("HorovodInternalError");
  hvd::python::g_internal_error = internal.release().ptr();
  py::register_exception_translator(&hvd::python::translate);
  hvd::python::bind_basics(m);
  hvd::python::bind_process_sets(m);
  hvd::python::bind_ops(m);
  hvd::python::bind_elastic(m);
}
