// kiln's status codes as Python exceptions: one class per code under kiln.KilnError.
#include "python/errors.h"

#include <Python.h>

#include <string>

namespace kiln::python {
namespace {

constexpr int kNumCodes = static_cast<int>(StatusCode::kAborted) + 1;

// Owned for the life of the process (a module's exception classes are never unloaded).
PyObject* g_base = nullptr;
PyObject* g_classes[kNumCodes] = {};

struct ErrorClass {
  StatusCode code;
  const char* name;
  PyObject* builtin;  // a second base the caller may catch instead, or null
  const char* doc;
};

}  // namespace

void DefineErrors(py::module_& m) {
  const ErrorClass classes[] = {
      {StatusCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError,
       "Bad user input: an input's dtype, rank or dims, a name, an option."},
      {StatusCode::kInvalidFormat, "InvalidFormat", PyExc_ValueError,
       "A model or executable that fails verification."},
      {StatusCode::kUnsupported, "Unsupported", nullptr,
       "Valid, but not supported by this build (an op, a dtype, a format version, a vendor)."},
      {StatusCode::kNotFound, "NotFound", PyExc_LookupError,
       "A named thing does not exist (a file, a function, a vendor)."},
      {StatusCode::kOutOfRange, "OutOfRange", nullptr,
       "A bound was exceeded (call depth, tensor size, allocator cap)."},
      {StatusCode::kDeadlineExceeded, "DeadlineExceeded", PyExc_TimeoutError,
       "A run took longer than its timeout_ms."},
      {StatusCode::kResourceExhausted, "ResourceExhausted", PyExc_MemoryError, "Out of memory."},
      {StatusCode::kInternal, "Internal", nullptr,
       "A broken invariant, or a failure of a library kiln calls (LLVM, oneDNN)."},
      {StatusCode::kAborted, "Aborted", nullptr, "The model executed `fatal`."},
  };
  // Named as the package exports them (kiln.InvalidArgument), not after the extension module.
  const std::string module = "kiln";
  g_base = PyErr_NewExceptionWithDoc((module + ".KilnError").c_str(),
                                     "Base class of every error kiln raises; `code` names "
                                     "kiln's status code.",
                                     PyExc_Exception, nullptr);
  if (g_base == nullptr) throw py::error_already_set();
  m.attr("KilnError") = py::handle(g_base);
  for (const ErrorClass& c : classes) {
    py::tuple bases = c.builtin ? py::make_tuple(py::handle(g_base), py::handle(c.builtin))
                                : py::make_tuple(py::handle(g_base));
    PyObject* cls =
        PyErr_NewExceptionWithDoc((module + "." + c.name).c_str(), c.doc, bases.ptr(), nullptr);
    if (cls == nullptr) throw py::error_already_set();
    py::handle(cls).attr("code") = StatusCodeName(c.code);
    g_classes[static_cast<int>(c.code)] = cls;
    m.attr(c.name) = py::handle(cls);
  }
}

void Raise(const Status& status) {
  int code = static_cast<int>(status.code());
  PyObject* cls = code > 0 && code < kNumCodes && g_classes[code] ? g_classes[code] : g_base;
  PyErr_SetString(cls, status.message().c_str());
  throw py::error_already_set();
}

}  // namespace kiln::python
