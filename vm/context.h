// Context: one VM execution state (registers, frames, scratch) over a shared Executable.
#ifndef KILN_VM_CONTEXT_H_
#define KILN_VM_CONTEXT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/allocator.h"
#include "vm/executable.h"
#include "vm/profile.h"
#include "base/status.h"
#include "base/tensor.h"
#include "vm/value.h"

namespace kiln {

/// The process-wide allocator contexts use unless given one (1 GiB cache cap). Never destroyed.
Allocator& DefaultAllocator();

struct ContextOptions {
  /// Where intermediate and output tensors come from; must outlive the context and every tensor
  /// it returns. Null: DefaultAllocator().
  Allocator* allocator = nullptr;
  /// Deepest call nesting allowed (entry function = depth 1); deeper is OutOfRange.
  int max_call_depth = 256;
};

struct InvokeOptions {
  /// Stop with DeadlineExceeded once this passes. Checked after every kernel, shape function
  /// and external region call, at VM calls and backward jumps (and so loops), not at every
  /// instruction; JIT kernels' parallel loops also stop between pieces once it has passed
  /// (jit/runtime.h), so a deadline fires within about one piece of a long kernel.
  /// time_point::max() (the default): no deadline.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Convenience: deadline = now + timeout if timeout > 0 (takes the earlier of the two).
  std::chrono::milliseconds timeout{0};
  /// If set, every executed instruction is timed into it (a separate instantiation of the
  /// dispatch loop: no cost when null). Owned by the caller.
  Profile* profile = nullptr;
};

/// Runs functions of one Executable. Cheap to create (one per thread or request); not
/// thread-safe itself, but any number of contexts may run the same Executable at once.
/// Keeps the executable alive. Steady-state invocations reuse registers, frames and objects,
/// so the dispatch loop allocates nothing per instruction.
class Context {
 public:
  /// InvalidArgument if `exe` is null or was loaded without binding (LoadOptions::bind).
  static StatusOr<std::unique_ptr<Context>> Create(std::shared_ptr<const Executable> exe,
                                                   const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// Runs `function` on `inputs` and returns its results. Inputs are checked against the
  /// declared parameters first: count, dtype, rank, fixed dims, and symbolic dims that must
  /// agree across inputs (InvalidArgument naming the input). Run-time errors name the
  /// function, pc and source node. Inputs are used in place (no copy); outputs may share
  /// storage with inputs or constants.
  StatusOr<std::vector<Tensor>> Invoke(std::string_view function, const std::vector<Tensor>& inputs,
                                       const InvokeOptions& options = {});
  StatusOr<std::vector<Tensor>> Invoke(int function, const std::vector<Tensor>& inputs,
                                       const InvokeOptions& options = {});
  /// As above, writing into `*outputs` (cleared first; its capacity is reused, so a serving
  /// loop that keeps the vector allocates nothing per request in steady state).
  Status Invoke(int function, const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
                const InvokeOptions& options = {});

  const Executable& executable() const { return *exe_; }
  /// Instructions executed by the last Invoke (for benchmarks and tests).
  uint64_t instructions_executed() const { return executed_; }

 private:
  struct Frame {
    int function;
    int caller_pc;     // pc of the invoke in the caller (to find its destination list)
    uint32_t base;     // first register of this frame in regs_
  };
  using Obj = internal::Obj;

  Context(std::shared_ptr<const Executable> exe, const ContextOptions& options);
  Status CheckInputs(int function, const std::vector<Tensor>& inputs);
  Status Run(int function, std::vector<Tensor>* outputs, Profile* profile);
  template <bool kProfile>
  Status RunLoop(int function, std::vector<Tensor>* outputs, Profile* profile);  // interpreter.cc
  Status PushFrame(int function, int caller_pc, uint32_t base);
  void PopFrame();
  Status Fail(int function, int pc, const Status& error) const;
  void ClearRegisters();

  std::shared_ptr<const Executable> exe_;
  Allocator* allocator_;
  int max_call_depth_;
  internal::ObjPool pool_;
  std::vector<Obj*> regs_;             // register stack; frames are windows into it
  std::vector<Frame> frames_;
  std::vector<const Tensor*> args_;    // scratch for kernel/region arguments
  std::vector<Obj*> results_;          // scratch for ret
  std::vector<internal::TensorObj*> const_objs_;  // one shared object per constant, lazily
  std::vector<int64_t> sym_value_;     // CheckInputs scratch: symbol values
  std::vector<size_t> sym_input_;      // ... and the input that bound each
  std::chrono::steady_clock::time_point deadline_;
  bool has_deadline_ = false;
  uint64_t executed_ = 0;
};

}  // namespace kiln

#endif  // KILN_VM_CONTEXT_H_
