// kiln_parallel_for: every iteration exactly once, pieces skipped once the run's deadline passed,
// and kiln_index_error reports reaching the calling thread's KernelErrorScope from the team.
#define BOOST_TEST_MODULE runtime_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "jit/runtime.h"

namespace kiln::jit {
namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  std::chrono::milliseconds per_call{0};
  std::atomic<int> calls{0};
  explicit Counts(int n) : hits(n) {}
};

void Body(int64_t begin, int64_t end, void* ctx) {
  auto* c = static_cast<Counts*>(ctx);
  ++c->calls;
  for (int64_t i = begin; i < end; ++i) ++c->hits[i];
  if (c->per_call.count() > 0) std::this_thread::sleep_for(c->per_call);
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

// Each piece sleeps 20 ms; with a 30 ms deadline the loop stops after the pieces that started
// before it, far short of the 8 pieces per thread it would otherwise run.
BOOST_AUTO_TEST_CASE(a_long_loop_stops_between_pieces) {
  Counts c(800);
  c.per_call = std::chrono::milliseconds(20);
  {
    ScopedDeadline deadline(Clock::now() + std::chrono::milliseconds(30));
    kiln_parallel_for(0, 800, 1, &Body, &c);
  }
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
