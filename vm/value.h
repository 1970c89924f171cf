// Register values of one VM context: tensors, storages and tuples as pooled objects with a
// non-atomic reference count. Internal to vm/; the public API exchanges kiln::Tensor.
#ifndef KILN_VM_VALUE_H_
#define KILN_VM_VALUE_H_

#include <cstdint>
#include <vector>

#include "base/tensor.h"

namespace kiln {
namespace internal {

enum class ObjKind : uint8_t { kTensor, kStorage, kTuple };

/// Base of every register value. Owned by one context (single-threaded): `refs` is plain.
struct Obj {
  int32_t refs = 0;
  ObjKind kind;
  Obj* next_free = nullptr;
  explicit Obj(ObjKind k) : kind(k) {}
};

struct TensorObj : Obj {
  TensorObj() : Obj(ObjKind::kTensor) {}
  Tensor tensor;
};

struct StorageObj : Obj {
  StorageObj() : Obj(ObjKind::kStorage) {}
  StorageRef storage;
};

struct TupleObj : Obj {
  TupleObj() : Obj(ObjKind::kTuple) {}
  std::vector<Obj*> fields;  // each holds a reference; capacity kept when recycled
};

/// Free lists per kind: after warm-up, creating a value allocates nothing.
class ObjPool {
 public:
  ObjPool() = default;
  ObjPool(const ObjPool&) = delete;
  ObjPool& operator=(const ObjPool&) = delete;
  ~ObjPool();

  /// Each returns an object holding one reference.
  TensorObj* NewTensor(Tensor t);
  StorageObj* NewStorage(StorageRef s);
  TupleObj* NewTuple();

  static Obj* Retain(Obj* o) {
    if (o) ++o->refs;
    return o;
  }
  void Release(Obj* o) {
    if (o && --o->refs == 0) Recycle(o);
  }

 private:
  void Recycle(Obj* o);
  template <typename T>
  T* Take(Obj*& list);

  Obj* free_tensors_ = nullptr;
  Obj* free_storages_ = nullptr;
  Obj* free_tuples_ = nullptr;
  std::vector<Obj*> all_;  // every object ever made, for destruction
};

}  // namespace internal
}  // namespace kiln

#endif  // KILN_VM_VALUE_H_
