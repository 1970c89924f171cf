// The benchmarks' correctness gate (reference_loops.cc MaxRelError): a NaN or Inf in any
// position must make it fail, because a kernel that writes NaN must not be timed as if right.
#define BOOST_TEST_MODULE reference_loops_test
#include "tests/jit/bench/reference_loops.h"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <vector>

namespace kiln::bench {
namespace {

namespace data = boost::unit_test::data;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

BOOST_AUTO_TEST_CASE(finite_errors_are_relative_to_max_1_and_want) {
  std::vector<float> want = {0.5f, 100.0f, 2.0f}, got = {0.5f, 101.0f, 2.0f};
  BOOST_TEST(MaxRelError(want.data(), want.data(), 3) == 0.0);
  BOOST_TEST(MaxRelError(got.data(), want.data(), 3) == 0.01, boost::test_tools::tolerance(1e-9));
  got[0] = 0.75f;  // |0.25| / max(1, 0.5)
  BOOST_TEST(MaxRelError(got.data(), want.data(), 3) == 0.25, boost::test_tools::tolerance(1e-9));
}

BOOST_DATA_TEST_CASE(nan_or_inf_in_any_position_is_infinite_error,
                     data::make({0, 2, 4}) * data::make({kNaN, kInf, -kInf}), at, bad) {
  std::vector<float> want = {1, 2, 3, 4, 5}, got = want;
  got[at] = bad;
  BOOST_TEST(std::isinf(MaxRelError(got.data(), want.data(), 5)), "at=" << at);
  BOOST_TEST(std::isinf(MaxRelError(want.data(), got.data(), 5)), "at=" << at);
}

}  // namespace
}  // namespace kiln::bench
