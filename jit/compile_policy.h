// Bounded specialization: when a kernel's run time pays for a compile, and how much background
// compile CPU a process may spend. Pure bookkeeping (no LLVM, no clocks of its own), so that
// tests drive it with made-up times.
#ifndef KILN_JIT_COMPILE_POLICY_H_
#define KILN_JIT_COMPILE_POLICY_H_

#include <atomic>
#include <cstdint>

namespace kiln::jit {

/// The payback rule of one kernel: whether a specialized variant is worth its compile.
///
/// A specialization speeds up one kernel; what that buys is bounded by the kernel's share of the
/// run time, and what it costs is a compile. So a kernel records the run time of each of its calls
/// (Record), and a specialization of it is compiled (TrySpend) only when both hold:
///  - share: the kernel's run time is at least `min_share` of the run time of all kernels (the
///    caller passes that total). The kernels never specialized then together take little of the
///    run, so leaving them generic costs little latency whatever their number (bert_tiny has
///    ~25 kernels under 1% each, every one compiled ~10 times over a sweep of seq 1..256);
///  - credit: the kernel's run time on code that is not specialized, less what earlier
///    specializations spent, covers `payback` x the expected compile CPU time, which the request
///    then spends. A kernel that dominates the run pays at once; no kernel pays for more compile
///    time than 1/payback of the time it ran unspecialized.
/// The expected compile time is the CPU time of the kernel's latest optimized compile
/// (RecordCompile), or `assumed_compile_nanos` until there is one. Settle corrects a spend by
/// what the compile really cost (a variant another bucket had already compiled costs nothing).
/// Thread-safe (atomics). min_share <= 0 and payback <= 0 turn the two conditions off.
class PaybackAccount {
 public:
  PaybackAccount(double min_share, double payback, int64_t assumed_compile_nanos)
      : min_share_(min_share), payback_(payback), expected_(assumed_compile_nanos) {}

  /// Adds the run time of one call; `specialized`: served by a specialized variant (which earns
  /// no credit: its shape needs nothing more).
  void Record(int64_t run_nanos, bool specialized) {
    run_.fetch_add(run_nanos, std::memory_order_relaxed);
    if (!specialized) credit_.fetch_add(run_nanos, std::memory_order_relaxed);
  }
  /// Whether a compile is paid for, given the run time of all kernels so far; if so its price
  /// (payback x expected compile time) is spent and returned in *price (0 with payback off).
  bool TrySpend(int64_t all_kernels_run_nanos, int64_t* price);
  /// Corrects a spend of `price` once the compile took `cpu_nanos`: refunds or charges the
  /// difference (payback x cpu_nanos is the real price).
  void Settle(int64_t price, int64_t cpu_nanos);
  /// Records an optimized compile of this kernel's code (the generic variant or a specialized
  /// one) that took `cpu_nanos`: the next expected compile time. Compiles under `kMinMeasured`
  /// (loads from the persistent cache, code shared with another variant) say nothing about LLVM's
  /// cost and are ignored.
  void RecordCompile(int64_t cpu_nanos);

  /// Whether calls need timing at all.
  bool enabled() const { return min_share_ > 0 || payback_ > 0; }
  int64_t run_nanos() const { return run_.load(std::memory_order_relaxed); }
  int64_t credit() const { return credit_.load(std::memory_order_relaxed); }
  int64_t expected_compile_nanos() const { return expected_.load(std::memory_order_relaxed); }

  static constexpr int64_t kMinMeasured = 2'000'000;  // 2 ms

 private:
  const double min_share_, payback_;
  std::atomic<int64_t> run_{0}, credit_{0};
  std::atomic<int64_t> expected_;
};

/// A cap on the CPU the background compiler spends: a token bucket that refills at `share` CPU
/// seconds per wall second up to `share` x `window` (the burst a quiet process may spend at
/// once), and that each compile drains by its measured CPU time. A task starts only while the
/// bucket is not in debt; Delay says how long to wait before the next. Not thread-safe (used by
/// the one compiler thread); times are nanoseconds on any monotonic clock the caller picks.
/// share <= 0 or >= 1 is no cap (a thread cannot use more than one core).
class CpuBudget {
 public:
  CpuBudget(double share, int64_t window_nanos);
  /// Nanoseconds to wait at `now` before the next task may start (0: start now).
  int64_t Delay(int64_t now);
  /// Charges a task that ended at `now` and used `cpu_nanos` of CPU.
  void Charge(int64_t now, int64_t cpu_nanos);
  bool capped() const { return share_ > 0 && share_ < 1; }

 private:
  void Refill(int64_t now);

  double share_;
  double capacity_;  // nanoseconds of CPU
  double tokens_;
  int64_t last_ = -1;
};

}  // namespace kiln::jit

#endif  // KILN_JIT_COMPILE_POLICY_H_
