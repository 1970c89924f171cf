// numpy <-> kiln tensors for the Python module: dtype mapping, zero-copy binding, kiln.Tensor.
#ifndef KILN_PYTHON_ARRAYS_H_
#define KILN_PYTHON_ARRAYS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "base/dtype.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln::python {

namespace py = pybind11;

/// A kiln tensor held by Python (`kiln.Tensor`): what from_dlpack returns and what run accepts
/// as an input without conversion. Immutable: it only holds a reference to the storage.
struct PyTensor {
  Tensor tensor;
};

/// The numpy dtype kiln's `dtype` comes back as (bfloat16, which numpy lacks, as uint16 bits).
py::dtype NumpyDType(DType dtype);

/// An input value bound for one run: the tensor and the Python object that owns its memory
/// (the ndarray, possibly a converted copy, or the kiln.Tensor), which must stay alive while
/// the tensor is in use.
struct BoundInput {
  Tensor tensor;
  py::object owner;
  bool converted = false;  // the value was copied once (not contiguous, aligned, native, ...)
};

/// Binds `value` as the input `name` declared with `declared` dtype. A C-contiguous, aligned,
/// native-byte-order ndarray of a kiln dtype is bound in place (no copy); any other ndarray is
/// converted once, keeping its dtype; a kiln.Tensor is used as is; another object with
/// `__dlpack__` goes through from_dlpack; anything else (lists, scalars) becomes an array of
/// the declared dtype. InvalidArgument naming the input for a dtype kiln does not have or a
/// rank above kMaxRank. Needs the GIL.
StatusOr<BoundInput> BindInput(py::handle value, const std::string& name, DType declared);

/// A numpy array viewing `tensor`'s data without copying. Its base is `alias_owner` when the
/// tensor lies in memory that object owns (an output aliasing an input), else a capsule that
/// keeps the tensor (and so kiln's buffer) alive. Arrays over memory kiln did not allocate
/// (constants in the executable, inputs) are read-only so no one writes into a model's weights.
py::array ToNumpy(const Tensor& tensor, py::handle alias_owner = py::handle());

/// kiln.Tensor from an object with `__dlpack__` or a "dltensor" capsule (consumed on success),
/// zero copy. Errors are embed/dlpack's FromDLPack's, and InvalidArgument for an object that
/// is neither or a capsule already used.
StatusOr<PyTensor> FromDLPackObject(py::handle object);

/// A "dltensor" capsule exporting `tensor` (embed/dlpack's ToDLPack): the consumer renames it
/// and calls the deleter; an unconsumed capsule frees the export itself.
StatusOr<py::capsule> ToDLPackCapsule(const Tensor& tensor);

/// Defines kiln.Tensor and kiln.from_dlpack in `m`.
void DefineTensor(py::module_& m);

}  // namespace kiln::python

#endif  // KILN_PYTHON_ARRAYS_H_
