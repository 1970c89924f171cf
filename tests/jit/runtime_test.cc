// kiln_parallel_for: every iteration exactly once, pieces skipped once the run's deadline passed,
// and kiln_index_error reports reaching the calling thread's KernelErrorScope from the team.
#define BOOST_TEST_MODULE runtime_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
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

}  // namespace
}  // namespace kiln::jit
