// Pooled register objects.
#include "vm/value.h"

namespace kiln {
namespace internal {

ObjPool::~ObjPool() {
  for (Obj* o : all_) {
    switch (o->kind) {
      case ObjKind::kTensor: delete static_cast<TensorObj*>(o); break;
      case ObjKind::kStorage: delete static_cast<StorageObj*>(o); break;
      case ObjKind::kTuple: delete static_cast<TupleObj*>(o); break;
    }
  }
}

template <typename T>
T* ObjPool::Take(Obj*& list) {
  T* o;
  if (list != nullptr) {
    o = static_cast<T*>(list);
    list = o->next_free;
    o->next_free = nullptr;
  } else {
    o = new T();
    all_.push_back(o);
  }
  o->refs = 1;
  return o;
}

TensorObj* ObjPool::NewTensor(Tensor t) {
  TensorObj* o = Take<TensorObj>(free_tensors_);
  o->tensor = std::move(t);
  return o;
}

StorageObj* ObjPool::NewStorage(StorageRef s) {
  StorageObj* o = Take<StorageObj>(free_storages_);
  o->storage = std::move(s);
  return o;
}

TupleObj* ObjPool::NewTuple() { return Take<TupleObj>(free_tuples_); }

void ObjPool::Recycle(Obj* o) {
  switch (o->kind) {
    case ObjKind::kTensor:
      static_cast<TensorObj*>(o)->tensor = Tensor();  // drops the storage reference
      o->next_free = free_tensors_;
      free_tensors_ = o;
      break;
    case ObjKind::kStorage:
      static_cast<StorageObj*>(o)->storage.reset();
      o->next_free = free_storages_;
      free_storages_ = o;
      break;
    case ObjKind::kTuple: {
      auto* t = static_cast<TupleObj*>(o);
      for (Obj* f : t->fields) Release(f);
      t->fields.clear();
      o->next_free = free_tuples_;
      free_tuples_ = o;
      break;
    }
  }
}

}  // namespace internal
}  // namespace kiln
