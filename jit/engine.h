// The JIT engine: ORC LLJIT, compile on first use, in-memory cache keyed by the kernel IR hash.
#ifndef KILN_JIT_ENGINE_H_
#define KILN_JIT_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "jit/kernel_ir.h"
#include "jit/lower_llvm.h"
#include "vm/status.h"

namespace kiln::jit {

struct EngineOptions {
  LowerOptions lower;  // lower.use_libmvec is turned off if libmvec.so.1 cannot be loaded
  /// Non-empty: a persistent object cache in this directory (created if missing; see
  /// jit/object_cache.h), so a restarted process loads kernels instead of recompiling them.
  std::string object_cache_dir;
};

/// Counters since the engine was created (a consistent snapshot).
struct EngineStats {
  int64_t compilations = 0;    // kernels lowered and compiled, including failed attempts
  int64_t failures = 0;        // compilations that returned an error
  int64_t cache_hits = 0;      // requests served without compiling (including waits on a
                               // compilation another thread had started)
  double compile_seconds = 0;  // wall time spent compiling, summed over compilations
  int64_t cached_kernels = 0;  // distinct kernels in the cache (failed ones included)
  int64_t object_cache_hits = 0;     // compilations served from the persistent object cache
  int64_t object_cache_misses = 0;   // compilations that found no usable object on disk
  int64_t object_cache_corrupt = 0;  // cache files rejected (and rewritten by the compile)
};

/// Compiles kernels to host machine code through ORC LLJIT.
///
/// Thread-safe: any number of threads may call GetOrCompile at once. A kernel is compiled at most
/// once per engine: concurrent requests for the same new kernel wait for the one compilation and
/// receive the same function pointer (or the same error; failures are cached too, so a bad kernel
/// is not recompiled on every request). Kernels are identified by structure (HashKernel +
/// StructurallyEqual), not by name. Compiled code lives until the engine is destroyed; the
/// returned KernelFn must not be called after that. The cache is unbounded.
class Engine {
 public:
  /// Creates the LLJIT for the host CPU and makes host symbols visible to it: the process (libm,
  /// the OpenMP runtime), glibc's libmvec and kiln_parallel_for. kInternal on LLVM failure.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Returns the compiled entry point of `kernel` (ABI in jit/lower_llvm.h), compiling it on the
  /// first request. Errors: kInvalidArgument for an invalid kernel, kInternal for an LLVM failure;
  /// messages name the kernel.
  StatusOr<KernelFn> GetOrCompile(const Kernel& kernel);

  EngineStats stats() const;
  const TargetInfo& target() const;
  /// Whether vectorized math calls libmvec in this engine.
  bool uses_libmvec() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  StatusOr<KernelFn> Compile(const Kernel& kernel);

  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::jit

#endif  // KILN_JIT_ENGINE_H_
