// The lowering tests' comparison helper (op_test_util.cc Compare): a NaN or Inf where the
// reference is finite must fail in any position and any float dtype; NaN matches NaN only
// because the helper's contract says so.
#define BOOST_TEST_MODULE op_test_util_test
#include "tests/compiler/lower/op_test_util.h"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

namespace kiln::compiler::testing {
namespace {

namespace data = boost::unit_test::data;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};

BOOST_DATA_TEST_CASE(nan_or_inf_where_reference_is_finite_fails,
                     data::make({0, 2, 4}) * data::make({kNaN, kInf, -kInf}), at, bad) {
  for (DType dtype : kFloatTypes) {
    std::vector<double> want = {1, 2, 3, 4, 5}, got = want;
    got[at] = bad;
    TensorDataRef e = MakeTensor(dtype, {5}, want);
    BOOST_TEST(Compare(*MakeTensor(dtype, {5}, want), *e, 0, 0).empty());
    std::string diff = Compare(*MakeTensor(dtype, {5}, got), *e, 1e30, 1e30);
    BOOST_TEST(!diff.empty(), DTypeName(dtype) << " at=" << at);
    BOOST_TEST(diff.find("[" + std::to_string(at) + "]") != std::string::npos, diff);
  }
}

BOOST_DATA_TEST_CASE(finite_where_reference_is_nan_fails, data::make({0, 2, 4}), at) {
  std::vector<double> want = {1, 2, 3, 4, 5}, got = want;
  want[at] = kNaN;
  BOOST_TEST(!Compare(*F32({5}, got), *F32({5}, want), 1e30, 1e30).empty(), "at=" << at);
}

BOOST_AUTO_TEST_CASE(nan_matches_nan_and_infinities_match_exactly) {
  std::vector<double> want = {kNaN, 2, kInf, -kInf, kNaN};
  BOOST_TEST(Compare(*F32({5}, want), *F32({5}, want), 0, 0).empty());
  std::vector<double> got = want;
  got[2] = 1e30;  // a huge finite value is not +Inf, whatever the tolerance
  BOOST_TEST(!Compare(*F32({5}, got), *F32({5}, want), 1e30, 1e30).empty());
  got = want;
  got[3] = kInf;
  BOOST_TEST(!Compare(*F32({5}, got), *F32({5}, want), 1e30, 1e30).empty());
}

}  // namespace
}  // namespace kiln::compiler::testing
