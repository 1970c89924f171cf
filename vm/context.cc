// Context setup, input checking and frame management; the dispatch loop is in interpreter.cc.
#include "vm/context.h"

#include <algorithm>
#include <utility>

#include "base/deadline.h"
#include "base/epoch.h"
#include "vm/opcodes.h"

namespace kiln {

Allocator& DefaultAllocator() {
  static Allocator* allocator = new Allocator();  // never destroyed: outlives static tensors
  return *allocator;
}

Context::Context(std::shared_ptr<const Executable> exe, const ContextOptions& options)
    : exe_(std::move(exe)),
      allocator_(options.allocator ? options.allocator : &DefaultAllocator()),
      max_call_depth_(options.max_call_depth > 0 ? options.max_call_depth : 1) {
  regs_.assign(exe_->max_registers(), nullptr);
  frames_.reserve(16);
  args_.assign(exe_->max_list_length() + 1, nullptr);
  results_.reserve(exe_->max_list_length() + 1);
  const_objs_.assign(exe_->num_constants(), nullptr);
}

Context::~Context() {
  ClearRegisters();
  for (internal::TensorObj* c : const_objs_) pool_.Release(c);
}

StatusOr<std::unique_ptr<Context>> Context::Create(std::shared_ptr<const Executable> exe,
                                                   const ContextOptions& options) {
  if (exe == nullptr) return InvalidArgument("Context::Create: null executable");
  if (!exe->bound()) {
    return InvalidArgument("the executable was loaded for inspection only (LoadOptions::bind = "
                           "false) and cannot run");
  }
  return std::unique_ptr<Context>(new Context(std::move(exe), options));
}

StatusOr<std::vector<Tensor>> Context::Invoke(std::string_view function,
                                              const std::vector<Tensor>& inputs,
                                              const InvokeOptions& options) {
  int index = exe_->FindFunction(function);
  if (index < 0) return NotFound("no function named '" + std::string(function) + "'");
  return Invoke(index, inputs, options);
}

StatusOr<std::vector<Tensor>> Context::Invoke(int function, const std::vector<Tensor>& inputs,
                                              const InvokeOptions& options) {
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(Invoke(function, inputs, &outputs, options));
  return outputs;
}

Status Context::Invoke(int function, const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
                       const InvokeOptions& options) {
  if (outputs == nullptr) return InvalidArgument("Invoke: null outputs");
  if (function < 0 || function >= exe_->num_functions()) {
    return NotFound("no function with index " + std::to_string(function));
  }
  RETURN_IF_ERROR(CheckInputs(function, inputs));
  deadline_ = options.deadline;
  if (options.timeout.count() > 0) {
    deadline_ = std::min(deadline_, DeadlineNow() + options.timeout);
  }
  has_deadline_ = deadline_ != std::chrono::steady_clock::time_point::max();
  executed_ = 0;
  frames_.clear();
  RETURN_IF_ERROR(PushFrame(function, -1, 0));
  for (size_t i = 0; i < inputs.size(); ++i) regs_[i] = pool_.NewTensor(inputs[i]);
  // One guard for the run: kernel calls nest theirs in it for free (base/epoch.h).
  EpochGuard guard;
  // Kernels and regions see the deadline too and stop between chunks (base/deadline.h).
  ScopedDeadline scoped_deadline(deadline_);
  Status status = Run(function, outputs, options.profile);
  if (!status.ok()) {
    ClearRegisters();  // an error can leave values in any frame
    frames_.clear();
    outputs->clear();
  }
  return status;
}

Status Context::CheckInputs(int function, const std::vector<Tensor>& inputs) {
  const FunctionSignature& sig = exe_->signature(function);
  if (inputs.size() != sig.params.size()) {
    return InvalidArgument("'" + sig.name + "' takes " + std::to_string(sig.params.size()) +
                           " inputs, got " + std::to_string(inputs.size()));
  }
  // Value and binding input of each symbol, in reused scratch (no allocation per request).
  sym_value_.assign(sig.symbols.size(), -1);
  sym_input_.assign(sig.symbols.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueSpec& spec = sig.params[i];
    const Tensor& t = inputs[i];
    auto where = [&] {  // built only on error: the success path allocates nothing
      return "input " + std::to_string(i) + (spec.name.empty() ? "" : " '" + spec.name + "'");
    };
    if (t.empty()) return InvalidArgument(where() + ": empty tensor");
    if (spec.is_tuple) return InvalidArgument(where() + ": tuple parameters cannot be passed from the API");
    if (t.dtype() != spec.dtype) {
      return InvalidArgument(where() + ": dtype " + DTypeShortName(t.dtype()) + ", expected " +
                             DTypeShortName(spec.dtype));
    }
    if (spec.dtype_only) continue;  // nothing reads its dims or its elements
    if (t.rank() != static_cast<int>(spec.shape.size())) {
      return InvalidArgument(where() + ": rank " + std::to_string(t.rank()) + " (shape " +
                             t.shape().ToString() + "), expected " + spec.ToString());
    }
    if (!t.IsContiguous()) return InvalidArgument(where() + ": must be contiguous");
    for (int d = 0; d < t.rank(); ++d) {
      const DimSpec& ds = spec.shape[d];
      if (ds.fixed() && t.dim(d) != ds.value) {
        return InvalidArgument(where() + ": dim " + std::to_string(d) + " is " + std::to_string(t.dim(d)) +
                               ", expected " + std::to_string(ds.value) + " (" + spec.ToString() + ")");
      }
      if (ds.symbol_id < 0) continue;
      int64_t& bound = sym_value_[ds.symbol_id];
      if (bound < 0) {
        bound = t.dim(d);
        sym_input_[ds.symbol_id] = i;
      } else if (bound != t.dim(d)) {
        return InvalidArgument(where() + ": dim " + std::to_string(d) + " ('" + ds.symbol + "') is " +
                               std::to_string(t.dim(d)) + " but input " +
                               std::to_string(sym_input_[ds.symbol_id]) + " set '" + ds.symbol +
                               "' = " + std::to_string(bound));
      }
    }
  }
  return Status::Ok();
}

Status Context::PushFrame(int function, int caller_pc, uint32_t base) {
  uint64_t need = uint64_t{base} + exe_->root().functions()->Get(function)->register_count();
  if (need > regs_.size()) {
    if (need > (1u << 26)) return ResourceExhausted("register stack exceeds 2^26 registers");
    regs_.resize(need, nullptr);  // grows only when a deeper call than ever before is made
  }
  frames_.push_back(Frame{function, caller_pc, base});
  return Status::Ok();
}

void Context::PopFrame() { frames_.pop_back(); }

void Context::ClearRegisters() {
  for (Obj*& r : regs_) {
    pool_.Release(r);
    r = nullptr;
  }
}

Status Context::Fail(int function, int pc, const Status& error) const {
  const fb::Function* fn = exe_->root().functions()->Get(function);
  const fb::Instruction* in = fn->code()->Get(pc);
  std::string where = "in '" + fn->name()->str() + "' at pc " + std::to_string(pc) + " (" +
                      GetOpcodeInfo(static_cast<Opcode>(in->opcode())).mnemonic;
  std::string_view node = exe_->SourceNode(function, pc);
  if (!node.empty()) where += ", node '" + std::string(node) + "'";
  return error.WithContext(where + ")");
}

}  // namespace kiln
