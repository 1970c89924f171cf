// Constants through the whole compiler (compiler/emit/emit_node.cc, StoredConstant): values
// with equal bytes, dtype and dims are stored once and every reader loads that one constant;
// values that differ in any of these stay apart.
#define BOOST_TEST_MODULE constants_test
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "embed/compile.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"
#include "vm/context.h"

namespace kiln::compiler {
namespace {

using testing::F32;

constexpr int kDim = 20;  // wider than one GEMM panel on every target

double Weight(int k, int j) { return 0.1 * std::sin(0.37 * (k * kDim + j) + 1.0); }
double Other(int k, int j) { return 0.1 * std::cos(0.41 * (k * kDim + j) + 0.5); }

std::string Floats(double (*f)(int, int)) {
  std::string s;
  char buf[32];
  for (int i = 0; i < kDim * kDim; ++i) {
    std::snprintf(buf, sizeof(buf), "%.9g", f(i / kDim, i % kDim));
    s += (i ? ", " : "") + std::string(buf);
  }
  return s;
}

// Three products of `x` as bert_tiny's exporter writes tied layers: w2 = Identity(w) is folded
// into a copy of w's bytes (then packed like w), while v has w's dtype and dims but other bytes.
// A bias equal to another's bytes in another shape ([20] against [1, 20]) stays apart too.
std::string TiedModel() {
  std::string d = std::to_string(kDim);
  std::string zeros;
  for (int i = 0; i < kDim; ++i) zeros += i ? ", 0.25" : "0.25";
  return R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[B, )" + d + "] x) => (float[B, " + d + "] y1, float[B, " + d + "] y2, float[B, " +
         d + "] y3)\n        <float[" + d + ", " + d + "] w = {" + Floats(Weight) + "}, float[" +
         d + ", " + d + "] v = {" + Floats(Other) + "}, float[" + d + "] b = {" + zeros +
         "}, float[1, " + d + "] b2 = {" + zeros + R"(}> {
      w2 = Identity(w)
      p1 = MatMul(x, w)
      y1 = Add(p1, b)
      p2 = MatMul(x, w2)
      y2 = Add(p2, b2)
      y3 = MatMul(x, v)
    }
  )";
}

BOOST_AUTO_TEST_CASE(tied_weights_are_stored_once_and_distinct_ones_apart) {
  std::string bytes = testing::ModelBytes(TiedModel());
  CompileOptions o;
  o.external = "none";
  CompileStats stats;
  auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().message());
  auto exe = testing::LoadWithJit(*kiln);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  BOOST_TEST(stats.packed_matmuls == 3);

  // Packed w (read by both tied products), packed v, and the two biases: w2's packed copy is
  // not stored (without the sharing the file carries a third matrix).
  std::set<const void*> weights;
  int matrices = 0;
  for (int i = 0; i < (*exe)->num_constants(); ++i) {
    const Tensor& c = (*exe)->constant(i);
    if (c.dtype() != DType::kF32 || c.rank() != 3) continue;
    ++matrices;
    weights.insert(c.data());
  }
  BOOST_TEST(matrices == 2);
  BOOST_TEST(weights.size() == 2u);
  int biases = 0;
  for (int i = 0; i < (*exe)->num_constants(); ++i) {
    const Tensor& c = (*exe)->constant(i);
    if (c.dtype() == DType::kF32 && c.NumElements() == kDim) ++biases;
  }
  BOOST_TEST(biases == 2);  // [20] and [1, 20] are different constants, whatever their bytes

  // Every product still reads its own weights.
  auto ctx = Context::Create(*exe);
  BOOST_REQUIRE(ctx.ok());
  const int64_t batch = 3;
  auto x = testing::RandomTensor(DType::kF32, {batch, kDim}, -1, 1, 11);
  auto out = (*ctx)->Invoke((*exe)->entry_function(), {testing::ToTensor(*x)});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
  std::vector<double> xs = x->ToDoubles(), y1, y3;
  for (int64_t r = 0; r < batch; ++r)
    for (int j = 0; j < kDim; ++j) {
      double a = 0.25, c = 0;
      for (int k = 0; k < kDim; ++k) {
        a += xs[r * kDim + k] * Weight(k, j);
        c += xs[r * kDim + k] * Other(k, j);
      }
      y1.push_back(a);
      y3.push_back(c);
    }
  // f32 sums of 20 products of magnitude < 0.1.
  auto y = F32({batch, kDim}, y1);
  BOOST_TEST(testing::Compare(*testing::FromTensor((*out)[0]), *y, 1e-6, 1e-6).empty());
  BOOST_TEST(testing::Compare(*testing::FromTensor((*out)[1]), *y, 1e-6, 1e-6).empty());
  BOOST_TEST(testing::Compare(*testing::FromTensor((*out)[2]), *F32({batch, kDim}, y3), 1e-6,
                              1e-6)
                 .empty());
}

}  // namespace
}  // namespace kiln::compiler
