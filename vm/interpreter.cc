// The dispatch loop: the one long function in kiln. Code has been verified at load, so
// indices are trusted here; only values (empty registers, kinds, dtypes, sizes) are checked.
#include <cstring>

#include "base/deadline.h"
#include "vm/context.h"
#include "vm/opcodes.h"

namespace kiln {

using internal::Obj;
using internal::ObjKind;
using internal::ObjPool;
using internal::StorageObj;
using internal::TensorObj;
using internal::TupleObj;

namespace {

const Tensor* AsTensor(const Obj* o) {
  return (o != nullptr && o->kind == ObjKind::kTensor) ? &static_cast<const TensorObj*>(o)->tensor
                                                       : nullptr;
}

// Reads a one-element integer tensor (the VM's scalars).
bool ReadI64Scalar(const Obj* o, int64_t* out) {
  const Tensor* t = AsTensor(o);
  if (t == nullptr || t->dtype() != DType::kI64 || t->NumElements() != 1) return false;
  *out = *t->data_as<int64_t>();
  return true;
}

// Truth value of a one-element tensor of any dtype.
bool ReadCondition(const Obj* o, bool* out) {
  const Tensor* t = AsTensor(o);
  if (t == nullptr || t->NumElements() != 1) return false;
  const void* p = t->data();
  switch (t->dtype()) {
    case DType::kBool:
    case DType::kI8:
    case DType::kU8: *out = *static_cast<const uint8_t*>(p) != 0; return true;
    case DType::kI16:
    case DType::kU16: *out = *static_cast<const uint16_t*>(p) != 0; return true;
    case DType::kF16:
    case DType::kBF16: *out = (*static_cast<const uint16_t*>(p) & 0x7fff) != 0; return true;  // -0 is false
    case DType::kI32:
    case DType::kU32: *out = *static_cast<const int32_t*>(p) != 0; return true;
    case DType::kF32: *out = *static_cast<const float*>(p) != 0.0f; return true;
    case DType::kI64:
    case DType::kU64: *out = *static_cast<const int64_t*>(p) != 0; return true;
    case DType::kF64: *out = *static_cast<const double*>(p) != 0.0; return true;
    case DType::kInvalid: return false;
  }
  return false;
}

// A shape held in an i64 rank-1 tensor.
Status ReadShape(const Obj* o, Shape* out) {
  const Tensor* t = AsTensor(o);
  if (t == nullptr || t->dtype() != DType::kI64 || t->rank() != 1) {
    return InvalidArgument("shape register does not hold an i64 rank-1 tensor");
  }
  ASSIGN_OR_RETURN(*out, Shape::Make(t->data_as<int64_t>(), static_cast<int>(t->dim(0))));
  return Status::Ok();
}

// Structs in a FlatBuffers vector are laid out in place: the code is used directly.
const fb::Instruction* CodeOf(const fb::Function* fn) {
  return reinterpret_cast<const fb::Instruction*>(fn->code()->Data());
}

std::string Reg(int32_t r) { return "r" + std::to_string(r); }

// Slot `slot` of argument `arg` of shape function `name` came out as `value` < 0: the inputs
// are too large (kShapeTooLarge) or their shapes do not fit together. Cold: off the hot loop.
Status ShapeFunctionError(const std::string& name, const Tensor* const* args, int num_inputs,
                          int arg, int64_t slot, int64_t value) {
  std::string ins;
  for (int i = 0; i < num_inputs; ++i) ins += (i ? ", " : "") + args[i]->TypeString();
  std::string where = "shape function '" + name + "' computed dim " + std::to_string(slot) +
                      " of output " + std::to_string(arg - num_inputs) + " as " +
                      std::to_string(value);
  if (value == kShapeTooLarge) {
    return InvalidArgument("the inputs (" + ins + ") are too large: a tensor computed from "
                           "their shapes would be larger than a tensor can be (" + where +
                           "); use smaller inputs");
  }
  return InvalidArgument("the shapes of the inputs (" + ins + ") do not fit together: " + where);
}

}  // namespace

#define DISPATCH(ins) switch (static_cast<Opcode>((ins).opcode()))
#define CASE(name) case Opcode::k##name:
#define NEXT() \
  {            \
    ++pc;      \
    continue;  \
  }
#define FAIL(status)                          \
  {                                           \
    executed_ += executed;                    \
    if constexpr (kProfile) flush_profile();  \
    return Fail(fn_index, pc, (status));      \
  }
// Reads the clock at most every kDeadlineStride instructions (checked at backward jumps and
// calls), and after every kernel, shape function and region call: those may be slow, and a
// kernel that stopped early because the deadline passed (base/deadline.h) left partial outputs
// that must not be used. Tight loops pay almost nothing for a deadline.
constexpr uint64_t kDeadlineStride = 256;
#define CHECK_DEADLINE()                                                                     \
  if (has_deadline_ && (called_out || executed >= next_check)) {                            \
    called_out = false;                                                                      \
    next_check = executed + kDeadlineStride;                                                 \
    if (DeadlineNow() >= deadline_) {                                                        \
      FAIL(DeadlineExceeded("deadline exceeded after " + std::to_string(executed_ + executed) + \
                            " instructions"));                                               \
    }                                                                                        \
  }

Status Context::Run(int entry, std::vector<Tensor>* outputs, Profile* profile) {
  return profile != nullptr ? RunLoop<true>(entry, outputs, profile)
                            : RunLoop<false>(entry, outputs, nullptr);
}

namespace {
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

// kProfile = false is the production loop; true times every instruction into `profile` (the
// previous instruction is recorded when the next one starts, so calls and jumps need no care).
template <bool kProfile>
Status Context::RunLoop(int entry, std::vector<Tensor>* outputs, Profile* profile) {
  const fb::Executable& exe = exe_->root();
  int fn_index = entry;
  const fb::Function* fn = exe.functions()->Get(fn_index);
  const fb::Instruction* code = CodeOf(fn);
  const int32_t* ops = fn->operands() ? fn->operands()->data() : nullptr;
  Obj** R = regs_.data() + frames_.back().base;
  int pc = 0;
  uint64_t executed = 0;
  uint64_t next_check = 0;  // deadline bookkeeping (CHECK_DEADLINE)
  bool called_out = false;

  struct Pending {
    int32_t function = -1, pc = 0, callee = -1;
    uint8_t opcode = 0;
    int64_t start_ns = 0;
  } pending;
  auto flush_profile = [&] {
    if constexpr (kProfile) {
      if (pending.function >= 0) {
        profile->Record(pending.function, pending.pc, pending.opcode, pending.callee, pending.start_ns, NowNs());
      }
      pending.function = -1;
    }
  };

  auto set = [this](Obj** regs, int32_t r, Obj* value) {
    Obj* old = regs[r];
    regs[r] = value;
    pool_.Release(old);
  };
  // Constants view the executable's bytes: mapped read-only and shared by every context, so
  // no callee may write them. The check is a range test, whatever reshapes a program made.
  const uint8_t* exe_begin = exe_->bytes();
  const uint8_t* exe_end = exe_begin + exe_->file_size();
  auto is_constant = [&](const Tensor* t) {
    auto* p = static_cast<const uint8_t*>(t->data());
    return p >= exe_begin && p < exe_end;
  };
  // Gathers list[0..n) as tensors into args_, the ones from `first_output` on to be written;
  // on failure returns the offending position.
  auto gather = [&](const int32_t* list, int n, int first_output) -> int {
    for (int j = 0; j < n; ++j) {
      const Tensor* t = AsTensor(R[list[j]]);
      if (t == nullptr || (j >= first_output && is_constant(t))) return j;
      args_[j] = t;
    }
    return -1;
  };
  auto not_tensor = [&](const int32_t* list, int j) {
    const Obj* o = R[list[j]];
    return InvalidArgument("operand " + std::to_string(j) + " (" + Reg(list[j]) + ") is " +
                           (o == nullptr              ? "empty"
                            : AsTensor(o) == nullptr ? "not a tensor"
                                                     : "a constant, which cannot be an output"));
  };

  // Enters functions[callee] with parameters R[list[0 .. params)], returning to the next
  // instruction after this pc (Ret writes the results to the registers that follow them in
  // `list`). Used by invoke, and by invoke_external for a region that runs its fallback.
  // The caller checks the call depth first (too_deep).
  auto too_deep = [&] {
    return static_cast<int>(frames_.size()) >= max_call_depth_;
  };
  auto depth_error = [&](int callee) {
    return OutOfRange("call depth exceeds " + std::to_string(max_call_depth_) + " calling '" +
                      exe.functions()->Get(callee)->name()->str() + "' (unbounded recursion?)");
  };
  auto enter = [&](int callee, const int32_t* list) -> Status {
    const fb::Function* cf = exe.functions()->Get(callee);
    uint32_t caller_base = frames_.back().base;
    uint32_t base = caller_base + fn->register_count();
    RETURN_IF_ERROR(PushFrame(callee, pc, base));  // may grow regs_
    Obj** caller = regs_.data() + caller_base;
    R = regs_.data() + base;
    uint32_t nparams = cf->params() ? cf->params()->size() : 0;
    for (uint32_t j = 0; j < nparams; ++j) R[j] = ObjPool::Retain(caller[list[j]]);
    fn_index = callee;
    fn = cf;
    code = CodeOf(fn);
    ops = fn->operands() ? fn->operands()->data() : nullptr;
    pc = 0;
    return Status::Ok();
  };

  for (;;) {
    const fb::Instruction& in = code[pc];
    ++executed;
    if constexpr (kProfile) {
      int64_t now = NowNs();
      if (pending.function >= 0) {
        profile->Record(pending.function, pending.pc, pending.opcode, pending.callee, pending.start_ns, now);
      }
      auto op = static_cast<Opcode>(in.opcode());
      bool calls = op == Opcode::kInvoke || op == Opcode::kInvokeKernel ||
                   op == Opcode::kInvokeShapeFunc || op == Opcode::kInvokeExternal;
      pending = {fn_index, pc, calls ? in.a() : -1, in.opcode(), now};
    }
    DISPATCH(in) {
      CASE(Move) {
        set(R, in.a(), ObjPool::Retain(R[in.b()]));
        NEXT();
      }
      CASE(Goto) {
        if (in.a() <= pc) CHECK_DEADLINE();
        pc = in.a();
        continue;
      }
      CASE(If) {
        bool cond;
        if (!ReadCondition(R[in.a()], &cond)) {
          FAIL(InvalidArgument("condition " + Reg(in.a()) + " is not a one-element tensor"));
        }
        int target = cond ? in.b() : in.c();
        if (target <= pc) CHECK_DEADLINE();
        pc = target;
        continue;
      }
      CASE(InvokeKernel) {
        const int32_t* list = ops + in.b();
        int n = in.c(), k = in.a();
        int nin = exe_->kernel_num_inputs(k);
        int bad = gather(list, n, nin);
        if (bad >= 0) FAIL(not_tensor(list, bad));
        const std::vector<DType>& dtypes = exe_->kernel_dtypes(k);
        for (int j = 0; j < n; ++j) {
          if (args_[j]->dtype() != dtypes[j]) {
            FAIL(InvalidArgument("kernel '" + exe.kernels()->Get(k)->name()->str() + "' operand " +
                                 std::to_string(j) + " is " + args_[j]->TypeString() + ", expected " +
                                 DTypeShortName(dtypes[j])));
          }
        }
        called_out = true;
        Status s = exe_->kernel(k)->Run(args_.data(), nin, n - nin);
        if (!s.ok()) {
          std::string kernel = "kernel '" + exe.kernels()->Get(k)->name()->str() + "'";
          FAIL(s.message().find(kernel) == std::string::npos ? s.WithContext(kernel) : s);
        }
        CHECK_DEADLINE();
        NEXT();
      }
      CASE(InvokeShapeFunc) {
        const int32_t* list = ops + in.b();
        int n = in.c();
        const fb::ShapeFunction* sf = exe.shape_functions()->Get(in.a());
        int bad = gather(list, n, static_cast<int>(sf->num_inputs()));
        if (bad >= 0) FAIL(not_tensor(list, bad));
        for (int j = static_cast<int>(sf->num_inputs()); j < n; ++j) {
          if (args_[j]->dtype() != DType::kI64 || args_[j]->rank() != 1) {
            FAIL(InvalidArgument("shape function '" + sf->name()->str() + "' output " +
                                 std::to_string(j) + " is " + args_[j]->TypeString() +
                                 ", expected i64[rank]"));
          }
        }
        called_out = true;
        Status s = exe_->shape_function(in.a())->Run(args_.data(), sf->num_inputs(), sf->num_outputs());
        if (!s.ok()) FAIL(s.WithContext("shape function '" + sf->name()->str() + "'"));
        CHECK_DEADLINE();
        // A negative dim is how shape functions report inputs whose shapes do not fit together
        // (a broadcast of 2 with 3) or are too large; name them rather than fail later on the
        // allocation.
        for (int j = static_cast<int>(sf->num_inputs()); j < n; ++j) {
          const int64_t* dims = static_cast<const int64_t*>(args_[j]->data());
          for (int64_t d = 0; d < args_[j]->dim(0); ++d) {
            if (dims[d] < 0) {
              FAIL(ShapeFunctionError(sf->name()->str(), args_.data(),
                                      static_cast<int>(sf->num_inputs()), j, d, dims[d]));
            }
          }
        }
        NEXT();
      }
      CASE(InvokeExternal) {
        const int32_t* list = ops + in.b();
        TensorFunction* vendor = exe_->external_region(in.a());
        if (vendor == nullptr) {
          // Declined or absent vendor: its fallback, called like `invoke` with this operand
          // list (its results replace the output registers; see Ret).
          int callee = exe_->external_fallback(in.a());
          if (too_deep()) FAIL(depth_error(callee));
          CHECK_DEADLINE();
          Status s = enter(callee, list);
          if (!s.ok()) FAIL(s);
          continue;
        }
        const fb::ExternalRegion* region = exe.external_regions()->Get(in.a());
        int bad = gather(list, in.c(), static_cast<int>(region->num_inputs()));
        if (bad >= 0) FAIL(not_tensor(list, bad));
        called_out = true;
        // Profiling asks the vendor for its steps; the production loop never pays for it.
        Status s = kProfile
                       ? vendor->RunProfiled(args_.data(), region->num_inputs(),
                                             region->num_outputs(), profile->ForRegion(in.a()))
                       : vendor->Run(args_.data(), region->num_inputs(), region->num_outputs());
        if (!s.ok()) {
          FAIL(s.WithContext("external region '" + region->name()->str() + "' (" +
                             region->vendor()->str() + ")"));
        }
        CHECK_DEADLINE();
        NEXT();
      }
      CASE(Invoke) {
        if (too_deep()) FAIL(depth_error(in.a()));
        CHECK_DEADLINE();
        Status s = enter(in.a(), ops + in.b());
        if (!s.ok()) FAIL(s);
        continue;
      }
      CASE(Ret) {
        results_.clear();
        for (int j = 0; j < in.b(); ++j) results_.push_back(ObjPool::Retain(R[ops[in.a() + j]]));
        for (uint32_t r = 0; r < fn->register_count(); ++r) set(R, r, nullptr);
        Frame done = frames_.back();
        PopFrame();
        if (frames_.empty()) {
          executed_ += executed;
          if constexpr (kProfile) flush_profile();
          outputs->clear();
          Status status;
          for (size_t j = 0; j < results_.size(); ++j) {
            const Tensor* t = AsTensor(results_[j]);
            if (t == nullptr && status.ok()) {
              status = Fail(fn_index, pc, Unsupported("result " + std::to_string(j) +
                                                      " is not a tensor; only tensors can be "
                                                      "returned to the caller"));
            }
            if (t != nullptr) outputs->push_back(*t);
            pool_.Release(results_[j]);
          }
          results_.clear();
          return status;
        }
        const fb::Function* callee = fn;
        fn_index = frames_.back().function;
        fn = exe.functions()->Get(fn_index);
        code = CodeOf(fn);
        ops = fn->operands() ? fn->operands()->data() : nullptr;
        R = regs_.data() + frames_.back().base;
        pc = done.caller_pc;
        const int32_t* dsts = ops + code[pc].b() + (callee->params() ? callee->params()->size() : 0);
        for (size_t j = 0; j < results_.size(); ++j) set(R, dsts[j], results_[j]);
        results_.clear();
        NEXT();
      }
      CASE(Fatal) {
        FAIL(Aborted(exe.strings()->Get(in.a())->str()));
      }
      CASE(AllocStorage) {
        int64_t bytes;
        if (!ReadI64Scalar(R[in.b()], &bytes) || bytes < 0) {
          FAIL(InvalidArgument("size " + Reg(in.b()) + " is not a non-negative i64 scalar"));
        }
        StatusOr<StorageRef> storage = allocator_->Allocate(static_cast<size_t>(bytes));
        if (!storage.ok()) FAIL(storage.status());
        set(R, in.a(), pool_.NewStorage(std::move(*storage)));
        NEXT();
      }
      CASE(AllocTensor32)
      CASE(AllocTensorReg32)
      CASE(AllocTensor)
      CASE(AllocTensorReg) {
        const Obj* so = R[in.b()];
        if (so == nullptr || so->kind != ObjKind::kStorage) {
          FAIL(InvalidArgument("storage " + Reg(in.b()) + " does not hold a storage"));
        }
        const auto op = static_cast<Opcode>(in.opcode());
        const bool wide = op == Opcode::kAllocTensor || op == Opcode::kAllocTensorReg;
        Shape shape;
        if (op == Opcode::kAllocTensor || op == Opcode::kAllocTensor32) {
          int64_t dims[kMaxRank];  // verified: rank <= kMaxRank, dims >= 0
          for (int j = 0; j < in.e(); ++j) {
            dims[j] = wide ? ReadOperand64(ops, in.d() + 2 * int64_t{j}) : ops[in.d() + j];
          }
          shape = *Shape::Make(dims, in.e());
        } else {
          Status s = ReadShape(R[in.d()], &shape);
          if (!s.ok()) FAIL(s);
        }
        const int64_t byte_offset = wide ? ReadOperand64(ops, in.c()) : in.c();
        StatusOr<Tensor> t = Tensor::View(static_cast<const StorageObj*>(so)->storage, byte_offset,
                                          static_cast<DType>(in.dtype()), shape);
        if (!t.ok()) FAIL(t.status());
        set(R, in.a(), pool_.NewTensor(std::move(*t)));
        NEXT();
      }
      CASE(AllocTuple) {
        TupleObj* tuple = pool_.NewTuple();
        for (int j = 0; j < in.c(); ++j) tuple->fields.push_back(ObjPool::Retain(R[ops[in.b() + j]]));
        set(R, in.a(), tuple);
        NEXT();
      }
      CASE(GetField) {
        const Obj* o = R[in.b()];
        if (o == nullptr || o->kind != ObjKind::kTuple) {
          FAIL(InvalidArgument(Reg(in.b()) + " does not hold a tuple"));
        }
        const auto& fields = static_cast<const TupleObj*>(o)->fields;
        if (static_cast<size_t>(in.c()) >= fields.size()) {
          FAIL(InvalidArgument("field " + std::to_string(in.c()) + " of a tuple of " +
                               std::to_string(fields.size())));
        }
        set(R, in.a(), ObjPool::Retain(fields[in.c()]));
        NEXT();
      }
      CASE(LoadConst) {
        TensorObj*& c = const_objs_[in.b()];
        if (c == nullptr) c = pool_.NewTensor(exe_->constant(in.b()));  // held by the context
        set(R, in.a(), ObjPool::Retain(c));
        NEXT();
      }
      CASE(LoadConsti) {
        StatusOr<Tensor> t = Tensor::Allocate(*allocator_, DType::kI64, Shape());
        if (!t.ok()) FAIL(t.status());
        uint64_t bits = (uint64_t{static_cast<uint32_t>(in.c())} << 32) | static_cast<uint32_t>(in.b());
        std::memcpy(t->data(), &bits, sizeof(bits));
        set(R, in.a(), pool_.NewTensor(std::move(*t)));
        NEXT();
      }
      CASE(ShapeOf) {
        const Tensor* src = AsTensor(R[in.b()]);
        if (src == nullptr) FAIL(InvalidArgument(Reg(in.b()) + " does not hold a tensor"));
        StatusOr<Tensor> t = Tensor::Allocate(*allocator_, DType::kI64, Shape{src->rank()});
        if (!t.ok()) FAIL(t.status());
        std::memcpy(t->data(), src->shape().data(), sizeof(int64_t) * src->rank());
        set(R, in.a(), pool_.NewTensor(std::move(*t)));
        NEXT();
      }
      CASE(ReshapeTensor) {
        const Tensor* src = AsTensor(R[in.b()]);
        if (src == nullptr) FAIL(InvalidArgument(Reg(in.b()) + " does not hold a tensor"));
        Shape shape;
        Status s = ReadShape(R[in.c()], &shape);
        if (!s.ok()) FAIL(s);
        StatusOr<Tensor> t = src->Reshape(shape);
        if (!t.ok()) FAIL(t.status());
        set(R, in.a(), pool_.NewTensor(std::move(*t)));
        NEXT();
      }
      CASE(KillRegister) {
        set(R, in.a(), nullptr);
        NEXT();
      }
      case Opcode::kNumOpcodes:
        break;
    }
    FAIL(Internal("unverified opcode " + std::to_string(in.opcode())));
  }
}

template Status Context::RunLoop<false>(int, std::vector<Tensor>*, Profile*);
template Status Context::RunLoop<true>(int, std::vector<Tensor>*, Profile*);

}  // namespace kiln
