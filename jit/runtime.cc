// kiln_parallel_for on OpenMP, balanced by threads taking the pieces others have not begun and
// stopping between pieces once the run's deadline passes; teams with a barrier
// (kiln_parallel_team); kiln_index_error and the thread-local KernelErrorScope it reports to.
#include "jit/runtime.h"

#include <linux/futex.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

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
// this many per thread, each at least one grain. A serial range without a deadline runs in one
// call.
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

// Pieces per thread kiln_parallel_for cuts a range into without a deadline, when the range
// holds that many grains: enough that a thread which finishes its own can take over the part of
// a descheduled or slowed team-mate's range it has not begun.
constexpr int64_t kBalancePiecesPerThread = 4;

// [begin, begin + n) cut into `count` balanced pieces (the first n % count one iteration
// longer), dealt to `threads` threads in contiguous blocks as the static split dealt its ranges.
// Each thread runs its own block in order (the same memory as that static split on an idle
// host), then claims the pieces left in the others' blocks: a thread that OpenMP started late,
// that runs on a core shared with another process, or that OpenMP never gave, leaves its
// unclaimed pieces to the running ones. A piece is claimed by one fetch_add on its block's
// counter, so each runs exactly once.
class Pieces {
 public:
  Pieces(int64_t begin, int64_t n, int64_t count, int64_t threads)
      : begin_(begin), size_(n / count), extra_(n % count), blocks_(threads) {
    for (int64_t t = 0; t < threads; ++t) {
      blocks_[t].next.store(count * t / threads, std::memory_order_relaxed);
      blocks_[t].end = count * (t + 1) / threads;
    }
  }

  // Runs pieces as thread `t` of the team, its own block first, until none is left or until
  // `deadline` has passed. The blocks of threads OpenMP did not start are taken like any other.
  // Returns how many it ran.
  int64_t Run(int64_t t, Clock::time_point deadline, KilnParallelBody body, void* ctx) {
    const int64_t blocks = static_cast<int64_t>(blocks_.size());
    int64_t ran = 0;
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t b = (t + i) % blocks;
      Block& block = blocks_[b];
      while (block.next.load(std::memory_order_relaxed) < block.end) {
        if (deadline != Clock::time_point::max() && kiln::DeadlineNow() >= deadline) return ran;
        const int64_t p = block.next.fetch_add(1, std::memory_order_relaxed);
        if (p >= block.end) break;
        const int64_t lo = begin_ + p * size_ + std::min(p, extra_);
        body(lo, lo + size_ + (p < extra_ ? 1 : 0), ctx);
        ++ran;
      }
    }
    return ran;
  }

 private:
  struct alignas(64) Block {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  const int64_t begin_, size_, extra_;
  std::vector<Block> blocks_;
};

// Loops whose team keeps starting late cost more than they save. On a host with more runnable
// threads than cores a team-mate waits for a time slice before it starts (or, as libgomp starts
// a team only once every thread of the last one is back in its pool, makes the calling thread
// wait); meanwhile OpenMP's waiting threads poll (GOMP_SPINCOUNT) on the cores the late one
// needs. masked_encoder at --threads 2 beside a busy loop on one of 2 cores: 5-19 ms, against
// 2.2 ms on one thread. A loop is late when one of its threads entered more than kLateStartNs
// after the call (a futex wake-up on an idle core takes tens of microseconds) and found every
// piece taken: the team cost a wait and bought nothing. (A late thread that still found work
// paid for itself: gpt_tiny's 8000-wide projection at load 13-30 ran 2-3x slower on the
// calling thread alone.) When kLateLoops of the last 8 parallel loops were late, the next
// kSoloLoops loops run on their calling thread, after which a team is tried again.
constexpr int64_t kLateStartNs = 250'000;
constexpr int kLateLoops = 2;
constexpr int64_t kSoloLoops = 256;
std::atomic<uint32_t> late_loops{0};  // one bit per parallel loop, the latest lowest
std::atomic<int64_t> solo_loops_left{0};

// Whether a team may run now: false (taking one of its turns) while `solo_left`, the calls left
// to run on their calling thread after teams kept costing more than they saved, is positive.
bool TeamsPayNow(std::atomic<int64_t>& solo_left) {
  int64_t left = solo_left.load(std::memory_order_relaxed);
  while (left > 0) {
    if (solo_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return false;
  }
  return true;
}

bool LoopTeamsPay() { return TeamsPayNow(solo_loops_left); }

void NoteLoop(bool late) {
  uint32_t history = late_loops.load(std::memory_order_relaxed), next;
  do {
    next = (history << 1 | (late ? 1u : 0u)) & 0xffu;
  } while (!late_loops.compare_exchange_weak(history, next, std::memory_order_relaxed));
  if (late && __builtin_popcount(next) >= kLateLoops) {
    late_loops.store(0, std::memory_order_relaxed);
    solo_loops_left.store(kSoloLoops, std::memory_order_relaxed);
  }
}

// On the deadline clock, so that a test can make a team late.
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             kiln::DeadlineNow().time_since_epoch())
      .count();
}

// A team of kiln_parallel_team: a generation-counting barrier whose last arriver decides,
// for the whole team, whether the run's deadline has passed. A member that returns from its
// body departs: it no longer counts at barriers, so a body whose threads disagree on the
// number of barriers (a malformed kernel) ends instead of hanging.
struct Team {
  Team(Clock::time_point d, int64_t members)
      : deadline(d), state(static_cast<uint64_t>(members) << 32) {}
  const Clock::time_point deadline;
  // Members still taking part (high 32 bits) and those arrived at the current barrier (low).
  alignas(64) std::atomic<uint64_t> state;
  alignas(64) std::atomic<uint32_t> generation{0};  // the futex word
  std::atomic<int32_t> sleepers{0};
  std::atomic<bool> stopped{false};
  std::atomic<int64_t> barriers{0}, sleeps{0};  // for TeamsPay
};

// Teams whose members keep finding a team-mate descheduled cost far more than they save: every
// step waits for a time slice (lstm_lm at --threads 2 on a host at load 11: 68 ms against 25 ms
// on one thread). A team call in which more than one barrier in 8 had to sleep makes the next
// kSoloCalls calls run on their calling thread alone, after which a team is tried again.
constexpr int64_t kSoloCalls = 64;
std::atomic<int64_t> solo_calls_left{0};

bool TeamsPay() { return TeamsPayNow(solo_calls_left); }

void NoteTeam(const Team& team) {
  const int64_t barriers = team.barriers.load(std::memory_order_relaxed);
  if (barriers >= 8 && team.sleeps.load(std::memory_order_relaxed) * 8 > barriers) {
    solo_calls_left.store(kSoloCalls, std::memory_order_relaxed);
  }
}

uint64_t Present(uint64_t state) { return state >> 32; }
uint64_t Arrived(uint64_t state) { return state & 0xffffffffu; }

// A thread's place in a team: the size is read by each member from OpenMP (every member sees
// the same), so nothing shared is written before the first barrier.
struct Seat {
  Team* team;
  int64_t size;
};

thread_local Seat* current_seat = nullptr;

// Makes `seat` the calling thread's innermost team for the duration of a member's body.
class TakeSeat {
 public:
  explicit TakeSeat(Seat* seat) : previous_(current_seat) { current_seat = seat; }
  ~TakeSeat() { current_seat = previous_; }

 private:
  Seat* previous_;
};

// Polls before sleeping: a team-mate that is running arrives within a step's work (micro-
// seconds); one that was descheduled may take a time slice, which the waiter sleeps through
// rather than burning the core the team-mate needs. ~75 us at ~25 ns a poll on a Zen 3, the
// bound kiln gives libgomp's own waits (embed/omp_wait.h, kOmpSpinCountDefault).
constexpr int kSpinPolls = 3000;

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

uint32_t* FutexWord(std::atomic<uint32_t>* a) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(a);
}

void WaitForGeneration(Team* team, uint32_t gen) {
  for (int i = 0; i < kSpinPolls; ++i) {
    if (team->generation.load(std::memory_order_acquire) != gen) return;
    CpuRelax();
  }
  // seq_cst on both sides (sleepers then generation here; generation then sleepers in
  // Release) means the waker either sees this sleeper or this thread sees the new generation.
  team->sleeps.fetch_add(1, std::memory_order_relaxed);
  team->sleepers.fetch_add(1, std::memory_order_seq_cst);
  while (team->generation.load(std::memory_order_seq_cst) == gen) {
    syscall(SYS_futex, FutexWord(&team->generation), FUTEX_WAIT_PRIVATE, gen, nullptr, nullptr, 0);
  }
  team->sleepers.fetch_sub(1, std::memory_order_relaxed);
}

bool PastDeadline(const Team& team) {
  return team.deadline != Clock::time_point::max() && kiln::DeadlineNow() >= team.deadline;
}

// Ends barrier `gen`, which `arrived` members reached: decides the deadline for all of them,
// then lets them go. Returns what they return.
int32_t Release(Team* team, uint32_t gen, uint64_t arrived) {
  team->state.fetch_sub(arrived, std::memory_order_relaxed);  // no one arrives until `gen` ends
  team->barriers.fetch_add(1, std::memory_order_relaxed);
  const bool stop = PastDeadline(*team);
  if (stop) team->stopped.store(true, std::memory_order_relaxed);
  team->generation.store(gen + 1, std::memory_order_seq_cst);
  if (team->sleepers.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, FutexWord(&team->generation), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
  }
  return stop ? 0 : 1;
}

int32_t Barrier(Seat* seat) {
  Team* team = seat->team;
  // Set by a barrier every member has passed, so each member reads it the same from here on.
  if (team->stopped.load(std::memory_order_acquire)) return 0;
  if (seat->size == 1) {
    if (PastDeadline(*team)) team->stopped.store(true, std::memory_order_relaxed);
    return team->stopped.load(std::memory_order_relaxed) ? 0 : 1;
  }
  // The generation cannot move before this member arrives (or departs).
  const uint32_t gen = team->generation.load(std::memory_order_acquire);
  const uint64_t before = team->state.fetch_add(1, std::memory_order_acq_rel);
  if (Arrived(before) + 1 == Present(before)) return Release(team, gen, Arrived(before) + 1);
  WaitForGeneration(team, gen);
  return team->stopped.load(std::memory_order_acquire) ? 0 : 1;
}

// `count` members stop taking part (they returned, or OpenMP never started them); when every
// remaining member is already waiting, the barrier ends here.
void Depart(Team* team, uint64_t count) {
  const uint32_t gen = team->generation.load(std::memory_order_acquire);
  const uint64_t before = team->state.fetch_sub(count << 32, std::memory_order_acq_rel);
  const uint64_t arrived = Arrived(before);
  if (arrived > 0 && arrived == Present(before) - count) Release(team, gen, arrived);
}

}  // namespace

extern "C" void kiln_parallel_team(int64_t begin, int64_t max_threads, KilnParallelBody body,
                                   void* ctx) {
  if (max_threads < 1) return;
  const Clock::time_point deadline = kiln::CurrentDeadline();
  KernelErrorScope* const scope = KernelErrorScope::Current();
  const int64_t want = std::min<int64_t>(max_threads, omp_get_max_threads());
  if (want < 2 || omp_in_parallel() || !TeamsPay()) {
    Team team(deadline, 1);
    Seat seat{&team, 1};
    TakeSeat take(&seat);
    body(begin, begin + 1, ctx);
    return;
  }
  Team team(deadline, want);
#pragma omp parallel num_threads(static_cast <int>(want))
  {
    const int64_t n = omp_get_num_threads(), t = omp_get_thread_num();
    if (t == 0 && n < want) Depart(&team, static_cast<uint64_t>(want - n));
    Seat seat{&team, n};
    {
      AdoptScope adopt(scope);
      TakeSeat take(&seat);
      body(begin + t, begin + t + 1, ctx);
    }
    Depart(&team, 1);
  }
  NoteTeam(team);
}

extern "C" int64_t kiln_team_size(void) { return current_seat ? current_seat->size : 1; }

extern "C" int32_t kiln_team_barrier(void) { return current_seat ? Barrier(current_seat) : 1; }

extern "C" void kiln_parallel_for(int64_t begin, int64_t end, int64_t grain, KilnParallelBody body,
                                  void* ctx) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  // Read on the calling thread: the team's threads do not share its thread-locals.
  const Clock::time_point deadline = kiln::CurrentDeadline();
  KernelErrorScope* const scope = KernelErrorScope::Current();
  int64_t threads = std::min<int64_t>(omp_get_max_threads(), n / grain);
  if (threads < 2 || omp_in_parallel() || !LoopTeamsPay()) {
    RunPieces(begin, end, grain, deadline, body, ctx);
    return;
  }
  const int64_t per_thread =
      deadline == Clock::time_point::max() ? kBalancePiecesPerThread : kPiecesPerThread;
  Pieces pieces(begin, n, std::min(threads * per_thread, n / grain), threads);
  const int64_t start = NowNs();
  std::atomic<bool> late{false};
#pragma omp parallel num_threads(static_cast <int>(threads))
  {
    const bool entered_late = NowNs() - start > kLateStartNs;
    AdoptScope adopt(scope);
    if (pieces.Run(omp_get_thread_num(), deadline, body, ctx) == 0 && entered_late) {
      late.store(true, std::memory_order_relaxed);
    }
  }
  NoteLoop(late.load(std::memory_order_relaxed));
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
void* ParallelTeamAddress() { return reinterpret_cast<void*>(&kiln_parallel_team); }
void* TeamSizeAddress() { return reinterpret_cast<void*>(&kiln_team_size); }
void* TeamBarrierAddress() { return reinterpret_cast<void*>(&kiln_team_barrier); }
void ForgetLateLoopsForTesting() {
  late_loops.store(0, std::memory_order_relaxed);
  solo_loops_left.store(0, std::memory_order_relaxed);
}

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
