// Per-kernel dispatch: a bounded table from shape key to compiled variant, with background
// specialization of hot shapes (dims folded to constants) and pre-specialized bucket hints.
#ifndef KILN_JIT_DISPATCH_H_
#define KILN_JIT_DISPATCH_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "jit/compile_policy.h"
#include "jit/engine.h"
#include "jit/kernel_ir.h"
#include "jit/kernel_ir_serialize.h"

namespace kiln::jit {

/// Largest number of buffers (inputs + outputs) a dispatched kernel may have, and largest number
/// of symbolic dims: Run builds its argument arrays on the stack.
inline constexpr int kMaxDispatchBuffers = 32;
inline constexpr int kMaxDispatchDims = 64;
/// Largest shape key (sum of the buffers' ranks).
inline constexpr int kMaxShapeKey = 256;

/// How the shape table groups the dims that vary from call to call (key positions seen with
/// more than one value, learned per kernel). Dims that have never varied are always matched
/// exactly and folded into specialized variants.
enum class Bucketing {
  /// Every shape is its own entry with a variant that folds every dim (one compile per value of
  /// a varying dim).
  kExact,
  /// A varying dim's value is rounded up to a power of two: shapes whose varying dims all are
  /// powers of two get exact variants as with kExact; every other shape shares its bucket's
  /// entry, whose variant folds only the dims that never varied (the varying ones stay run-time
  /// values, so it serves every shape in the bucket). Variants that fold the same dims are one
  /// kernel to the engine, so those compile once per kernel, not once per bucket.
  kPowerOfTwo,
};

struct DispatchOptions {
  /// A shape (or bucket) seen this many times gets a specialized variant (0 or less: never
  /// specialize).
  int specialize_after = 8;
  Bucketing bucketing = Bucketing::kPowerOfTwo;
  /// A kernel's generic variant is compiled at the first tier (Tier::kFast) on its first call,
  /// and once it has served `tier_up_after` calls (one when the engine has a persistent cache,
  /// which then stores the optimized code for later processes) the optimized generic variant is
  /// compiled in the background and swapped in. A kernel found in the persistent cache is
  /// optimized from its first call. false: the generic variant is optimized from the start
  /// (pins O3, for tests and benchmarks).
  bool tiering = true;
  int tier_up_after = 2;
  /// Shapes tracked per kernel (counted or specialized); the least recently used is evicted.
  int max_shapes = 32;
  /// Largest number of hint buckets pre-specialized per kernel (the rest are ignored).
  int max_hint_variants = 32;
  /// The payback rule (PaybackAccount, jit/compile_policy.h): a hot shape or bucket is
  /// specialized only if the kernel takes at least `min_share` of the run time of all the
  /// provider's kernels, and once its run time on code that is not specialized covers `payback`
  /// x the expected compile time of the variant (which the request then spends). So a sweep of
  /// shapes compiles variants for the kernels whose time is worth it, not for every kernel at
  /// every shape. Both <= 0: every hot shape is specialized (specialize_after alone decides).
  /// Hint buckets declared at compile time are not subject to it.
  double min_share = 0.02;
  double payback = 0;
  /// The rule times one call in `time_every` of each kernel (its first, then every
  /// time_every-th) and counts it as time_every calls: two clock reads and two atomic adds per
  /// call cost bert_tiny 1-4% of its run at seq 1-32 with everything specialized (measured A/B,
  /// `kiln bench --versus`), while a kernel's share and credit only need estimates. 1 or less:
  /// every call is timed.
  int time_every = 8;
  /// The expected CPU time of a specialized compile until the kernel's own optimized compiles
  /// have been measured (the kernel's latest one is used then).
  double assumed_compile_ms = 40;
  /// Nanoseconds on a monotonic clock, to time the calls that earn payback credit; null: the
  /// steady clock. Tests inject a counter: then compiles are not measured either, each costs
  /// exactly assumed_compile_ms, and the policy's decisions depend on no real time.
  int64_t (*clock)() = nullptr;
  /// The background compiler's CPU budget (CpuBudget): at most this share of one core over a
  /// `compile_window_ms` window (the burst a quiet process may spend at once). <= 0 or >= 1: no
  /// cap. Its thread also runs at the lowest priority (nice 19), below the threads of requests.
  double compile_cpu_share = 0.5;
  int compile_window_ms = 2000;
  /// Threads of the StartupCompiler that compiles, at the normal priority, the generic variants
  /// of the kernels a program is about to call (Executable::Prefetch): a process starting up
  /// compiles on every core. < 0: one per core (std::thread::hardware_concurrency, at most 4);
  /// 0: no prefetching (each kernel compiles on its first call, on the calling thread).
  int startup_compile_threads = -1;
};

/// One value of each shape-table entry KernelDispatcher keeps for a dim varying over [lo, hi]
/// under `bucketing`, in ascending order, so that warming up these values compiles every entry
/// that range can reach and no entry twice. kPowerOfTwo: each power of two (an exact entry of
/// its own) and the largest value of every other bucket (the values rounding up to the same
/// power of two), e.g. 1:16 -> 1 2 3 4 7 8 15 16; kExact: every value. Empty if lo > hi or
/// lo < 1. Computed with the rounding Lookup applies, so the two cannot disagree. (The
/// dispatcher buckets a dim only once it has seen it vary, so the very first value a kernel
/// sees gets an exact entry of its own; a kernel whose key holds a dim computed from several
/// symbols may bucket differently.)
std::vector<int64_t> BucketRepresentatives(int64_t lo, int64_t hi, Bucketing bucketing);

/// Counters summed over every kernel of a provider (a snapshot; each field read atomically).
struct DispatchStats {
  int64_t compilations = 0;     // variants compiled (generic and specialized, failures included)
  int64_t hits = 0;             // calls served by a specialized variant
  int64_t misses = 0;           // calls served by the generic variant
  int64_t specializations = 0;  // specialized variants installed (hot shapes and hint buckets)
  int64_t fast_generics = 0;    // generic variants compiled at the first tier
  int64_t tier_ups = 0;         // optimized generic variants swapped in for first-tier ones
  int64_t evictions = 0;        // shape-table entries evicted
  double compile_seconds = 0;   // wall time in compilations (including engine cache hits)
  int64_t aot_kernels = 0;      // generic variants linked from code compiled ahead of time
  int64_t aot_first_tier = 0;   // of those, first tiers (code for narrower vectors), tiered up
                                // like the JIT's (tier_ups counts both)
};

/// The shared, lock-free counters behind DispatchStats.
struct DispatchCounters {
  std::atomic<int64_t> compilations{0}, hits{0}, misses{0}, specializations{0}, evictions{0},
      aot_kernels{0}, aot_first_tier{0}, fast_generics{0}, tier_ups{0};
  std::atomic<int64_t> compile_nanos{0};
  std::atomic<int64_t> run_nanos{0};  // timed kernel calls (the payback rule's denominator)
  DispatchStats Snapshot() const;
};

/// One worker thread that runs compile tasks in submission order, at the lowest scheduling
/// priority (nice 19) and within a CPU budget (CpuBudget of `cpu_share` over `window_ms`: a task
/// starts only while the budget is not in debt, and is charged its thread CPU time). Thread-safe.
/// The destructor drops queued tasks and joins the thread (a task in progress finishes first).
/// Exit is safe with compilers alive (a leaked Runtime): a hook registered with atexit when the
/// first compiler is made, and again after compiles (LLVM makes function-local statics during
/// its first compiles; exit destroys them before any hook registered earlier), stops every
/// compiler the same way, waiting for a compile in progress, before exit tears LLVM down. Compiles the program runs on its own threads (first calls) are its business.
class BackgroundCompiler {
 public:
  /// `lowest_priority` false: the thread keeps the process's priority (compiles a caller is
  /// about to wait for: StartupCompiler).
  explicit BackgroundCompiler(double cpu_share = 0, int window_ms = 2000,
                              bool lowest_priority = true);
  ~BackgroundCompiler();
  BackgroundCompiler(const BackgroundCompiler&) = delete;
  BackgroundCompiler& operator=(const BackgroundCompiler&) = delete;

  void Submit(std::function<void()> task);
  /// Blocks until the queue is empty and no task runs (tests, benchmarks, warm-up). Meanwhile
  /// the thread runs at the normal priority (where the process may raise it back) and ignores
  /// the budget: the caller is waiting for exactly these compiles.
  void WaitIdle();

  struct State;  // the queue, shared with the thread (and the exit hook)

 private:
  std::shared_ptr<State> state_;
  std::thread thread_;
};

/// Threads that compile the generic variants of kernels a program is about to call
/// (KernelDispatcher::Prefetch), so that a process starting up compiles on every core instead of
/// one kernel at a time on the calling thread. `threads` BackgroundCompilers at the normal
/// priority without a budget, made on the first Submit and given tasks in turn. Thread-safe;
/// the destructor drops queued tasks and waits for the compiles in progress.
class StartupCompiler {
 public:
  explicit StartupCompiler(int threads);
  void Submit(std::function<void()> task);
  /// Blocks until every task submitted before the call has run (and each worker was idle once
  /// since). Submit is not blocked meanwhile, from other threads or from a task; a task
  /// submitted during the wait may or may not be waited for.
  void WaitIdle();

 private:
  std::mutex mu_;  // guards next_ and the making of workers_ (never held while waiting)
  int threads_;
  size_t next_ = 0;
  std::vector<std::unique_ptr<BackgroundCompiler>> workers_;
};

/// While an object of this class is alive on a thread, dispatchers called on that thread compile
/// generic variants optimized at once, as if DispatchOptions::tiering were false: warm-up pays for
/// the optimized code before the first request instead of compiling each kernel twice. Scopes
/// nest; each thread has its own.
class OptimizedTierScope {
 public:
  OptimizedTierScope();
  ~OptimizedTierScope();
  OptimizedTierScope(const OptimizedTierScope&) = delete;
  OptimizedTierScope& operator=(const OptimizedTierScope&) = delete;
  /// Whether a scope is alive on the calling thread.
  static bool Active();
};

/// `kernel` with every runtime size folded to a constant: Dim(param b, axis a) becomes
/// shapes[b][a] and kernel dim i becomes dims[i] (the dims stay in Kernel::dims, unused, so the
/// ABI is unchanged). `fold_dim` limits folding to the kernel dims it marks and the buffer dims
/// `fold_shape` marks (flat key positions); empty means fold everything.
Kernel SpecializeKernel(const Kernel& kernel, const std::vector<const int64_t*>& shapes,
                        const int64_t* dims, const std::vector<bool>& fold_dim = {},
                        const std::vector<bool>& fold_shape = {});

/// Chooses the compiled variant of one kernel for each call. The engine keeps only the variants
/// some dispatcher holds: an evicted shape's variant is freed (DispatchOptions::max_shapes bounds
/// the code per kernel). Thread-safe: Select takes one short lock around the table; compiles of
/// optimized generic and specialized variants run on the BackgroundCompiler and are swapped in
/// when done, so callers never wait for them (only the first call waits, for the generic
/// variant: first tier unless DispatchOptions::tiering is off). A variant swapped out stays valid
/// for calls already running it: its code is freed only once no EpochGuard that could be running
/// it is alive. Destroying the last owner of the BackgroundCompiler (the provider or a
/// dispatcher) waits for a compile in progress, so destroy them before the process exits.
class KernelDispatcher : public std::enable_shared_from_this<KernelDispatcher> {
 public:
  /// Whether the caller times a call (for the payback rule), and what served it.
  enum class CallTiming { kNone, kUnspecialized, kSpecialized };

  /// `hints` name kernel dims (by Var name) bound to a buffer dim; each bucket value gets a
  /// variant with that dim folded, compiled in the background now. Unknown names are ignored.
  /// A non-empty `generic` is the kernel's generic variant, ready (code compiled ahead of
  /// time): the first call then compiles nothing. If its tier() is kFast (code for narrower
  /// vectors than the host's) it is tiered up as a first-tier compile would be; with tiering
  /// off it serves as it is.
  static std::shared_ptr<KernelDispatcher> Create(
      std::shared_ptr<Engine> engine, std::shared_ptr<BackgroundCompiler> compiler,
      std::shared_ptr<DispatchCounters> counters, KernelPayload payload,
      const DispatchOptions& options,
      const std::vector<std::pair<std::string, std::vector<int64_t>>>& hints,
      KernelRef generic = {});

  /// The variant for this call. `key` is the buffers' dims concatenated (key_size() values);
  /// the kernel dims are derived from it through the bindings. Errors: the
  /// generic variant's compile error (kInvalidArgument / kInternal, naming the kernel).
  /// Call Select and the function it returns inside one EpochGuard (base/epoch.h): the variants
  /// the dispatcher holds are counted references (Engine::Acquire), so the code of an evicted
  /// shape, of a first tier replaced, or of a destroyed dispatcher, is freed once no guard can
  /// be running it. `*timing` (if given) says whether and how the payback rule wants the call
  /// timed (one call in DispatchOptions::time_every): with Now() around it, then Record.
  StatusOr<KernelFn> Select(const int64_t* key, CallTiming* timing = nullptr);
  /// The clock of DispatchOptions::clock, in nanoseconds.
  int64_t Now() const;
  /// Records a call Select asked to time (not kNone) that took `run_nanos`, as time_every
  /// such calls.
  void Record(CallTiming timing, int64_t run_nanos);
  /// The kernel's payback account (tests).
  const PaybackAccount& payback() const { return table_->payback; }

  const Kernel& kernel() const { return payload_.kernel; }
  const std::vector<DimBinding>& dim_bindings() const { return payload_.dim_bindings; }
  const std::vector<Expr>& preconditions() const { return payload_.preconditions; }
  int key_size() const { return key_size_; }
  /// Shapes currently tracked (tests of the cap).
  int tracked_shapes() const;
  /// Compiles the generic variant on `startup` now, as the first call would, unless it is
  /// compiled or being compiled already (a first call then waits for it, or compiles it itself
  /// if the task has not started). The tier is chosen when the task runs: optimized while a
  /// caller on any thread is warming up (the provider's `optimized_requests` > 0), else as
  /// Select's first call would. The task holds the dispatcher weakly.
  void Prefetch(StartupCompiler& startup, std::shared_ptr<const std::atomic<int>> optimized_requests);
  /// The tier of the generic variant now: kFast until the optimized one is swapped in (before
  /// the first call, the tier the first call will compile).
  Tier generic_tier() const;

 private:
  struct Entry {
    std::vector<int64_t> key;   // the table key (varying dims bucketed unless `exact`)
    std::vector<bool> varying;  // the kernel's varying positions when the entry was made
    bool exact = true;          // the variant folds every dim (else only the non-varying)
    int64_t count = 0;
    bool pending = false;
    KernelRef code;  // the specialized variant once compiled
    std::list<uint64_t>::iterator lru;
  };
  struct HintVariant {
    int key_pos = 0;
    int64_t value = 0;
    KernelRef code;                     // written once, before fn is published
    std::atomic<KernelFn> fn{nullptr};
  };
  // What background compiles write into. Tasks hold it weakly, so a task never owns (and so
  // never destroys) the dispatcher or the compiler thread it runs on.
  struct Table {
    Table(double min_share, double payback, int64_t assumed_compile_nanos)
        : payback(min_share, payback, assumed_compile_nanos) {}
    std::mutex mu;  // guards entries, lru, first_key, varying and calls
    int64_t calls = 0;  // calls that looked up the table (which of them the payback rule times)
    std::unordered_map<uint64_t, Entry> entries;
    std::list<uint64_t> lru;                                  // most recent first
    std::vector<int64_t> first_key;                           // the first key seen
    std::vector<bool> varying;  // key positions seen with a value other than first_key's
    std::vector<std::unique_ptr<HintVariant>> hint_variants;  // fixed after Create
    std::shared_ptr<DispatchCounters> counters;
    PaybackAccount payback;
    bool measure_compiles = true;  // false with an injected clock: compiles cost the assumption

    // The generic variant. `generic` is published (release) after generic_code is written and
    // replaced only under generic_mu, by the tier-up.
    std::atomic<KernelFn> generic{nullptr};
    std::atomic<bool> generic_final{false};  // optimized (or tier-up attempted): stop counting
    std::atomic<bool> tier_up_started{false};
    std::atomic<int64_t> generic_calls{0};  // calls served by the first tier
    std::mutex generic_mu;
    KernelRef generic_code;
    Status generic_error;
  };
  // Everything a compile task needs, copied so that it does not touch the dispatcher.
  struct CompileJob {
    std::shared_ptr<Engine> engine;
    std::shared_ptr<DispatchCounters> counters;
    Kernel kernel;
    std::vector<DimBinding> bindings;
    std::vector<int> key_offset;
  };

  KernelDispatcher() = default;
  StatusOr<KernelFn> Generic();
  // Under table_->generic_mu, with no generic variant yet: compiles it at `tier`.
  StatusOr<KernelFn> CompileGeneric(Tier tier);
  // Counts a call served by a first-tier generic variant and starts the tier-up at the
  // threshold.
  void CountFirstTierCall();
  KernelFn FindHintVariant(const int64_t* key) const;
  // Under table_->mu: the specialized variant for `key` if compiled, counting the call and
  // returning *submit = the entry's hash when it just became hot.
  // `*price` is the payback credit the submission spent.
  KernelFn Lookup(const int64_t* key, bool* submit, uint64_t* hash, Entry** hot,
                  KernelRef* evicted, int64_t* price);
  void SubmitSpecialization(uint64_t hash, const Entry& entry, const int64_t* key, int64_t price);
  CompileJob Job() const;

  std::shared_ptr<Engine> engine_;
  std::shared_ptr<BackgroundCompiler> compiler_;
  std::shared_ptr<DispatchCounters> counters_;
  KernelPayload payload_;
  DispatchOptions options_;
  int key_size_ = 0;
  std::vector<int> key_offset_;  // per buffer: first key position of its dims

  std::shared_ptr<Table> table_;
};

}  // namespace kiln::jit

#endif  // KILN_JIT_DISPATCH_H_
