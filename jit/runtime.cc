// kiln_parallel_for on OpenMP, stopping between pieces of work once the run's deadline passes;
// kiln_index_error and the thread-local KernelErrorScope it reports to.
#include "jit/runtime.h"

#include <omp.h>

#include <algorithm>

#include "base/deadline.h"

namespace {

using kiln::Clock;
using kiln::jit::KernelErrorScope;

thread_local KernelErrorScope* current_scope = nullptr;

// Makes a team thread report to the calling thread's scope for the duration of its chunk.
class AdoptScope {
 public:
  explicit AdoptScope(KernelErrorScope* scope) : previous_(KernelErrorScope::Exchange(scope)) {}
  ~AdoptScope() { KernelErrorScope::Exchange(previous_); }

 private:
  KernelErrorScope* previous_;
};

// Pieces a range is cut into when the run has a deadline, so a long kernel notices it: up to
// this many per thread, each at least one grain. Without a deadline a thread runs its range in
// one call, as before.
constexpr int64_t kPiecesPerThread = 8;

// Runs [lo, hi) in pieces of at least `grain`, skipping the rest once `deadline` has passed.
// The VM checks the deadline after the kernel returns and discards its outputs, so skipped
// iterations are never observed.
void RunPieces(int64_t lo, int64_t hi, int64_t grain, Clock::time_point deadline,
               KilnParallelBody body, void* ctx) {
  int64_t n = hi - lo;
  if (deadline == Clock::time_point::max()) {
    body(lo, hi, ctx);
    return;
  }
  int64_t pieces = std::max<int64_t>(1, std::min(kPiecesPerThread, n / grain));
  int64_t size = n / pieces, extra = n % pieces;
  for (int64_t p = 0, start = lo; p < pieces; ++p) {
    if (kiln::DeadlineNow() >= deadline) return;
    int64_t end = start + size + (p < extra ? 1 : 0);
    body(start, end, ctx);
    start = end;
  }
}

}  // namespace

extern "C" void kiln_parallel_for(int64_t begin, int64_t end, int64_t grain, KilnParallelBody body,
                                  void* ctx) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  // Read on the calling thread: the team's threads do not share its thread-locals.
  const Clock::time_point deadline = kiln::CurrentDeadline();
  KernelErrorScope* const scope = KernelErrorScope::Current();
  int64_t max_chunks = std::min<int64_t>(omp_get_max_threads(), n / grain);
  if (max_chunks < 2 || omp_in_parallel()) {
    RunPieces(begin, end, grain, deadline, body, ctx);
    return;
  }
#pragma omp parallel num_threads(static_cast <int>(max_chunks))
  {
    // Static, balanced split: the first n % k chunks get one extra iteration.
    int64_t k = omp_get_num_threads();
    int64_t t = omp_get_thread_num();
    int64_t size = n / k, extra = n % k;
    int64_t lo = begin + t * size + std::min(t, extra);
    int64_t hi = lo + size + (t < extra ? 1 : 0);
    if (lo < hi) {
      AdoptScope adopt(scope);
      RunPieces(lo, hi, grain, deadline, body, ctx);
    }
  }
}

extern "C" void kiln_index_error(int64_t index, int64_t bound, int32_t site) {
  if (KernelErrorScope* scope = KernelErrorScope::Current()) scope->Report({index, bound, site});
}

extern "C" void kiln_range_error(int64_t value, int64_t bound, int32_t site, int64_t position) {
  if (KernelErrorScope* scope = KernelErrorScope::Current())
    scope->Report({value, bound, site, position});
}

namespace kiln::jit {

void* ParallelForAddress() { return reinterpret_cast<void*>(&kiln_parallel_for); }
void* IndexErrorAddress() { return reinterpret_cast<void*>(&kiln_index_error); }
void* RangeErrorAddress() { return reinterpret_cast<void*>(&kiln_range_error); }

KernelErrorScope::KernelErrorScope() : previous_(Exchange(this)) {}
KernelErrorScope::~KernelErrorScope() { Exchange(previous_); }

KernelErrorScope* KernelErrorScope::Current() { return current_scope; }

KernelErrorScope* KernelErrorScope::Exchange(KernelErrorScope* scope) {
  KernelErrorScope* previous = current_scope;
  current_scope = scope;
  return previous;
}

void KernelErrorScope::Report(const IndexError& e) {
  int expected = 0;
  if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  error_ = e;
  state_.store(2, std::memory_order_release);
}

Status KernelErrorScope::ToStatus(const std::vector<std::string>& sites) const {
  if (!failed()) return Status::Ok();
  const IndexError& e = error_;
  std::string site = e.site >= 0 && static_cast<size_t>(e.site) < sites.size()
                         ? sites[e.site]
                         : std::string("an indexing op");
  if (e.position >= 0) {
    return InvalidArgument(site + "[" + std::to_string(e.position) + "] = " +
                           std::to_string(e.index) + " is outside the inclusive range [0," +
                           std::to_string(e.bound - 1) + "]");
  }
  return InvalidArgument(site + ": indices element out of data bounds, idx=" +
                         std::to_string(e.index) + " must be within the inclusive range [" +
                         std::to_string(-e.bound) + "," + std::to_string(e.bound - 1) + "]");
}

}  // namespace kiln::jit
