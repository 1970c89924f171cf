// The oneDNN tests' comparison helper (test_util.cc Close) must not let a NaN or Inf through:
// each position (first, middle, last) is tried, because a running maximum once let a NaN be
// overwritten by the next finite element.
#define BOOST_TEST_MODULE onednn_test_util_test
#include "tests/external/onednn/test_util.h"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

namespace kiln::onednn::testing {
namespace {

namespace data = boost::unit_test::data;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

BOOST_AUTO_TEST_CASE(equal_and_within_tolerance_pass) {
  Floats want = {1, 2, 3, 4, 5};
  BOOST_TEST(Close(want, want, 0, 0));
  Floats got = {1.0005f, 2, 3, 4, 5};
  BOOST_TEST(Close(got, want, 1e-3, 0));
  BOOST_TEST(!Close(got, want, 1e-4, 0));
  BOOST_TEST(!Close(Floats{1, 2}, want, 1, 1));  // sizes differ
}

BOOST_DATA_TEST_CASE(nan_or_inf_where_reference_is_finite_fails,
                     data::make({0, 2, 4}) * data::make({kNaN, kInf, -kInf}), at, bad) {
  Floats want = {1, 2, 3, 4, 5};
  Floats got = want;
  got[at] = bad;
  BOOST_TEST(!Close(got, want, 1e-2, 1e-2), "at=" << at);
  // Generous tolerances do not help: a NaN is never within any bound.
  BOOST_TEST(!Close(got, want, 1e30, 1e30), "at=" << at);
}

BOOST_DATA_TEST_CASE(nan_in_reference_fails, data::make({0, 2, 4}), at) {
  // The references here are finite by construction: a NaN in one is a bug in the reference,
  // and Close says so rather than matching it.
  Floats want = {1, 2, 3, 4, 5};
  want[at] = kNaN;
  Floats got = want;
  BOOST_TEST(!Close(got, want, 1e-2, 1e-2), "at=" << at);
}

}  // namespace
}  // namespace kiln::onednn::testing
