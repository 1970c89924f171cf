// The JIT tests' comparison helpers (test_util.cc UlpDistance, SameFloat): a NaN or Inf where
// the reference is finite must never count as close; NaN matches NaN only as documented.
#define BOOST_TEST_MODULE jit_test_util_test
#include "tests/jit/test_util.h"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

namespace kiln::jit::testing {
namespace {

namespace data = boost::unit_test::data;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

BOOST_DATA_TEST_CASE(ulp_distance_of_non_finite_to_finite_is_huge,
                     data::make({DType::kF32, DType::kF64}) * data::make({kNaN, kInf, -kInf}) *
                         data::make({0.0, 1.0, -3.5, 1e30}),
                     dtype, bad, finite) {
  // Every caller bounds UlpDistance by a small count (<= 4 ulp, a few hundred at most).
  BOOST_TEST(UlpDistance(bad, finite, dtype) >= 1e29);
  BOOST_TEST(UlpDistance(finite, bad, dtype) >= 1e29);
}

BOOST_AUTO_TEST_CASE(ulp_distance_of_finite_values) {
  BOOST_TEST(UlpDistance(1.0, 1.0, DType::kF32) == 0.0);
  BOOST_TEST(UlpDistance(1.0, 1.0 + std::ldexp(1.0, -23), DType::kF32) == 1.0);
  BOOST_TEST(UlpDistance(1.0, 1.0 + std::ldexp(1.0, -52), DType::kF64) == 1.0);
  BOOST_TEST(UlpDistance(kInf, kInf, DType::kF32) == 0.0);
  BOOST_TEST(UlpDistance(kInf, -kInf, DType::kF32) >= 1e29);
  BOOST_TEST(UlpDistance(kNaN, kNaN, DType::kF32) == 0.0);  // documented: NaN matches NaN
}

BOOST_DATA_TEST_CASE(same_float_rejects_non_finite_against_finite,
                     data::make({kNaN, kInf, -kInf}) * data::make({0.0, -0.0, 1.0, 1e300}), bad,
                     finite) {
  BOOST_TEST(!SameFloat(bad, finite));
  BOOST_TEST(!SameFloat(finite, bad));
}

BOOST_AUTO_TEST_CASE(same_float_is_exact_with_sign_of_zero) {
  BOOST_TEST(SameFloat(kNaN, kNaN));  // documented: NaN matches NaN
  BOOST_TEST(SameFloat(kInf, kInf));
  BOOST_TEST(!SameFloat(kInf, -kInf));
  BOOST_TEST(!SameFloat(0.0, -0.0));
  BOOST_TEST(!SameFloat(1.0, std::nextafter(1.0, 2.0)));
}

}  // namespace
}  // namespace kiln::jit::testing
