// Code generation: kernel IR to an optimized LLVM module for the host CPU, and the compiled ABI.
#ifndef KILN_JIT_CODEGEN_H_
#define KILN_JIT_CODEGEN_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "jit/kernel_ir.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::jit {

/// The ABI of every compiled kernel:
///
///   void kernel(void* const* buffers, const int64_t* const* shapes,
///               const int64_t* const* strides, const int64_t* dims);
///
/// - buffers[i]: address of element [0, ..., 0] of Kernel::buffers[i]. Distinct buffers must not
///   overlap (the kernel is compiled assuming they do not alias).
/// - shapes[i]: the rank_i runtime dims of buffer i (not read when rank_i == 0).
/// - strides[i]: rank_i strides in elements (not bytes); not read, and may be null, for buffers
///   declared contiguous, whose strides are derived from the shape (row-major).
/// - dims: the values of Kernel::dims, in order (may be null when there are none).
/// The kernel returns nothing. The caller checks, before calling, that the shapes satisfy
/// whatever the kernel's indexing assumes (TFLite-style prepare); what only the data can tell
/// (an index read from a tensor, ExprOp::kCheckIndex) the kernel reports to the caller's
/// KernelErrorScope (jit/runtime.h), and the caller must check it after the call. The arrays
/// are read only during the call. A kernel is reentrant: any number of threads may call it at
/// once on distinct output buffers.
using KernelFn = void (*)(void* const* buffers, const int64_t* const* shapes,
                          const int64_t* const* strides, const int64_t* dims);

/// The CPU code is generated for.
struct TargetInfo {
  std::string triple;
  std::string cpu;       // e.g. "znver5"
  std::string features;  // "+avx512f,+fma,..." (LLVM feature string)
  bool has_avx2 = false;
  bool has_avx512f = false;
};

/// Detects the host CPU (name and features through llvm::sys). Initializes LLVM's native target
/// once per process. Thread-safe. kInternal if LLVM has no target for this host.
StatusOr<TargetInfo> DetectHostTarget();

struct CodegenOptions {
  bool optimize = true;     // run the O3 pipeline (off only to inspect the raw code)
  bool use_libmvec = true;  // map vectorized math to glibc libmvec (_ZGV... symbols)
  /// The cheap first tier (jit/engine.h, Tier::kFast): a subset of O1's IR passes instead of O3
  /// (when `optimize`; llvm_target.cc), and CreateTargetMachine's fast code generator. Never stored in the persistent
  /// object cache.
  bool first_tier = false;
};

/// One kernel generated into its own LLVM context and module (the unit ORC takes). Move-only.
struct KernelModule {
  KernelModule();
  KernelModule(KernelModule&&) noexcept;
  KernelModule& operator=(KernelModule&&) noexcept;
  ~KernelModule();

  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;  // destroyed before `context`
  std::string symbol;                    // name of the entry function (the KernelFn ABI)
  /// Error diagnostics LLVM reported through `context` (also later, during code generation);
  /// empty while all is well. Warnings and remarks (e.g. a loop that would not vectorize) are
  /// dropped rather than printed.
  std::shared_ptr<std::string> llvm_errors;
};

/// Validates `kernel` (ValidateKernel), generates a module whose entry function is `symbol`,
/// verifies the module (llvm::verifyModule, for every kernel: about 40 us, under 0.1% of the
/// O3 pipeline alone) and, if options.optimize, runs O3 (the first tier: its cheaper passes) for `target`.
/// Errors: kInvalidArgument from validation, kInvalidFormat when the verifier rejects the
/// generated module, kInternal for another LLVM failure; messages name the kernel. Thread-safe
/// (each call owns its context).
StatusOr<KernelModule> GenerateModule(const Kernel& kernel, const std::string& symbol,
                                      const TargetInfo& target, const CodegenOptions& options = {});

/// Textual LLVM IR of a generated kernel (tests and `kiln inspect`).
std::string ModuleText(const KernelModule& generated);

/// Name of the runtime parallel-for every parallel loop calls (see jit/runtime.h).
inline constexpr const char* kParallelForSymbol = "kiln_parallel_for";
/// Names of the runtime team functions a kTeam loop, TeamSize and TeamBarrier call.
inline constexpr const char* kParallelTeamSymbol = "kiln_parallel_team";
inline constexpr const char* kTeamSizeSymbol = "kiln_team_size";
inline constexpr const char* kTeamBarrierSymbol = "kiln_team_barrier";
/// Name of the runtime function a failed CheckIndex calls (see jit/runtime.h).
inline constexpr const char* kIndexErrorSymbol = "kiln_index_error";
/// Name of the runtime function a failed CheckInRange calls (see jit/runtime.h).
inline constexpr const char* kRangeErrorSymbol = "kiln_range_error";

// ---- Internal to jit/ (shared by codegen.cc, llvm_target.cc and engine.cc). ----

/// A TargetMachine for `target` at -O3 (`first_tier`: the fast code generator the first tier
/// uses), or kInternal.
StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const TargetInfo& target,
                                                                   bool first_tier = false);
/// Runs the O3 pipeline (`first_tier`: the first tier's cheaper one) with libmvec mappings (when
/// `use_libmvec`) on `module`.
Status OptimizeModule(llvm::Module& module, llvm::TargetMachine& machine, const TargetInfo& target,
                      bool use_libmvec, bool first_tier = false);

}  // namespace kiln::jit

#endif  // KILN_JIT_CODEGEN_H_
