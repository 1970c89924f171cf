// Runtime helpers that JIT-compiled kernels call (C ABI, resolved by the ORC engine), and the
// per-call error slot through which a kernel reports an index it could not use.
#ifndef KILN_JIT_RUNTIME_H_
#define KILN_JIT_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

extern "C" {

/// Body of an outlined parallel loop: runs iterations [begin, end) with its captured context.
typedef void (*KilnParallelBody)(int64_t begin, int64_t end, void* ctx);

/// Runs `body` over [begin, end) on the OpenMP team (the pool oneDNN shares, so threads are not
/// oversubscribed), in contiguous pieces of at least `grain` iterations: up to 4 per thread (8
/// when the run has a deadline), each thread first running those of its own share of the range
/// (the static split's), then taking the pieces other threads have not begun, so a thread that
/// starts late or runs on a busy core leaves its work to the others. Runs serially, in the
/// calling thread, when the range is below two grains, when OpenMP offers one thread, when
/// called from inside a parallel region, and for the next 256 calls after 2 of the last 8 in
/// which a thread of the team entered more than 250 us late (on the deadline clock,
/// base/deadline.h) and found every piece taken: a loaded host, where the team waits for time
/// slices and buys nothing. Every iteration runs exactly once, by the same body whatever the
/// split; returns after all have finished. Thread-safe. An empty range calls nothing.
/// Deadlines: when the calling thread's VM run has one (base/deadline.h), each thread checks it
/// before each piece (a serial range is cut into up to 8 pieces of at least `grain`) and skips
/// the pieces left once it has passed; the VM then fails the run with DeadlineExceeded, so the
/// partial output is never seen.
/// The threads of the team run inside the calling thread's KernelErrorScope.
void kiln_parallel_for(int64_t begin, int64_t end, int64_t grain, KilnParallelBody body, void* ctx);

/// Runs `body(begin + i, begin + i + 1, ctx)` once on each thread i of a team of n threads,
/// all at once, 1 <= n <= max_threads: n is min(max_threads, OpenMP's threads) and OpenMP may
/// give fewer; n is 1 (the calling thread) when called from inside a parallel region (a
/// kiln_parallel_for chunk or another team), and for the next 64 calls after one in which more
/// than one barrier in 8 found a team-mate descheduled (a loaded host: each step would wait for
/// a time slice). Nothing runs when max_threads < 1. Inside `body`,
/// kiln_team_size() is n and kiln_team_barrier() synchronizes the team (ForKind::kTeam loops).
/// Returns after every thread has finished. Thread-safe; the team's threads run inside the
/// calling thread's KernelErrorScope, and its barriers stop the team once the calling thread's
/// run deadline (base/deadline.h) has passed.
void kiln_parallel_team(int64_t begin, int64_t max_threads, KilnParallelBody body, void* ctx);

/// The size n of the calling thread's innermost team (1 outside any team).
int64_t kiln_team_size(void);

/// Waits until all n threads of the calling thread's team have called it as often as this one,
/// then returns 1, or 0 when the run's deadline had passed at that barrier (decided once, by the
/// last thread to arrive, so the whole team agrees); after a 0 every later call of that team
/// returns 0 at once, so threads that skip their remaining work still never wait for each
/// other. Waiting spins briefly, then sleeps on a futex: a descheduled team-mate costs the
/// waiter no CPU. With n == 1 (or outside a team) it only checks the deadline.
int32_t kiln_team_barrier(void);

/// Called by a kernel's CheckIndex (ExprOp::kCheckIndex) when `index` (as read, before negative
/// values are counted from the end) is outside [-bound, bound): records the first such report
/// in the innermost KernelErrorScope of the calling thread (ignored when there is none).
/// `site` numbers the kernel's IndexCheckSites. Thread-safe; never fails.
void kiln_index_error(int64_t index, int64_t bound, int32_t site);

/// Called by a kernel's CheckInRange when `value` is outside [0, bound): as kiln_index_error,
/// with the `position` (>= 0) of the element that held it.
void kiln_range_error(int64_t value, int64_t bound, int32_t site, int64_t position);

}  // extern "C"

namespace kiln::jit {

/// Address of kiln_parallel_for, for the engine's symbol table (it need not be exported).
void* ParallelForAddress();
/// Addresses of kiln_parallel_team, kiln_team_size and kiln_team_barrier, likewise.
void* ParallelTeamAddress();
void* TeamSizeAddress();
void* TeamBarrierAddress();
/// Test hook: forgets the late team starts kiln_parallel_for has counted and ends a run of
/// serial calls, so that its next calls use a team again. Thread-safe.
void ForgetLateLoopsForTesting();

/// Address of kiln_index_error, likewise.
void* IndexErrorAddress();
/// Address of kiln_range_error, likewise.
void* RangeErrorAddress();

/// What a kernel reported through kiln_index_error.
struct IndexError {
  int64_t index = 0;
  int64_t bound = 0;
  int32_t site = -1;
  int64_t position = -1;  // kiln_range_error's position; -1 from kiln_index_error
};

/// The error slot of the kernel calls made on this thread while it lives (and on the threads
/// their parallel loops use): whoever calls a kernel holds one and, after the call, discards
/// the outputs and fails when `failed()`. Scopes nest; the innermost receives the reports.
/// Costs two thread-local writes. Not copyable; destroyed on the thread that made it.
class KernelErrorScope {
 public:
  KernelErrorScope();
  ~KernelErrorScope();
  KernelErrorScope(const KernelErrorScope&) = delete;
  KernelErrorScope& operator=(const KernelErrorScope&) = delete;

  /// True once a kernel reported; read after the calls returned (their threads have joined).
  bool failed() const { return state_.load(std::memory_order_acquire) == 2; }
  /// The first report (meaningful when failed()).
  const IndexError& error() const { return error_; }
  /// InvalidArgument in ONNX Runtime's words: "<site>: indices element out of data bounds,
  /// idx=8000 must be within the inclusive range [-8000,7999]", the site taken from `sites`
  /// (the kernel's IndexCheckSites) or "an indexing op" when it is not there. A CheckInRange
  /// report reads "<site>[<position>] = 7 is outside the inclusive range [0,4]" (its site names
  /// the node and the tensor: "ReverseSequence node 'r': sequence_lens"). Ok if !failed().
  Status ToStatus(const std::vector<std::string>& sites) const;

  /// Records `e` unless a report came first (kiln_index_error's work).
  void Report(const IndexError& e);
  /// The innermost scope of this thread, or null.
  static KernelErrorScope* Current();
  /// Makes `scope` this thread's current one and returns the previous (kiln_parallel_for's
  /// hand-over to the threads of its team).
  static KernelErrorScope* Exchange(KernelErrorScope* scope);

 private:
  std::atomic<int> state_{0};  // 0 clear, 1 being written, 2 written
  IndexError error_;
  KernelErrorScope* previous_ = nullptr;
};

}  // namespace kiln::jit

#endif  // KILN_JIT_RUNTIME_H_
