// JitKernelProvider: binds "kiln-kir-1" kernel-table entries to JIT-compiled, shape-dispatched
// code.
#ifndef KILN_JIT_KERNEL_PROVIDER_H_
#define KILN_JIT_KERNEL_PROVIDER_H_

#include <atomic>
#include <memory>

#include "jit/dispatch.h"
#include "jit/engine.h"
#include "vm/providers.h"

namespace kiln::jit {

struct JitProviderOptions {
  DispatchOptions dispatch;
};

/// The VM's KernelProvider for kernels whose payload is serialized kernel IR (kPayloadFormat).
///
/// PrepareKernel (once per table entry, at load) decodes and validates the payload and checks it
/// against the table: buffer count == inputs + outputs, buffer dtypes == the table's dtypes, at
/// most kMaxDispatchBuffers buffers, kMaxDispatchDims dims and kMaxShapeKey dims in all. Nothing
/// is compiled yet. The returned TensorFunction's Run checks each tensor's rank, dtype and (for
/// buffers the kernel declares contiguous) contiguity, builds the ABI arrays on the stack (no
/// heap allocation once a shape has been seen), picks a variant through the kernel's
/// KernelDispatcher (compiling the generic variant on the first call) and calls it. Kernels do
/// not check that shapes agree with one another (e.g. broadcast-compatible): the VM's shape
/// functions are trusted to have computed consistent output shapes.
///
/// Errors from Prepare name the kernel: kUnsupported for another payload format or a kernel over
/// the limits, kInvalidFormat for corrupt bytes, kInvalidArgument when the kernel does not match
/// the table. Thread-safe; functions it returns keep the engine alive and may outlive the
/// provider. Compiled code is freed once no dispatcher holds it (an evicted shape, an unloaded
/// executable) and no EpochGuard that could be running it is alive; Run takes one itself.
class JitKernelProvider : public KernelProvider {
 public:
  explicit JitKernelProvider(std::shared_ptr<Engine> engine,
                             const JitProviderOptions& options = {});
  ~JitKernelProvider() override;

  /// Chooses the code target this host runs (jit/aot_objects.h, ChooseCodeTarget); its objects
  /// are then checked (LoadCodeObject: a corrupt one fails the load, naming the target and
  /// entry) and linked at Prepare instead of compiled at the first call. No target that runs
  /// here: -1, and everything is compiled as without such code. Code for narrower vectors than
  /// the host's is linked as the first tier, tiered up like the JIT's (DispatchStats counts
  /// it in aot_first_tier and tier_ups), and only with DispatchOptions::tiering on: with it off
  /// the JIT compiles the host's optimized code on first use, as without such code.
  int SelectCodeTarget(const std::vector<CodeTargetSpec>& targets) override;
  StatusOr<std::unique_ptr<TensorFunction>> PrepareKernel(const KernelSpec& spec) override;
  /// Shape functions are kernels too: their buffers are the inputs (any dtype; checked at run
  /// time) then the outputs, which must be i64 of rank 1.
  StatusOr<std::unique_ptr<TensorFunction>> PrepareShapeFunction(
      const ShapeFunctionSpec& spec) override;

  /// Dispatch counters summed over every kernel this provider prepared.
  DispatchStats stats() const { return counters_->Snapshot(); }
  /// Blocks until no background compile is queued or running (tests, warm-up), startup
  /// compiles (Prefetch) included.
  void WaitForBackgroundCompiles();
  /// While the returned token is alive, prefetched generic variants (TensorFunction::Prefetch,
  /// on the StartupCompiler) compile optimized, not at the first tier: for a warm-up, which
  /// wants the optimized code anyway.
  std::shared_ptr<void> OptimizedPrefetch();

 private:
  StatusOr<KernelPayload> Decode(std::string_view what, std::string_view name,
                                 std::string_view format, const uint8_t* payload, size_t size,
                                 size_t num_buffers);
  // The generic variant of `kernel` linked from `code`; empty when `code` is.
  StatusOr<KernelRef> LinkCode(const CodeObjectSpec& code, const Kernel& kernel);

  std::shared_ptr<Engine> engine_;
  JitProviderOptions options_;
  std::shared_ptr<BackgroundCompiler> compiler_;
  std::shared_ptr<DispatchCounters> counters_;
  std::shared_ptr<StartupCompiler> startup_;  // null when options_.startup_compile_threads == 0
  std::shared_ptr<std::atomic<int>> optimized_prefetch_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace kiln::jit

#endif  // KILN_JIT_KERNEL_PROVIDER_H_
