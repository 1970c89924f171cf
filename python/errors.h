// kiln's status codes as Python exceptions (kiln.KilnError and one subclass per code).
#ifndef KILN_PYTHON_ERRORS_H_
#define KILN_PYTHON_ERRORS_H_

#include <pybind11/pybind11.h>

#include <utility>

#include "base/status.h"

namespace kiln::python {

namespace py = pybind11;

/// Defines kiln.KilnError (an Exception) and a subclass per StatusCode, named after it
/// (InvalidArgument, InvalidFormat, Unsupported, NotFound, OutOfRange, DeadlineExceeded,
/// ResourceExhausted, Internal, Aborted). Some also derive from the builtin a Python caller
/// would catch (InvalidArgument and InvalidFormat: ValueError; NotFound: LookupError;
/// DeadlineExceeded: TimeoutError; ResourceExhausted: MemoryError). Each class has `code`,
/// kiln's name of the code ("INVALID_ARGUMENT"). Call once, at import.
void DefineErrors(py::module_& m);

/// Raises `status` (not ok) as its exception class with kiln's message. Needs the GIL.
[[noreturn]] void Raise(const Status& status);

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Unwrap(StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return std::move(*value);
}

}  // namespace kiln::python

#endif  // KILN_PYTHON_ERRORS_H_
