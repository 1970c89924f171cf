// The JIT engine: ORC LLJIT, compile on first use, in-memory cache keyed by the kernel IR hash.
#ifndef KILN_JIT_ENGINE_H_
#define KILN_JIT_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "jit/codegen.h"
#include "jit/kernel_ir.h"
#include "jit/object_cache.h"

namespace kiln::jit {

struct EngineOptions {
  CodegenOptions codegen;  // codegen.use_libmvec is turned off if libmvec.so.1 cannot be loaded
  /// Non-empty: a persistent object cache in this directory (created if missing; see
  /// jit/object_cache.h), so a restarted process loads kernels instead of recompiling them. A
  /// directory that cannot be created or written is not an error: one warning per process on
  /// stderr, and the engine runs without a cache (object_cache_dir() is then empty).
  std::string object_cache_dir;
  /// Bound on the cache directory's size (least recently used entries evicted beyond); > 0.
  uint64_t object_cache_bytes = kDefaultObjectCacheBytes;
};

/// How much a compile optimizes. kFast is the first tier: kernels a request waits for are
/// compiled quickly (a subset of O1's IR passes, LLVM's fast code generator; several times
/// cheaper than O3, code slower) and replaced by their kOptimized variant, compiled in the
/// background, once hot (jit/dispatch.h). kOptimized is the O3 pipeline, the only tier the persistent cache stores.
enum class Tier { kFast, kOptimized };

/// Counters since the engine was created (a consistent snapshot).
struct EngineStats {
  int64_t compilations = 0;    // kernels generated and compiled, including failed attempts
  int64_t fast_compilations = 0;  // of those, first-tier (Tier::kFast) compilations
  int64_t failures = 0;        // compilations that returned an error
  int64_t cache_hits = 0;      // requests served without compiling (including waits on a
                               // compilation another thread had started)
  double compile_seconds = 0;  // wall time spent compiling, summed over compilations
  int64_t cached_kernels = 0;  // distinct kernels in the cache now (failed ones included)
  int64_t freed_kernels = 0;   // kernels whose code was freed after their last KernelRef went
  int64_t object_cache_hits = 0;     // compilations served from the persistent object cache
  int64_t object_cache_misses = 0;   // compilations that found no usable object on disk
  int64_t object_cache_corrupt = 0;  // cache files rejected (and rewritten by the compile)
  int64_t object_cache_evictions = 0;  // cache files deleted to stay within the size bound
  int64_t aot_linked = 0;         // kernels linked from code compiled ahead of time (no compile)
  int64_t aot_link_failures = 0;  // such objects that did not link (then compiled instead)
};

/// A counted reference to one compiled kernel (Engine::Acquire). The kernel's code stays while
/// any copy of a reference to it exists (or the kernel was pinned by GetOrCompile). After the
/// last copy is gone the kernel leaves the engine's cache and its code is freed once no
/// EpochGuard (base/epoch.h) that was alive at that moment is: call fn() only inside a guard that
/// began while a reference was held. A default-constructed reference is empty.
class KernelRef {
 public:
  KernelRef() = default;
  KernelFn fn() const { return fn_; }
  explicit operator bool() const { return fn_ != nullptr; }
  /// The tier of the code: kOptimized also for a kFast request served by optimized code (from
  /// the persistent cache, or already compiled in this engine).
  Tier tier() const { return tier_; }

 private:
  friend class Engine;
  KernelFn fn_ = nullptr;
  Tier tier_ = Tier::kOptimized;
  std::shared_ptr<void> hold_;
};

/// Compiles kernels to host machine code through ORC LLJIT.
///
/// Thread-safe: any number of threads may call GetOrCompile at once. A kernel is compiled at most
/// once per engine and tier: concurrent requests for the same new kernel wait for the one
/// compilation and receive the same function pointer (or the same error; failures are cached too,
/// so a bad kernel is not recompiled on every request). Kernels are identified by structure
/// (HashKernel + StructurallyEqual), not by name. Each kernel's code is its own ORC resource:
/// kernels handed out by Acquire are freed when their last KernelRef is gone (so the cache holds
/// what is in use); kernels handed out by GetOrCompile are pinned and live until the engine is
/// destroyed. The engine's state lives on while KernelRefs or retired kernels refer to it.
class Engine {
 public:
  /// Creates the LLJIT for the host CPU and makes host symbols visible to it: the process (libm,
  /// the OpenMP runtime), glibc's libmvec and kiln_parallel_for. kInternal on LLVM failure.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Returns the compiled entry point of `kernel` (ABI in jit/codegen.h), compiling it on the
  /// first request, and pins it: its code lives as long as the engine. Errors: kInvalidArgument
  /// for an invalid kernel, kInternal for an LLVM failure; messages name the kernel.
  StatusOr<KernelFn> GetOrCompile(const Kernel& kernel);
  /// As GetOrCompile, but counted instead of pinned (see KernelRef). A failed compile is cached
  /// only while some request for it is still waiting. Tier::kFast compiles the first tier
  /// (cached in memory apart from the optimized code of the same kernel, never on disk) unless
  /// optimized code is at hand without compiling: a finished optimized compile in this engine, or
  /// an entry of the persistent cache. KernelRef::tier() says which was returned.
  StatusOr<KernelRef> Acquire(const Kernel& kernel, Tier tier = Tier::kOptimized);
  /// As Acquire, but a kernel the engine does not hold yet is linked from `object` (code
  /// compiled ahead of time for it: a relocatable object, already checked by LoadCodeObject,
  /// that defines `symbol` with the KernelFn ABI) instead of compiled: no IR is generated. An
  /// object that does not link is dropped with one notice on stderr per process, and the kernel
  /// is compiled as Acquire would; `*compiled` (if given) says whether that happened. `tier` is
  /// what the object's code is to the engine: kOptimized for code as good as the JIT's for this
  /// host; kFast for a first tier (code for narrower vectors, jit/aot_objects.h NarrowerCode),
  /// which Acquire(kernel, kOptimized) does not return but compiles over, and which is not
  /// linked when optimized code for the kernel is at hand already (as Acquire's kFast).
  StatusOr<KernelRef> AcquireObject(const Kernel& kernel,
                                    std::unique_ptr<llvm::MemoryBuffer> object,
                                    const std::string& symbol, bool* compiled = nullptr,
                                    Tier tier = Tier::kOptimized);

  EngineStats stats() const;
  const TargetInfo& target() const;
  /// Whether vectorized math calls libmvec in this engine.
  bool uses_libmvec() const;
  /// The persistent object cache's directory; empty when the engine runs without one.
  const std::string& object_cache_dir() const;

 private:
  struct Impl;
  explicit Engine(std::shared_ptr<Impl> impl);
  // Acquire and AcquireObject: the kernel's entry at `tier`, held; a new one is linked from
  // `object` when there is one and it links, else compiled (then *compiled, if given, is set).
  StatusOr<KernelRef> Hold(const Kernel& kernel, Tier tier,
                           std::unique_ptr<llvm::MemoryBuffer> object, const std::string& symbol,
                           bool* compiled);

  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::jit

#endif  // KILN_JIT_ENGINE_H_
