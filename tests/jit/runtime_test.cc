// kiln_parallel_for: every iteration exactly once, pieces skipped once the run's deadline passed,
// kiln_index_error reports reaching the calling thread's KernelErrorScope from the team, a
// running thread taking the pieces a blocked one has not begun, and serial loops after late
// teams;
// kiln_parallel_team: every member once, barriers that order phases, one thread inside a
// parallel region, and a deadline that stops the whole team at the same barrier.
#define BOOST_TEST_MODULE runtime_test
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <omp.h>

#include "base/deadline.h"
#include "jit/runtime.h"

namespace kiln::jit {
namespace {

// A clock that only moves when a piece of work says so (ScopedDeadlineClockForTesting), so the
// deadline tests do not race the wall clock: under load a thread may start its first piece only
// after a real deadline has passed.
std::atomic<int64_t> fake_ms{0};
Clock::time_point FakeNow() { return Clock::time_point(std::chrono::milliseconds(fake_ms.load())); }

struct Counts {
  std::vector<std::atomic<int>> hits;
  int64_t advance_ms = 0;  // what each call "takes" on the fake clock
  std::atomic<int> calls{0};
  explicit Counts(int n) : hits(n) {}
};

void Body(int64_t begin, int64_t end, void* ctx) {
  auto* c = static_cast<Counts*>(ctx);
  ++c->calls;
  for (int64_t i = begin; i < end; ++i) ++c->hits[i];
  fake_ms += c->advance_ms;
}

int Total(const Counts& c) {
  int t = 0;
  for (const auto& h : c.hits) t += h.load();
  return t;
}

BOOST_AUTO_TEST_CASE(every_iteration_once_without_deadline) {
  Counts c(1000);
  kiln_parallel_for(0, 1000, 10, &Body, &c);
  for (const auto& h : c.hits) BOOST_REQUIRE_EQUAL(h.load(), 1);
}

BOOST_AUTO_TEST_CASE(every_iteration_once_before_a_far_deadline) {
  ScopedDeadline deadline(Clock::now() + std::chrono::hours(1));
  Counts c(1000);
  kiln_parallel_for(0, 1000, 10, &Body, &c);
  for (const auto& h : c.hits) BOOST_REQUIRE_EQUAL(h.load(), 1);
  // Cut into pieces (at most 8 per thread) so a deadline could be noticed between them.
  BOOST_TEST(c.calls.load() > 1);
}

BOOST_AUTO_TEST_CASE(nothing_runs_after_the_deadline) {
  ScopedDeadline deadline(Clock::now() - std::chrono::milliseconds(1));
  Counts c(1000);
  kiln_parallel_for(0, 1000, 10, &Body, &c);
  BOOST_TEST(Total(c) == 0);
}

// Each piece "takes" 20 ms of the fake clock; with a deadline 30 ms away the loop stops after
// the pieces that started before it. The loop's first check sees the start time (time moves
// only inside a piece), so at least one piece runs. A piece starts only while fewer than two
// pieces have finished: one per thread, plus one more by the first thread to finish. That is far
// short of the 8 pieces per thread the loop would otherwise run.
BOOST_AUTO_TEST_CASE(a_long_loop_stops_between_pieces) {
  ScopedDeadlineClockForTesting clock(&FakeNow);
  Counts c(800);
  c.advance_ms = 20;
  {
    ScopedDeadline deadline(FakeNow() + std::chrono::milliseconds(30));
    kiln_parallel_for(0, 800, 1, &Body, &c);
  }
  BOOST_TEST(c.calls.load() >= 1);
  BOOST_TEST(c.calls.load() <= omp_get_max_threads() + 1);
  BOOST_TEST(Total(c) > 0);
  BOOST_TEST(Total(c) < 800);
  for (const auto& h : c.hits) BOOST_REQUIRE_LE(h.load(), 1);
}

BOOST_AUTO_TEST_CASE(scoped_deadlines_nest_and_restore) {
  BOOST_TEST((CurrentDeadline() == Clock::time_point::max()));
  auto outer = Clock::now() + std::chrono::hours(2);
  {
    ScopedDeadline a(outer);
    {
      ScopedDeadline b(Clock::now() - std::chrono::seconds(1));
      BOOST_TEST(DeadlinePassed());
    }
    BOOST_TEST((CurrentDeadline() == outer));
    BOOST_TEST(!DeadlinePassed());
  }
  BOOST_TEST((CurrentDeadline() == Clock::time_point::max()));
  BOOST_TEST(!DeadlinePassed());
}

// Iteration 990 reports: with two threads it runs on the team thread, not the caller.
void ReportingBody(int64_t begin, int64_t end, void*) {
  for (int64_t i = begin; i < end; ++i) {
    if (i == 990) kiln_index_error(i, 7, 3);
  }
}

BOOST_AUTO_TEST_CASE(index_errors_reach_the_callers_scope_from_team_threads) {
  KernelErrorScope errors;
  kiln_parallel_for(0, 1000, 10, &ReportingBody, nullptr);
  BOOST_REQUIRE(errors.failed());
  BOOST_TEST(errors.error().index == 990);
  BOOST_TEST(errors.error().bound == 7);
  BOOST_TEST(errors.error().site == 3);
  // Every thread of the team runs its chunk in the caller's scope.
  KernelErrorScope* seen = &errors;
  kiln_parallel_for(0, 1000, 10, [](int64_t, int64_t, void* ctx) {
    if (KernelErrorScope::Current() != *static_cast<KernelErrorScope**>(ctx)) std::abort();
  }, &seen);
}

BOOST_AUTO_TEST_CASE(index_errors_without_a_scope_are_dropped) {
  BOOST_REQUIRE(KernelErrorScope::Current() == nullptr);
  kiln_parallel_for(0, 1000, 10, &ReportingBody, nullptr);
  KernelErrorScope errors;
  BOOST_TEST(!errors.failed());
}

// ---- Balance: threads take the pieces others have not begun ----

// Thread 1's first piece blocks until every other iteration has run, so the loop finishes only
// if thread 0 takes the rest of thread 1's share. The wait is bounded: a split that leaves
// pieces to the blocked thread fails the test instead of hanging it.
struct Blocking {
  explicit Blocking(int n) : hits(n) {}
  std::vector<std::atomic<int>> hits;
  std::atomic<int64_t> done{0};
  std::atomic<bool> blocked_once{false}, gave_up{false};
  std::atomic<int64_t> blocked_piece{0};
};

void BlockingBody(int64_t begin, int64_t end, void* ctx) {
  auto* b = static_cast<Blocking*>(ctx);
  const int64_t n = static_cast<int64_t>(b->hits.size());
  if (omp_get_thread_num() == 1 && !b->blocked_once.exchange(true)) {
    b->blocked_piece = end - begin;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (b->done.load() < n - (end - begin)) {
      if (std::chrono::steady_clock::now() > give_up) {
        b->gave_up = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  for (int64_t i = begin; i < end; ++i) ++b->hits[i];
  b->done += end - begin;
}

void CheckTheOthersTookOver(bool with_deadline) {
  ForgetLateLoopsForTesting();
  BOOST_REQUIRE_EQUAL(omp_get_max_threads(), 2);
  Blocking b(1000);
  {
    ScopedDeadline deadline(with_deadline ? Clock::now() + std::chrono::hours(1)
                                          : Clock::time_point::max());
    kiln_parallel_for(0, 1000, 10, &BlockingBody, &b);
  }
  BOOST_TEST(!b.gave_up.load());
  for (const auto& h : b.hits) BOOST_REQUIRE_EQUAL(h.load(), 1);
  // Thread 1 either blocked in a piece shorter than its half, or started after thread 0 had
  // taken every piece.
  if (b.blocked_once) BOOST_TEST(b.blocked_piece.load() < 500);
}

BOOST_AUTO_TEST_CASE(a_running_thread_takes_the_pieces_a_blocked_one_has_not_begun) {
  CheckTheOthersTookOver(false);
}

BOOST_AUTO_TEST_CASE(a_running_thread_takes_the_pieces_a_blocked_one_has_not_begun_by_deadline) {
  CheckTheOthersTookOver(true);
}

struct Pieces {
  Pieces(int64_t first, int64_t n) : first(first), hits(n) {}
  const int64_t first;  // the iteration counted in hits[0]
  std::vector<std::atomic<int>> hits;
  std::atomic<int64_t> shortest{INT64_MAX};
};

void PiecesBody(int64_t begin, int64_t end, void* ctx) {
  auto* p = static_cast<Pieces*>(ctx);
  for (int64_t i = begin; i < end; ++i) ++p->hits[i - p->first];
  int64_t seen = p->shortest.load();
  while (end - begin < seen && !p->shortest.compare_exchange_weak(seen, end - begin)) {
  }
}

// Random ranges, grains and team sizes (more threads than cores too), with and without a
// deadline: every iteration once, and no piece shorter than a grain (or the whole range).
BOOST_AUTO_TEST_CASE(every_iteration_once_for_random_ranges_grains_and_teams) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    ForgetLateLoopsForTesting();
    const int64_t n = std::uniform_int_distribution<int64_t>(0, 3000)(rng);
    const int64_t grain = std::uniform_int_distribution<int64_t>(0, 400)(rng);
    const int64_t begin = std::uniform_int_distribution<int64_t>(-50, 50)(rng);
    const int threads = std::uniform_int_distribution<int>(1, 5)(rng);
    const bool with_deadline = round % 2 == 1;
    BOOST_TEST_CONTEXT("n " << n << " grain " << grain << " begin " << begin << " threads "
                            << threads << " deadline " << with_deadline) {
      omp_set_num_threads(threads);
      Pieces p(begin, n);
      {
        ScopedDeadline deadline(with_deadline ? Clock::now() + std::chrono::hours(1)
                                              : Clock::time_point::max());
        kiln_parallel_for(begin, begin + n, grain, &PiecesBody, &p);
      }
      for (const auto& h : p.hits) BOOST_REQUIRE_EQUAL(h.load(), 1);
      if (n > 0) BOOST_TEST(p.shortest.load() >= std::min(std::max<int64_t>(grain, 1), n));
    }
  }
  omp_set_num_threads(2);
  ForgetLateLoopsForTesting();
}

// A clock that jumps 1 ms at every reading, on which a team thread other than the caller
// enters only once the caller has run every piece: the thread comes late and finds nothing left.
// The wait is bounded, so a loop that leaves it pieces fails the test instead of hanging.
struct LateTeam {
  std::atomic<int64_t> ms{0};
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> left{0};
  std::atomic<bool> gave_up{false};
};
LateTeam* late_team = nullptr;

Clock::time_point LateTeamNow() {
  if (std::this_thread::get_id() != late_team->caller) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (late_team->left.load() > 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        late_team->gave_up = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return Clock::time_point(std::chrono::milliseconds(late_team->ms.fetch_add(1)));
}

void LateTeamBody(int64_t begin, int64_t end, void*) { late_team->left -= end - begin; }

// A clock that jumps 1 ms at every reading: every thread of a team enters late.
std::atomic<int64_t> jumping_ms{0};
Clock::time_point JumpingNow() {
  return Clock::time_point(std::chrono::milliseconds(jumping_ms.fetch_add(1)));
}

// Each thread's first piece waits (bounded) until both threads of the team have begun one:
// however late either enters, each runs a piece.
struct Shared {
  static inline std::atomic<int> loops{0};
  const int loop = ++loops;
  std::atomic<int> begun{0};
  std::atomic<bool> gave_up{false};
};

void SharedBody(int64_t, int64_t, void* ctx) {
  auto* s = static_cast<Shared*>(ctx);
  thread_local int first_in = 0;  // the last loop in which this thread ran a piece
  if (first_in == s->loop) return;
  first_in = s->loop;
  ++s->begun;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (s->begun.load() < 2 && !s->gave_up) {
    if (std::chrono::steady_clock::now() > give_up) s->gave_up = true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void ThreadsBody(int64_t, int64_t, void* ctx) {
  auto* ids = static_cast<std::vector<std::thread::id>*>(ctx);
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ids->push_back(std::this_thread::get_id());
}

bool OnlyTheCaller(const std::vector<std::thread::id>& ids) {
  for (const auto& id : ids) {
    if (id != std::this_thread::get_id()) return false;
  }
  return true;
}

// Two loops in which a thread of the team came late and found every piece taken make the next
// 256 run on the calling thread (in one call each, as a serial loop), after which a team is
// tried again.
BOOST_AUTO_TEST_CASE(loops_whose_late_threads_find_nothing_run_serially_for_a_while) {
  ForgetLateLoopsForTesting();
  BOOST_REQUIRE_EQUAL(omp_get_max_threads(), 2);
  {
    LateTeam team;
    late_team = &team;
    ScopedDeadlineClockForTesting clock(&LateTeamNow);
    for (int i = 0; i < 2; ++i) {
      team.left = 1000;
      kiln_parallel_for(0, 1000, 10, &LateTeamBody, nullptr);
      BOOST_TEST(team.left.load() == 0);
    }
    BOOST_TEST(!team.gave_up.load());
    late_team = nullptr;
  }
  for (int i = 0; i < 256; ++i) {
    std::vector<std::thread::id> ids;
    kiln_parallel_for(0, 1000, 10, &ThreadsBody, &ids);
    BOOST_REQUIRE_EQUAL(ids.size(), 1u);
    BOOST_REQUIRE(OnlyTheCaller(ids));
  }
  std::vector<std::thread::id> ids;
  kiln_parallel_for(0, 1000, 10, &ThreadsBody, &ids);
  BOOST_TEST(ids.size() > 1u);  // cut into pieces again, whichever threads ran them
  ForgetLateLoopsForTesting();
}

// A late thread that still finds pieces to run paid for itself: the team stays.
BOOST_AUTO_TEST_CASE(loops_whose_late_threads_find_work_keep_their_team) {
  ForgetLateLoopsForTesting();
  BOOST_REQUIRE_EQUAL(omp_get_max_threads(), 2);
  {
    ScopedDeadlineClockForTesting clock(&JumpingNow);
    for (int i = 0; i < 8; ++i) {
      Shared shared;
      kiln_parallel_for(0, 1000, 10, &SharedBody, &shared);
      BOOST_REQUIRE(!shared.gave_up.load());
    }
  }
  std::vector<std::thread::id> ids;
  kiln_parallel_for(0, 1000, 10, &ThreadsBody, &ids);
  BOOST_TEST(ids.size() > 1u);
}

// ---- Teams ----

struct Phases {
  static constexpr int kMaxThreads = 8;
  static constexpr int kRounds = 500;
  std::atomic<int> members{0}, size_mismatches{0}, stale_reads{0}, false_barriers{0};
  std::atomic<int64_t> seen_size{0};
  std::atomic<int64_t> slot[kMaxThreads] = {};
  std::atomic<int> index_hits[kMaxThreads] = {};
};

// Round r: every member writes r into its slot, passes a barrier, then must read r in every
// slot (no member is still in round r - 1, none is already in r + 1 before the next barrier).
void PhaseBody(int64_t begin, int64_t end, void* ctx) {
  auto* p = static_cast<Phases*>(ctx);
  ++p->members;
  const int64_t n = kiln_team_size();
  if (end != begin + 1 || begin < 100 || begin - 100 >= n) ++p->size_mismatches;
  if (begin >= 100 && begin - 100 < Phases::kMaxThreads) ++p->index_hits[begin - 100];
  int64_t expected = 0;
  if (!p->seen_size.compare_exchange_strong(expected, n) && expected != n) ++p->size_mismatches;
  for (int r = 1; r <= Phases::kRounds; ++r) {
    p->slot[begin - 100].store(r, std::memory_order_relaxed);
    if (kiln_team_barrier() != 1) ++p->false_barriers;
    for (int64_t t = 0; t < n; ++t) {
      if (p->slot[t].load(std::memory_order_relaxed) != r) ++p->stale_reads;
    }
    if (kiln_team_barrier() != 1) ++p->false_barriers;
  }
}

BOOST_AUTO_TEST_CASE(a_team_runs_each_member_once_and_its_barriers_order_phases) {
  Phases p;
  kiln_parallel_team(100, 4, &PhaseBody, &p);
  const int64_t n = p.seen_size.load();
  BOOST_TEST(n >= 1);
  BOOST_TEST(n <= std::min(4, omp_get_max_threads()));
  BOOST_TEST(n == 2);  // OMP_NUM_THREADS=2 (BUILD)
  BOOST_TEST(p.members.load() == n);
  for (int64_t t = 0; t < n; ++t) BOOST_TEST(p.index_hits[t].load() == 1);
  BOOST_TEST(p.size_mismatches.load() == 0);
  BOOST_TEST(p.stale_reads.load() == 0);
  BOOST_TEST(p.false_barriers.load() == 0);
  // Outside a team: size 1, and the barrier waits for nothing.
  BOOST_TEST(kiln_team_size() == 1);
  BOOST_TEST(kiln_team_barrier() == 1);
}

BOOST_AUTO_TEST_CASE(a_team_of_at_most_one_or_inside_a_parallel_region_is_the_caller) {
  Phases one;
  kiln_parallel_team(100, 1, &PhaseBody, &one);
  BOOST_TEST(one.members.load() == 1);
  BOOST_TEST(one.seen_size.load() == 1);
  BOOST_TEST(one.stale_reads.load() == 0);
  Phases none;
  kiln_parallel_team(100, 0, &PhaseBody, &none);
  BOOST_TEST(none.members.load() == 0);
  // From every chunk of a parallel loop: a team of one on that thread (no barrier across the
  // chunks, which would hang if chunks ran one after another). The loop must get a team, though
  // the tests before may have made loops serial for a while.
  ForgetLateLoopsForTesting();
  std::atomic<int> sizes{0}, calls{0};
  struct Outer {
    std::atomic<int>* sizes;
    std::atomic<int>* calls;
  } outer{&sizes, &calls};
  kiln_parallel_for(0, 2, 1, [](int64_t begin, int64_t end, void* ctx) {
    for (int64_t i = begin; i < end; ++i) {
      kiln_parallel_team(0, 4, [](int64_t, int64_t, void* c) {
        auto* o = static_cast<Outer*>(c);
        ++*o->calls;
        *o->sizes += static_cast<int>(kiln_team_size());
        for (int r = 0; r < 100; ++r) kiln_team_barrier();
      }, ctx);
    }
  }, &outer);
  BOOST_TEST(calls.load() == 2);
  BOOST_TEST(sizes.load() == 2);
}

// Each member counts the barriers that returned 1 and checks that, after the first 0, every
// later one returns 0 at once. Member 0 advances the fake clock 1 ms per round.
struct Stops {
  static constexpr int kRounds = 1000;
  std::atomic<int> passed[Phases::kMaxThreads] = {};
  std::atomic<int> resumed{0}, members{0};
};

void StopBody(int64_t begin, int64_t, void* ctx) {
  auto* s = static_cast<Stops*>(ctx);
  ++s->members;
  bool stopped = false;
  for (int r = 0; r < Stops::kRounds; ++r) {
    if (begin == 0) fake_ms += 1;
    const int32_t go = kiln_team_barrier();
    if (go == 1 && stopped) ++s->resumed;
    if (go == 1) ++s->passed[begin];
    stopped = stopped || go == 0;
  }
}

BOOST_AUTO_TEST_CASE(a_deadline_stops_every_member_of_a_team_at_the_same_barrier) {
  ScopedDeadlineClockForTesting clock(&FakeNow);
  Stops s;
  {
    ScopedDeadline deadline(FakeNow() + std::chrono::milliseconds(30));
    kiln_parallel_team(0, 2, &StopBody, &s);  // returning at all: nobody waits forever
  }
  const int n = s.members.load();
  BOOST_TEST(n >= 1);
  BOOST_TEST(s.resumed.load() == 0);
  const int passed = s.passed[0].load();
  BOOST_TEST(passed >= 1);
  BOOST_TEST(passed < Stops::kRounds);
  for (int t = 1; t < n; ++t) BOOST_TEST(s.passed[t].load() == passed);
  // A deadline already past stops the first barrier, on one thread as on a team.
  Stops late;
  {
    ScopedDeadline deadline(FakeNow() - std::chrono::milliseconds(1));
    kiln_parallel_team(0, 1, &StopBody, &late);
  }
  BOOST_TEST(late.passed[0].load() == 0);
}

// A team whose member 1 is "descheduled" (sleeps 2 ms) before each of 16 barriers: member 0
// has to sleep at each, so the next 64 team calls run on their caller alone; then a team again.
BOOST_AUTO_TEST_CASE(teams_step_aside_after_a_call_that_kept_waiting_for_a_team_mate) {
  auto size_of_next_team = [] {
    std::atomic<int64_t> size{0};
    kiln_parallel_team(0, 2, [](int64_t, int64_t, void* ctx) {
      static_cast<std::atomic<int64_t>*>(ctx)->store(kiln_team_size());
    }, &size);
    return size.load();
  };
  // Earlier tests may have left teams aside (their barriers slept on a loaded host).
  int64_t n = 0;
  for (int call = 0; call <= 64 && n != 2; ++call) n = size_of_next_team();
  BOOST_REQUIRE(n == 2);
  kiln_parallel_team(0, 2, [](int64_t begin, int64_t, void*) {
    for (int r = 0; r < 16; ++r) {
      if (begin == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      kiln_team_barrier();
    }
  }, nullptr);
  for (int call = 0; call < 64; ++call) BOOST_REQUIRE(size_of_next_team() == 1);
  BOOST_TEST(size_of_next_team() == 2);
}

}  // namespace
}  // namespace kiln::jit
