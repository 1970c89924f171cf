// numpy <-> kiln tensors: dtype mapping, zero-copy input binding and outputs, DLPack capsules.
#include "python/arrays.h"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <utility>

#include "embed/dlpack.h"
#include "python/errors.h"

namespace kiln::python {
namespace {

namespace npy = py::detail;

// kiln's dtypes and numpy's type numbers for them (numpy/ndarraytypes.h, a stable ABI).
struct DTypePair {
  DType kiln;
  int npy;
};
constexpr int kNpyLong = 7;      // int64 on LP64 Linux
constexpr int kNpyLongLong = 9;  // also 64 bits there
constexpr int kNpyULong = 8;     // uint64 on LP64 Linux
constexpr int kNpyULongLong = 10;  // also 64 bits there
constexpr DTypePair kDTypes[] = {
    {DType::kF32, 11}, {DType::kF16, 23}, {DType::kF64, 12},        {DType::kI8, 1},
    {DType::kU8, 2},   {DType::kI16, 3},  {DType::kI32, 5},         {DType::kI64, kNpyLong},
    {DType::kU16, 4},  {DType::kU32, 6},  {DType::kU64, kNpyULong}, {DType::kBool, 0},
    {DType::kBF16, 4},  // numpy has no bfloat16: its bits, as uint16
};

int NpyTypeOf(DType dtype) {
  for (const DTypePair& p : kDTypes) {
    if (p.kiln == dtype) return p.npy;
  }
  return -1;
}

// The kiln dtype of a numpy dtype, or kInvalid (complex, strings, objects, ...).
DType KilnDTypeOf(const py::dtype& dtype) {
  int npy = dtype.num();
  if (npy == kNpyLongLong && dtype.itemsize() == 8) npy = kNpyLong;
  if (npy == kNpyULongLong && dtype.itemsize() == 8) npy = kNpyULong;
  for (const DTypePair& p : kDTypes) {
    if (p.npy == npy && p.kiln != DType::kBF16) return p.kiln;  // uint16 data is not bfloat16
  }
  return DType::kInvalid;
}

bool NativeByteOrder(const py::dtype& dtype) {
  char order = dtype.byteorder();
  return order == '=' || order == '|' || order == '<';  // kiln runs on little-endian hosts
}

// A C-contiguous, aligned, native-order copy of `array` with dtype `npy_type` (numpy's
// PyArray_FromAny, the conversion np.ascontiguousarray does).
StatusOr<py::array> Convert(py::handle value, int npy_type, const std::string& name) {
  auto& api = npy::npy_api::get();
  PyObject* descr = npy_type >= 0 ? api.PyArray_DescrFromType_(npy_type) : nullptr;
  PyObject* out = api.PyArray_FromAny_(value.ptr(), descr, 0, 0,
                                       npy::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                                           npy::npy_api::NPY_ARRAY_ALIGNED_ |
                                           npy::npy_api::NPY_ARRAY_ENSUREARRAY_,
                                       nullptr);  // steals descr
  if (out == nullptr) {
    std::string why = py::error_already_set().what();
    return InvalidArgument("input '" + name + "': cannot convert the value to an array: " + why);
  }
  return py::reinterpret_steal<py::array>(out);
}

bool Bindable(const py::array& array, const py::dtype& dtype) {
  constexpr int kNeed = npy::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | npy::npy_api::NPY_ARRAY_ALIGNED_;
  return (npy::array_proxy(array.ptr())->flags & kNeed) == kNeed && NativeByteOrder(dtype);
}

// Views `array` (contiguous, aligned, native, of a kiln dtype) as a tensor, no copy.
StatusOr<Tensor> ViewArray(const py::array& array, DType dtype, const std::string& name) {
  if (array.ndim() > kMaxRank) {
    return InvalidArgument("input '" + name + "': rank " + std::to_string(array.ndim()) +
                           " exceeds kiln's maximum rank " + std::to_string(kMaxRank));
  }
  auto shape =
      Shape::Make(reinterpret_cast<const int64_t*>(array.shape()), static_cast<int>(array.ndim()));
  if (!shape.ok()) return shape.status().WithContext("input '" + name + "'");
  return Tensor::Wrap(const_cast<void*>(array.data()), dtype, *shape);
}

void DeleteTensor(void* p) { delete static_cast<Tensor*>(p); }

constexpr char kDLTensor[] = "dltensor";
constexpr char kUsedDLTensor[] = "used_dltensor";

// A "dltensor" capsule nobody consumed still owns its tensor.
void DLCapsuleDestructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kDLTensor)) return;  // consumed (renamed): not ours anymore
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kDLTensor));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

}  // namespace

py::dtype NumpyDType(DType dtype) {
  // Descriptors are immortal in practice; cache one per dtype so outputs cost no lookup.
  static PyObject* cache[kNumDTypes] = {};
  int i = static_cast<int>(dtype);
  if (cache[i] == nullptr) cache[i] = py::dtype(NpyTypeOf(dtype)).release().ptr();
  return py::reinterpret_borrow<py::dtype>(cache[i]);
}

StatusOr<BoundInput> BindInput(py::handle value, const std::string& name, DType declared) {
  BoundInput bound;
  py::array array;
  if (npy::npy_api::get().PyArray_Check_(value.ptr())) {  // the common case first
    array = py::reinterpret_borrow<py::array>(value);
  } else if (py::isinstance<PyTensor>(value)) {
    bound.tensor = value.cast<const PyTensor&>().tensor;
    bound.owner = py::reinterpret_borrow<py::object>(value);
    return bound;
  } else if (py::hasattr(value, "__dlpack__")) {
    ASSIGN_OR_RETURN(PyTensor t, FromDLPackObject(value));
    bound.tensor = std::move(t.tensor);
    bound.owner = py::cast(PyTensor{bound.tensor});
    return bound;
  } else {
    // Lists and scalars have no dtype of their own: they take the declared one.
    ASSIGN_OR_RETURN(array, Convert(value, NpyTypeOf(declared), name));
    bound.converted = true;
  }
  py::dtype array_dtype = array.dtype();
  DType dtype = KilnDTypeOf(array_dtype);
  if (dtype == DType::kInvalid) {
    return InvalidArgument(
        "input '" + name + "': numpy dtype " + std::string(py::str(array_dtype)) +
        " has no kiln equivalent (the model declares " + DTypeName(declared) + ")");
  }
  if (!Bindable(array, array_dtype)) {
    ASSIGN_OR_RETURN(array, Convert(array, NpyTypeOf(dtype), name));
    bound.converted = true;
  }
  ASSIGN_OR_RETURN(bound.tensor, ViewArray(array, dtype, name));
  bound.owner = std::move(array);
  return bound;
}

py::array ToNumpy(const Tensor& tensor, py::handle alias_owner) {
  // numpy's C API directly: pybind11's array constructor copies shape and strides into
  // vectors, which is most of an output's cost at small sizes.
  py::ssize_t shape[kMaxRank];
  py::ssize_t strides[kMaxRank];
  const auto itemsize = static_cast<py::ssize_t>(DTypeSize(tensor.dtype()));
  for (int i = 0; i < tensor.rank(); ++i) {
    shape[i] = tensor.dim(i);
    strides[i] = tensor.stride(i) * itemsize;
  }
  // Kiln's pooled buffers are the caller's to write; memory kiln did not allocate is not.
  const int flags = tensor.storage()->pooled() ? npy::npy_api::NPY_ARRAY_WRITEABLE_ : 0;
  auto& api = npy::npy_api::get();
  auto array = py::reinterpret_steal<py::array>(
      api.PyArray_NewFromDescr_(api.PyArray_Type_, NumpyDType(tensor.dtype()).release().ptr(),
                                tensor.rank(), shape, strides, tensor.data(), flags, nullptr));
  if (!array) throw py::error_already_set();
  py::object base = alias_owner ? py::reinterpret_borrow<py::object>(alias_owner)
                                : py::capsule(new Tensor(tensor), &DeleteTensor);
  if (api.PyArray_SetBaseObject_(array.ptr(), base.release().ptr()) != 0) {
    throw py::error_already_set();
  }
  return array;
}

StatusOr<PyTensor> FromDLPackObject(py::handle object) {
  py::object capsule;
  if (PyCapsule_CheckExact(object.ptr())) {
    capsule = py::reinterpret_borrow<py::object>(object);
  } else if (py::hasattr(object, "__dlpack__")) {
    capsule = object.attr("__dlpack__")();
  } else {
    return InvalidArgument("from_dlpack: a " + std::string(py::str(object.get_type())) +
                           " has no __dlpack__ and is not a DLPack capsule");
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kDLTensor)) {
    return InvalidArgument(
        "from_dlpack: not an unused \"dltensor\" capsule (a DLPack capsule "
        "can be consumed only once)");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kDLTensor));
  ASSIGN_OR_RETURN(Tensor tensor, FromDLPack(managed));
  // kiln owns it now; the renamed capsule's destructor leaves it alone.
  PyCapsule_SetName(capsule.ptr(), kUsedDLTensor);
  return PyTensor{std::move(tensor)};
}

StatusOr<py::capsule> ToDLPackCapsule(const Tensor& tensor) {
  ASSIGN_OR_RETURN(DLManagedTensor * managed, ToDLPack(tensor));
  PyObject* capsule = PyCapsule_New(managed, kDLTensor, &DLCapsuleDestructor);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

void DefineTensor(py::module_& m) {
  py::class_<PyTensor>(m, "Tensor",
                       "A kiln tensor: kiln-owned memory, or memory borrowed through DLPack. "
                       "Pass it to InferenceSession.run as an input (no copy), view it with "
                       "numpy() or numpy.asarray, or hand it to another framework through "
                       "__dlpack__ (numpy.from_dlpack, torch.from_dlpack).")
      .def_property_readonly("shape",
                             [](const PyTensor& t) {
                               py::tuple shape(t.tensor.rank());
                               for (int i = 0; i < t.tensor.rank(); ++i) shape[i] = t.tensor.dim(i);
                               return shape;
                             })
      .def_property_readonly("dtype",
                             [](const PyTensor& t) { return NumpyDType(t.tensor.dtype()); })
      .def(
          "numpy", [](const PyTensor& t) { return ToNumpy(t.tensor); },
          "A numpy array over the same memory (no copy); it keeps the tensor alive.")
      .def(
          "__array__",
          [](const PyTensor& t, py::object dtype) {
            py::array a = ToNumpy(t.tensor);
            return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none())
      .def(
          "__dlpack__",
          [](const PyTensor& t, py::object stream) { return Unwrap(ToDLPackCapsule(t.tensor)); },
          py::arg("stream") = py::none(),
          "A \"dltensor\" capsule sharing this tensor's memory (CPU, row-major).")
      .def(
          "__dlpack_device__", [](const PyTensor&) { return py::make_tuple(1, 0); },
          "(kDLCPU, 0): kiln tensors live in host memory.")
      .def("__repr__",
           [](const PyTensor& t) { return "kiln.Tensor(" + t.tensor.TypeString() + ")"; });
  m.def(
      "from_dlpack", [](py::object object) { return Unwrap(FromDLPackObject(object)); },
      py::arg("x"),
      "A kiln.Tensor sharing the memory of `x` (anything with __dlpack__, e.g. a numpy array "
      "or a torch CPU tensor, or a \"dltensor\" capsule), no copy. The producer's memory stays "
      "alive as long as kiln refers to it. Only CPU, row-major contiguous tensors of kiln's "
      "dtypes are accepted (InvalidArgument / Unsupported otherwise).");
}

}  // namespace kiln::python
