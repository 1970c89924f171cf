// The interfaces through which the VM runs code it does not interpret itself: kernels and shape
// functions (a KernelProvider; the JIT implements it) and external regions (an
// ExternalProvider; the vendor-runtime registry in external/ implements it).
#ifndef KILN_VM_PROVIDERS_H_
#define KILN_VM_PROVIDERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln {

/// A destination-passing operation bound at load time: reads args[0 .. num_inputs) and writes
/// args[num_inputs .. num_inputs + num_outputs), which the VM has already allocated with the
/// shapes the program computed. The VM has checked arity and each argument's dtype against the
/// table entry before calling; the implementation checks anything else it relies on (ranks,
/// dims) and returns an error rather than reading or writing out of bounds.
/// Run is called concurrently from many VM contexts and must be thread-safe.
/// One sub-operation a profiled external region ran (a vendor primitive: a convolution, a
/// reorder, ...). The views are valid only during RegionProfiler::Record.
struct RegionStepSample {
  int32_t step = 0;         // its position in the region's execution, from 0
  std::string_view kind;    // short op kind: "conv", "matmul", "binary", "reorder", ...
  std::string_view impl;    // the vendor's implementation: "brgconv:avx2", "ref:any"
  std::string_view shapes;  // operand dims, e.g. "1x16x56x56, 16x1x3x3 -> 1x16x28x28"; may be ""
  bool reference = false;   // a slow reference implementation (worth a look)
  int64_t dur_ns = 0;       // wall time of the step
};

/// Receives the steps of one profiled region call, on the thread that called RunProfiled.
class RegionProfiler {
 public:
  virtual ~RegionProfiler() = default;
  virtual void Record(const RegionStepSample& sample) = 0;
};

class TensorFunction {
 public:
  virtual ~TensorFunction() = default;
  virtual Status Run(const Tensor* const* args, int num_inputs, int num_outputs) = 0;
  /// Run, reporting each sub-operation it executes to `profiler` (non-null, not owned). The VM
  /// calls it instead of Run only while profiling, so Run stays free of profiling branches.
  /// The default runs Run and reports nothing: the caller sees one opaque call. A wrapper
  /// around another TensorFunction must forward RunProfiled, or its steps are lost.
  virtual Status RunProfiled(const Tensor* const* args, int num_inputs, int num_outputs,
                             RegionProfiler* profiler) {
    (void)profiler;
    return Run(args, num_inputs, num_outputs);
  }
  /// Starts what the first Run would otherwise do before computing (a JIT compiles the code)
  /// on other threads, and returns at once; Run then waits for it or does it itself. Optional
  /// (the default does nothing), never an error: a failure surfaces at Run as without it.
  virtual void Prefetch() {}
};

/// Bucket values the compiler declared for a symbolic dim (`symbol`, a kernel dim name):
/// a provider may pre-specialize the kernel for them. Views into the executable.
struct DispatchHintSpec {
  std::string_view symbol;
  std::vector<int64_t> buckets;
};

/// One table of code compiled ahead of time (executable.fbs, AotTarget), as the provider sees it
/// when it chooses which to use. Views into the executable.
struct CodeTargetSpec {
  int index = 0;
  std::string where;  // "aot_targets[0] (x86_64-pc-linux-gnu, cpu znver3)", for messages
  std::string_view triple, cpu, features, llvm_version, abi;
};

/// One entry's code from the chosen CodeTargetSpec; empty (size 0) when there is none.
struct CodeObjectSpec {
  std::string where;  // "aot_targets[0] (...).kernels[3]", for messages
  std::string_view symbol;
  std::string_view target_features;  // CodeTargetSpec::features of the target it is code for
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool empty() const { return size == 0; }
};

/// A kernel table entry as the provider sees it (views into the executable; valid for the
/// executable's lifetime).
struct KernelSpec {
  int index = 0;
  std::string_view name;
  std::vector<DType> input_dtypes;
  std::vector<DType> output_dtypes;
  std::string_view payload_format;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
  std::vector<DispatchHintSpec> dispatch_hints;
  CodeObjectSpec code;  // ahead-of-time code (KernelProvider::SelectCodeTarget), if any
};

/// What a shape function writes into an output slot when its inputs have no valid result: a
/// negative value. kShapeTooLarge says a tensor's byte size would pass the format's limit (the
/// inputs are too large); any other negative value (usually -1) that the input shapes do not
/// fit together. The VM fails the call with a message saying which.
inline constexpr int64_t kShapeTooLarge = -2;

/// A shape function entry. Outputs are i64 1-D tensors.
struct ShapeFunctionSpec {
  int index = 0;
  std::string_view name;
  int num_inputs = 0;
  int num_outputs = 0;
  std::vector<bool> data_dependent;  // per input
  std::string_view payload_format;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
  CodeObjectSpec code;  // ahead-of-time code (KernelProvider::SelectCodeTarget), if any
};

/// An external region entry; `constants` are views of the executable's constant bytes (no copy;
/// valid for the executable's lifetime).
struct ExternalRegionSpec {
  int index = 0;
  std::string_view name;
  std::string_view vendor;
  const uint8_t* blob = nullptr;
  size_t blob_size = 0;
  std::vector<Tensor> constants;
  int num_inputs = 0;
  int num_outputs = 0;
  /// Whether the vendor may decline the region (ExternalProvider). False when the region has
  /// no fallback function (files before format 1.2) and the loader does not require the
  /// vendor: the vendor runs it however well it can, as before declining existed.
  bool may_decline = true;
};

/// Binds kernel and shape-function entries to runnable code. Called once per entry when an
/// executable is loaded (a provider may compile lazily on first Run). Thread-safe.
class KernelProvider {
 public:
  virtual ~KernelProvider() = default;
  /// Called once per executable, before its entries, when it carries code compiled ahead of
  /// time: the index of the target whose code the provider will link (each entry's spec then
  /// carries that target's object), or -1 for none. The default uses none.
  virtual int SelectCodeTarget(const std::vector<CodeTargetSpec>& targets) { return -1; }
  virtual StatusOr<std::unique_ptr<TensorFunction>> PrepareKernel(const KernelSpec& spec) = 0;
  virtual StatusOr<std::unique_ptr<TensorFunction>> PrepareShapeFunction(
      const ShapeFunctionSpec& spec) = 0;
};

/// Creates the runtime of an external region (vendor Init with blob and constants), once per
/// region at load. Thread-safe.
///
/// Declining: a vendor that could run a region, but not well (oneDNN would pick a reference
/// implementation for one of its primitives), returns the status Declined(reason) from
/// CreateRegion when spec.may_decline, the reason naming the region and what it would run
/// badly. That is not a failure: the loader then binds the region's fallback function
/// (ExternalRegion.fallback, JIT kernels) in its place and prints one notice per vendor, unless
/// LoadOptions::require_vendor is set, which makes it a load error. A decline when
/// !spec.may_decline (the region has nothing else to run) fails the load.
class ExternalProvider {
 public:
  virtual ~ExternalProvider() = default;
  /// The region's runtime; Declined(reason) (see above); any other error fails the load.
  /// NotFound naming the vendor if no runtime is registered for it.
  virtual StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(
      const ExternalRegionSpec& spec) = 0;
  /// Whether a runtime is registered for `vendor`. The loader asks before CreateRegion so an
  /// absent vendor's regions run their fallbacks (like declined ones) instead of failing the
  /// load. The default says yes (providers that know no vendors by name).
  virtual bool HasVendor(std::string_view vendor) const { return true; }
};

}  // namespace kiln

#endif  // KILN_VM_PROVIDERS_H_
