// Runtime: the one object an embedding application creates — JIT, vendor runtimes, allocator.
#ifndef KILN_EMBED_RUNTIME_H_
#define KILN_EMBED_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "external/registry/registry.h"
#include "jit/dispatch.h"
#include "jit/engine.h"
#include "base/allocator.h"
#include "vm/context.h"
#include "vm/executable.h"
#include "base/status.h"

namespace kiln {

/// kiln's own release (`kiln --version`). The executable format has its own version
/// (serializer/version.h: kFormatMajor.kFormatMinor), which is what decides compatibility.
inline constexpr char kKilnVersion[] = "0.1.0";

/// The LLVM release the JIT compiles with ("19.1.7"), for version lines and bug reports.
const char* LlvmVersion();

struct RuntimeOptions {
  /// OpenMP threads used by JIT kernels' parallel loops and by oneDNN regions (one OpenMP pool,
  /// shared process-wide, so the two never oversubscribe the cores). 0: the OpenMP default
  /// (OMP_NUM_THREADS, else all cores). A positive count is applied to the creating thread and
  /// to every thread that runs one of this runtime's kernels or regions, at the call (OpenMP's
  /// thread count is a per-thread setting that threads created later do not inherit). It is
  /// process state: code on those threads outside kiln sees it too, and two runtimes with
  /// different counts in one process each apply their own on every call. (Each thread
  /// remembers the count it last applied; if other code changes it on that thread, that
  /// change stands until a runtime with another count runs there.) At most kMaxThreads.
  int num_threads = 0;
  /// Persistent JIT object cache, so a restarted process loads compiled kernels instead of
  /// recompiling them: "" (the default) is $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln;
  /// kJitCacheOff ("off") turns it off; anything else is the directory (created if missing).
  /// Processes may share a directory. One that cannot be created or written is not an error:
  /// the first such runtime in a process prints one warning on stderr and runs without a cache.
  std::string jit_cache;
  /// Bound on the JIT cache directory's size: the least recently used entries are deleted
  /// when a write would exceed it. > 0.
  uint64_t jit_cache_bytes = jit::kDefaultObjectCacheBytes;
  /// Bound on the bytes the runtime's allocator keeps cached for reuse (least recently released
  /// blocks are returned to the system first).
  size_t allocator_cache_bytes = Allocator::kDefaultCacheCap;
  /// Vendor plugin shared libraries to load (external/registry/plugin_abi.h).
  std::vector<std::string> plugins;
  /// Also load the plugins listed in $KILN_PLUGINS (colon-separated).
  bool plugins_from_environment = true;
  /// Register the built-in oneDNN vendor runtime ("onednn"), which runs the regions the compiler
  /// gives to oneDNN (CompileOptions::external, default "onednn").
  bool onednn = true;
  /// Shape keys a oneDNN region keeps primitives for (least recently used dropped beyond).
  int onednn_cached_shapes = 32;
  /// A region whose vendor declines it (oneDNN: a primitive would be a reference
  /// implementation) or is not registered runs its fallback function with one notice on
  /// stderr per vendor. True: that fails the load instead, naming vendor and region
  /// (LoadOptions::require_vendor; `--require-vendor`).
  bool require_vendor = false;
  /// Regions `kiln compile --tune` measured slower than their fallback (ExternalRegion.
  /// tuned_fallback) run the fallback, with a notice. True: create their vendor runtime as for
  /// any other region (LoadOptions::ignore_tuned_fallback; `--ignore-tuned-fallback`).
  bool ignore_tuned_fallback = false;
  /// Shape-keyed kernel dispatch (jit/dispatch.h): the first tier (dispatch.tiering: kernels a
  /// request waits for compile quickly, optimized code follows in the background once they are
  /// hot, or at once when the JIT cache is on, so the cache is filled with it), when a shape is
  /// hot enough to get a specialized variant, how varying dims are bucketed and how many shapes
  /// each kernel tracks.
  jit::DispatchOptions dispatch;
  /// madvise(WILLNEED) constant pages at load so the first run does not fault them one by one.
  bool prefetch_constants = true;
  /// LoadFile reads executables into huge-page-backed memory instead of mapping them
  /// (LoadOptions::huge_page_constants): faster weight-streaming kernels for one private copy
  /// of each file.
  bool huge_page_constants = true;

  static constexpr int kMaxThreads = 1024;
  static constexpr char kJitCacheOff[] = "off";
};

/// How Runtime::Warmup compiles.
struct WarmupOptions {
  /// The function to warm up; "" is the executable's entry function.
  std::string function;
  /// true: compile optimized code at once (no first tier) and wait for every background compile,
  /// so that requests run at steady-state speed from the first. false: the first tier only
  /// (cheaper; the optimized code then follows in the background once kernels are hot).
  bool optimized = true;
  /// true: run the call DispatchOptions::specialize_after times (at least once), so that the
  /// shape-specialized variants a shape gets once it is hot are compiled during warm-up too
  /// (where the payback rule grants them, as it would for requests), and waited for with
  /// `optimized`. false: one call (generic code only).
  bool specialize = false;
};

/// The values of a symbolic dim in [lo, hi] that warm up every shape-table entry the kernel
/// dispatcher keeps for a dim varying over that range: jit::BucketRepresentatives (see there),
/// e.g. 1:16 -> 1 2 3 4 7 8 15 16 with Bucketing::kPowerOfTwo.
std::vector<int64_t> WarmupBucketValues(int64_t lo, int64_t hi, jit::Bucketing bucketing);

/// The directory RuntimeOptions::jit_cache names (see there): empty for "off", or for the
/// default when neither $XDG_CACHE_HOME (absolute) nor $HOME (absolute) is set.
std::string JitCacheDirectory(const std::string& jit_cache);

/// Counters since the runtime was created (a snapshot; each group consistent on its own).
struct RuntimeStats {
  jit::EngineStats engine;      // kernels compiled, engine cache and on-disk cache hits
  jit::DispatchStats dispatch;  // variant compilations, specialized hits, generic misses
  AllocatorStats allocator;     // the runtime's allocator
};

/// What an embedding application creates once: the JIT engine (with its optional persistent
/// cache), the kernel provider with shape-keyed dispatch, a registry of vendor runtimes (oneDNN
/// and plugins) and a pooling allocator. It loads executables bound to those and makes the
/// contexts that run them.
///
/// Thread safety: every method may be called from any number of threads at once. Executables
/// it loads are immutable and shared; each Context is used by one thread at a time.
///
/// Ownership and lifetime: Create returns a shared_ptr; nothing requires the caller to keep
/// it. Every executable the runtime loads and every context it makes keeps the runtime's state
/// (engine, compiled code, vendor runtimes, allocator) alive, so they may outlive the Runtime
/// object. Tensors returned by a context use the runtime's allocator and may outlive everything:
/// when the last executable and context are gone, the allocator drops its cache; if tensors are
/// still out it stays (a few hundred bytes), frees their blocks as they are released instead of
/// caching them, and is deleted when the next runtime is created or released after they all are.
///
/// Exit: a runtime kept in a static, or leaked, may still be compiling in the background when
/// the process exits. An exit hook stops the background compiler and waits for the compile in
/// progress before static destructors tear LLVM down; it is registered again after compiles, so
/// it runs before the destructors of the LLVM objects those compiles made lazily
/// (tests/embed/exit_test). Best practice is still to release the runtime's state (or call
/// WaitForBackgroundCompiles) before exit: a compile that first touches some LLVM static in the
/// very moment the process exits, after the first 256 compiles, is not covered.
class Runtime {
 public:
  /// InvalidArgument for num_threads < 0 or > kMaxThreads, onednn_cached_shapes < 1 or an
  /// allocator cap of 0; NotFound / InvalidArgument naming the plugin for a plugin that does
  /// not exist or cannot be loaded (also from $KILN_PLUGINS); InvalidArgument for
  /// jit_cache_bytes 0; Internal if LLVM cannot create the JIT. (An unusable JIT cache
  /// directory only warns.)
  static StatusOr<std::shared_ptr<Runtime>> Create(const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Maps and verifies a .kiln file and binds its kernels (JIT, compiled on first use) and
  /// external regions (vendor Init, now). Errors are Executable::LoadFile's: NotFound /
  /// InvalidArgument if the file cannot be opened, InvalidFormat naming where and what,
  /// Unsupported for another format version, NotFound naming an unregistered vendor, and
  /// kernel or region errors naming the entry.
  StatusOr<std::shared_ptr<const Executable>> LoadFile(const std::string& path) const;
  /// As LoadFile for bytes in memory; they are copied once (the executable never refers to
  /// `data` after the call). InvalidArgument for null data.
  StatusOr<std::shared_ptr<const Executable>> LoadBytes(const uint8_t* data, size_t size) const;

  /// A context for `exe` (which need not come from this runtime, but must be bound) allocating
  /// from the runtime's allocator unless `options.allocator` is set. The context keeps `exe` and
  /// the runtime's state alive. InvalidArgument for a null or unbound executable.
  StatusOr<std::unique_ptr<Context>> NewContext(std::shared_ptr<const Executable> exe,
                                                const ContextOptions& options = {}) const;
  /// Starts compiling, on the JIT's startup threads (jit::DispatchOptions::
  /// startup_compile_threads, at the normal priority), what the first call of `function` ("":
  /// the entry function) needs: the generic code of every kernel and shape function it calls,
  /// in the order its code names them (Executable::Prefetch). Returns at once; the first call
  /// then waits only for kernels still compiling, and compiles itself those no thread has
  /// started. So a process starting up compiles on every core. Does nothing for a null or
  /// unbound `exe`, an unknown function or startup_compile_threads == 0.
  void Prefetch(const std::shared_ptr<const Executable>& exe,
                const std::string& function = "") const;

  /// Compiles every kernel and shape function that a call of `exe`'s function at the shapes
  /// `dims` (a value for each symbolic dim of its parameters, by name) needs, before the first
  /// request: so that an Invoke with inputs of those shapes compiles nothing. It does so by one
  /// call on inputs of zeros, in a context of its own: running the function is the only way to
  /// reach every kernel a request reaches, since shapes may depend on values kernels compute
  /// (data-dependent shape functions, If/Loop) and kernels are bound to the shapes that result;
  /// replaying shape functions and dispatch alone would need those values. Zeros are valid for
  /// every dtype; a function whose data-dependent path differs for other values (NonZero, TopK
  /// counts, loops on input values) may still compile kernels on the path zeros did not take.
  /// External regions run too (vendors build their per-shape state). Returns when every compile
  /// it started, in the background too, is done (with options.optimized). Call it any number of
  /// times, e.g. once per shape a server declares; thread-safe like the rest.
  /// Errors: InvalidArgument for a null or unbound `exe`, NotFound for an unknown function,
  /// InvalidArgument naming a parameter whose symbolic dim is unnamed or has no value in `dims`
  /// (or a name in `dims` no parameter uses); the call's own error otherwise, all prefixed with
  /// "warm-up".
  Status Warmup(const std::shared_ptr<const Executable>& exe,
                const std::map<std::string, int64_t>& dims,
                const WarmupOptions& options = {}) const;

  RuntimeStats stats() const;
  /// Blocks until no background (first-tier replacement or specialization) compile is queued or
  /// running; for warm-up and tests.
  void WaitForBackgroundCompiles() const;

  /// The runtime's allocator (for input tensors); lives as long as the runtime's state.
  Allocator& allocator() const;
  /// The vendor registry executables are bound to: register C++ vendor runtimes here before
  /// loading executables that need them.
  ExternalRegistry& vendors() const;
  /// Kernel and external providers, to load with Executable::LoadFile directly (e.g. with
  /// bind = false for inspection). Executables loaded that way do not keep the state alive.
  const LoadOptions& load_options() const;
  const RuntimeOptions& options() const;
  /// The OpenMP team size kernels run with: options().num_threads, or if 0 the OpenMP default
  /// as the calling thread sees it.
  int num_threads() const;
  /// The JIT cache directory in use; empty when the cache is off or its directory unusable.
  const std::string& jit_cache_dir() const;

 private:
  struct State;
  explicit Runtime(std::shared_ptr<State> state);
  StatusOr<std::shared_ptr<const Executable>> Adopt(
      StatusOr<std::shared_ptr<const Executable>> exe) const;

  std::shared_ptr<State> state_;
};

}  // namespace kiln

#endif  // KILN_EMBED_RUNTIME_H_
