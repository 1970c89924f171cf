// Tests for jit/compile_policy: the payback rule's share and credit, and the background compile
// CPU budget, on made-up times.
#define BOOST_TEST_MODULE compile_policy_test
#include "jit/compile_policy.h"

#include <boost/test/unit_test.hpp>

namespace kiln::jit {
namespace {

constexpr int64_t kMs = 1'000'000;

BOOST_AUTO_TEST_CASE(off_pays_for_everything) {
  PaybackAccount account(0, 0, 40 * kMs);
  BOOST_TEST(!account.enabled());
  int64_t price = -1;
  BOOST_TEST(account.TrySpend(1'000'000 * kMs, &price));
  BOOST_TEST(price == 0);
}

BOOST_AUTO_TEST_CASE(a_kernel_under_its_share_is_never_specialized) {
  PaybackAccount account(0.05, 0, 40 * kMs);
  account.Record(4 * kMs, false);
  int64_t price = -1;
  BOOST_TEST(!account.TrySpend(100 * kMs, &price));  // 4% of the run
  account.Record(1 * kMs, true);                      // specialized calls count for the share
  BOOST_TEST(account.TrySpend(100 * kMs, &price));   // 5%
  BOOST_TEST(price == 0);                             // no payback: nothing spent
}

BOOST_AUTO_TEST_CASE(credit_is_earned_unspecialized_and_spent_per_compile) {
  PaybackAccount account(0, 2, 10 * kMs);
  int64_t price = 0;
  account.Record(15 * kMs, false);
  account.Record(100 * kMs, true);  // no credit from specialized code
  BOOST_TEST(!account.TrySpend(0, &price));
  account.Record(5 * kMs, false);
  BOOST_TEST(account.TrySpend(0, &price));  // 20 ms >= 2 x 10 ms
  BOOST_TEST(price == 20 * kMs);
  BOOST_TEST(account.credit() == 0);
  // The variant was compiled already (1 ms): 18 ms come back.
  account.Settle(price, 1 * kMs);
  BOOST_TEST(account.credit() == 18 * kMs);
  // A real compile of 30 ms becomes the next estimate; one of 1 ms (a cache load) does not.
  account.RecordCompile(30 * kMs);
  account.RecordCompile(1 * kMs);
  BOOST_TEST(account.expected_compile_nanos() == 30 * kMs);
  BOOST_TEST(!account.TrySpend(0, &price));  // 18 < 60
}

BOOST_AUTO_TEST_CASE(budget_allows_a_burst_then_its_share) {
  CpuBudget budget(0.5, 2000 * kMs);  // half a core, a burst of 1 s
  BOOST_TEST(budget.capped());
  BOOST_TEST(budget.Delay(0) == 0);
  budget.Charge(600 * kMs, 600 * kMs);  // refilled to the 1 s cap, then 400 ms left
  BOOST_TEST(budget.Delay(600 * kMs) == 0);
  budget.Charge(1400 * kMs, 800 * kMs);  // + 400 refilled - 800: 0 left
  BOOST_TEST(budget.Delay(1400 * kMs) == 0);
  budget.Charge(1400 * kMs, 500 * kMs);  // 500 ms in debt: 1 s of wall time at half a core
  BOOST_TEST(budget.Delay(1400 * kMs) == 1000 * kMs);
  BOOST_TEST(budget.Delay(1900 * kMs) == 500 * kMs);
  BOOST_TEST(budget.Delay(2400 * kMs) == 0);
  // Over a long run the compiles get half the wall time: 10 s of 100 ms compiles back to back.
  int64_t now = 2400 * kMs, spent = 0;
  while (now < 12400 * kMs) {
    now += budget.Delay(now);
    now += 100 * kMs;
    spent += 100 * kMs;
    budget.Charge(now, 100 * kMs);
  }
  BOOST_TEST(spent <= 5000 * kMs + 100 * kMs);
  BOOST_TEST(spent >= 5000 * kMs - 100 * kMs);
}

BOOST_AUTO_TEST_CASE(no_cap_never_waits) {
  CpuBudget budget(1.0, 2000 * kMs);
  BOOST_TEST(!budget.capped());
  budget.Charge(0, 1'000'000 * kMs);
  BOOST_TEST(budget.Delay(0) == 0);
}

}  // namespace
}  // namespace kiln::jit
