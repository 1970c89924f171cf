// Tests for jit/compute_matmul: the tiled f32 matmul on full, edge and empty tiles.
#define BOOST_TEST_MODULE compute_matmul_test
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>

#include "jit/compute.h"
#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::TestBuffer;
namespace data = boost::unit_test::data;

struct Dims {
  int64_t m, n, k;
};

std::ostream& operator<<(std::ostream& os, const Dims& d) {
  return os << d.m << "x" << d.n << "x" << d.k;
}

// Full 6x64 tiles, edges in rows and/or columns, a single element, and empty operands.
const std::vector<Dims> kDims = {{1, 1, 1},    {6, 64, 1},  {7, 65, 3},    {13, 130, 33},
                                 {64, 64, 64}, {5, 200, 7}, {37, 3, 129},  {0, 5, 3},
                                 {5, 0, 3},    {4, 5, 0},   {12, 128, 256}};

BOOST_DATA_TEST_CASE(matmul_matches_reference, data::make(kDims), d) {
  KernelFn fn = CompileOrFail(MatmulKernel("matmul"));
  BOOST_REQUIRE(fn);
  TestBuffer a(DType::kF32, {d.m, d.k}), b(DType::kF32, {d.k, d.n}), c(DType::kF32, {d.m, d.n});
  for (int64_t e = 0; e < a.size(); ++e) a.Set(e, std::sin(0.1 * e));
  for (int64_t e = 0; e < b.size(); ++e) b.Set(e, std::cos(0.07 * e));
  for (int64_t e = 0; e < c.size(); ++e) c.Set(e, 1e9);  // every element must be overwritten
  Call(fn, {&a, &b, &c});
  for (int64_t i = 0; i < d.m; ++i) {
    for (int64_t j = 0; j < d.n; ++j) {
      double want = 0, magnitude = 0;
      for (int64_t k = 0; k < d.k; ++k) {
        double p = a.At(i * d.k + k) * b.At(k * d.n + j);
        want += p;
        magnitude += std::fabs(p);
      }
      // f32 accumulation (fused or not) of k products: |error| <= k * eps * sum|a*b|.
      double bound = (d.k + 1) * std::ldexp(magnitude, -23);
      BOOST_TEST(std::fabs(c.At(i * d.n + j) - want) <= bound, "i=" << i << " j=" << j);
    }
  }
}

// Reports throughput (not asserted: the machine is shared); checks a sample of the answer.
BOOST_AUTO_TEST_CASE(matmul_512_throughput) {
  KernelFn fn = CompileOrFail(MatmulKernel("matmul"));
  BOOST_REQUIRE(fn);
  const int64_t n = 512;
  TestBuffer a(DType::kF32, {n, n}), b(DType::kF32, {n, n}), c(DType::kF32, {n, n});
  for (int64_t e = 0; e < n * n; ++e) {
    a.Set(e, e % 7 - 3);
    b.Set(e, e % 5 - 2);
  }
  Call(fn, {&a, &b, &c});
  auto start = std::chrono::steady_clock::now();
  const int reps = 5;
  for (int r = 0; r < reps; ++r) Call(fn, {&a, &b, &c});
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  BOOST_TEST_MESSAGE("matmul 512^3: " << 2.0 * n * n * n * reps / took.count() / 1e9 << " GFLOP/s");
  for (int64_t i = 0; i < n; i += 61) {
    for (int64_t j = 0; j < n; j += 37) {
      double want = 0;
      for (int64_t k = 0; k < n; ++k) want += a.At(i * n + k) * b.At(k * n + j);
      BOOST_TEST(c.At(i * n + j) == want);  // small integers: exact in f32
    }
  }
}

}  // namespace
}  // namespace kiln::jit
