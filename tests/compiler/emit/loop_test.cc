// Loops through the whole compiler (compiler/emit/control_flow.cc, compiler/passes/pack_weights):
// a body's product with a captured constant matrix reads weights packed once at compile time,
// scan outputs over many iterations grow geometrically, with every row right, and the loop's
// control is one kernel call per iteration.
#define BOOST_TEST_MODULE loop_test
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "embed/compile.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"
#include "vm/context.h"
#include "vm/disassembler.h"
#include "vm/profile.h"

namespace kiln::compiler {
namespace {

using testing::F32;
using testing::I64;

struct Compiled {
  CompileStats stats;
  std::shared_ptr<const Executable> exe;
};

Compiled Compile(const std::string& text) {
  std::string bytes = testing::ModelBytes(text);
  CompileOptions o;
  o.external = "none";
  Compiled c;
  auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &c.stats);
  if (!kiln.ok()) BOOST_FAIL(kiln.status().message());
  auto exe = testing::LoadWithJit(*kiln);
  if (!exe.ok()) BOOST_FAIL(exe.status().message());
  c.exe = *exe;
  return c;
}

// Runs the entry function; with `profile`, every instruction is recorded into it.
std::vector<TensorDataRef> Run(const Compiled& c, const std::vector<TensorDataRef>& in,
                               Profile* profile = nullptr) {
  auto ctx = Context::Create(c.exe);
  if (!ctx.ok()) BOOST_FAIL(ctx.status().message());
  std::vector<Tensor> inputs;
  for (const TensorDataRef& t : in) inputs.push_back(testing::ToTensor(*t));
  InvokeOptions options;
  options.profile = profile;
  auto out = (*ctx)->Invoke(c.exe->entry_function(), inputs, options);
  if (!out.ok()) BOOST_FAIL(out.status().message());
  std::vector<TensorDataRef> result;
  for (const Tensor& t : *out) result.push_back(testing::FromTensor(t));
  return result;
}

// The index of the one function whose name contains `part`.
int FunctionNamed(const Executable& exe, const std::string& part) {
  int found = -1;
  for (int f = 0; f < static_cast<int>(exe.root().functions()->size()); ++f) {
    if (exe.root().functions()->Get(f)->name()->str().find(part) == std::string::npos) continue;
    BOOST_REQUIRE_MESSAGE(found < 0, "two functions named like '" << part << "'");
    found = f;
  }
  BOOST_REQUIRE_MESSAGE(found >= 0, "no function named like '" << part << "'");
  return found;
}

int64_t KernelCalls(const Profile& p, const Executable& exe, const std::string& name) {
  for (const Profile::Row& r : p.ByKernel(exe)) {
    if (r.name == name) return r.calls;
  }
  return 0;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

constexpr int kDim = 20;  // wider than one GEMM panel on every target, so B has several

// w[k][j] and bias[j]: small enough that the recurrence contracts (errors do not grow).
double Weight(int k, int j) { return 0.15 * std::sin(0.37 * (k * kDim + j) + 1.0); }
double Bias(int j) { return 0.05 * std::cos(0.9 * j); }

std::string Floats(int count, double (*f)(int)) {
  std::string s;
  char buf[32];
  for (int i = 0; i < count; ++i) {
    std::snprintf(buf, sizeof(buf), "%.9g", f(i));
    s += (i ? ", " : "") + std::string(buf);
  }
  return s;
}

// h' = tanh(h W + bias) for m steps, every h' also a scan row; W and bias are main-graph
// initializers the body reads through captures.
std::string RecurrenceModel() {
  auto w = [](int i) { return Weight(i / kDim, i % kDim); };
  std::string d = std::to_string(kDim);
  return R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (int64 m, float[B, )" + d + "] x) => (float[B, " + d + "] h, float[T, B, " + d + R"(] hs)
        <float[)" + d + ", " + d + "] w = {" + Floats(kDim * kDim, w) + "}, float[" + d +
         "] bias = {" + Floats(kDim, Bias) + R"(}> {
      t = Constant <value = bool {1}> ()
      h, hs = Loop (m, t, x) <
        body = b (int64 i, bool cin, float[B, )" + d + "] v) => (bool cout, float[B, " + d +
         "] vout, float[B, " + d + R"(] row) {
          p = MatMul(v, w)
          q = Add(p, bias)
          vout = Tanh(q)
          cout = Identity(cin)
          row = Identity(vout)
        }
      >
    }
  )";
}

BOOST_AUTO_TEST_CASE(a_body_product_with_a_captured_constant_reads_weights_packed_once) {
  Compiled c = Compile(RecurrenceModel());
  BOOST_TEST(c.stats.packed_matmuls == 1);
  const Executable& exe = *c.exe;
  const std::string body = DisassembleFunction(exe, FunctionNamed(exe, "/body"));
  const std::string all = InspectExecutable(exe);
  BOOST_TEST_MESSAGE(all);
  // The body streams the packed copy, a constant of the file (packed by the compiler, never at
  // run time), and neither it nor the caller reads the unpacked matrix: the body no longer
  // takes it as a parameter and the file does not carry it.
  BOOST_TEST(Count(body, "'PackedMatMul") == 1u);
  BOOST_TEST(Count(all, "'MatMul") == 0u);
  BOOST_TEST(Count(body, "'w_packed'") == 1u);
  BOOST_TEST(body.substr(0, body.find('\n')).find(" w: ") == std::string::npos);
  BOOST_TEST(Count(all, "'w'") == 0u);

  for (auto [batch, steps] : {std::pair<int64_t, int64_t>{1, 1}, {3, 12}, {2, 40}}) {
    auto x = testing::RandomTensor(DType::kF32, {batch, kDim}, -1, 1, 7 + steps);
    auto out = Run(c, {I64({}, {double(steps)}), x});
    // The unrolled recurrence in double precision.
    std::vector<double> h = x->ToDoubles(), rows;
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<double> next(h.size());
      for (int64_t r = 0; r < batch; ++r)
        for (int j = 0; j < kDim; ++j) {
          double acc = Bias(j);
          for (int k = 0; k < kDim; ++k) acc += h[r * kDim + k] * Weight(k, j);
          next[r * kDim + j] = std::tanh(acc);
        }
      h = next;
      rows.insert(rows.end(), h.begin(), h.end());
    }
    BOOST_TEST(out[1]->dims() == std::vector<int64_t>({steps, batch, kDim}));
    // f32 products of 20 terms of magnitude < 0.15 each step; tanh contracts.
    BOOST_TEST(testing::Compare(*out[0], *F32({batch, kDim}, h), 2e-6, 2e-6).empty());
    BOOST_TEST(testing::Compare(*out[1], *F32({steps, batch, kDim}, rows), 2e-6, 2e-6).empty());
  }
}

// silero VAD's shape: the loop sits in an If branch that transposes the captured weights first.
// The transpose reads constants only, so it folds at compile time and the body's product is
// packed as above; both branches agree with the reference.
BOOST_AUTO_TEST_CASE(weights_transposed_in_a_branch_before_the_loop_are_packed_too) {
  std::string text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (bool c, int64 m, float[1, 3] x) => (float[1, 3] y)
        <float[3, 3] w = {1, 2, 3, 4, 5, 6, 7, 8, 9}> {
      t = Constant <value = bool {1}> ()
      y = If (c) <
        then_branch = tb () => (float[1, 3] ty) {
          wt = Transpose <perm = [1, 0]> (w)
          ty = Loop (m, t, x) <
            body = b (int64 i, bool cin, float[1, 3] v) => (bool cout, float[1, 3] vout) {
              vout = MatMul(v, wt)
              cout = Identity(cin)
            }
          >
        },
        else_branch = eb () => (float[1, 3] ey) { ey = Identity(x) }
      >
    }
  )";
  Compiled c = Compile(text);
  BOOST_TEST(c.stats.packed_matmuls == 1);
  BOOST_TEST(Count(InspectExecutable(*c.exe), "'PackedMatMul") == 1u);
  auto x = F32({1, 3}, {1, -1, 0.5});
  auto taken = Run(c, {testing::MakeTensor(DType::kBool, {}, {1}), I64({}, {3}), x});
  // x (W^T)^3 with W = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]: rows of W dotted with v, three times.
  std::vector<double> v = {1, -1, 0.5};
  for (int s = 0; s < 3; ++s) {
    std::vector<double> next(3);
    for (int j = 0; j < 3; ++j) {
      next[j] = v[0] * (3 * j + 1) + v[1] * (3 * j + 2) + v[2] * (3 * j + 3);
    }
    v = next;
  }
  BOOST_TEST(taken[0]->ToDoubles() == v);  // small integers and halves: exact in f32
  auto other = Run(c, {testing::MakeTensor(DType::kBool, {}, {0}), I64({}, {3}), x});
  BOOST_TEST(other[0]->ToDoubles() == x->ToDoubles());
}

// Two scan outputs (a scalar and a [2, 3] block per iteration) over up to 1000 iterations, the
// loop ending at the trip count or at its condition. Each iteration stores one row; the rows
// are copied only when the buffer doubles.
BOOST_AUTO_TEST_CASE(scan_outputs_over_many_iterations_grow_geometrically) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (int64 m, float limit) => (float last, float[T] s, float[T, 2, 3] blocks) {
      t = Constant <value = bool {1}> ()
      zero = Constant <value = float {0}> ()
      last, s, blocks = Loop (m, t, zero) <
        body = b (int64 i, bool cin, float v)
            => (bool cout, float vout, float sv, float[2, 3] blk) {
          one = Constant <value = float {1}> ()
          vout = Add(v, one)
          cout = Less(vout, limit)
          sv = Identity(vout)
          base = Constant <value = float[2, 3] {0, 10, 20, 30, 40, 50}> ()
          blk = Add(base, vout)
        }
      >
    }
  )";
  Compiled c = Compile(text);
  struct Case {
    double m, limit;
    int64_t trips;
  };
  // Trips: iterations run while i < m and the previous iteration's vout (= i) < limit.
  for (Case cs : {Case{0, 1e9, 0}, Case{1, 1e9, 1}, Case{8, 1e9, 8}, Case{9, 1e9, 9},
                  Case{1000, 1e9, 1000}, Case{1e15, 37.5, 38}, Case{500, 0.5, 1}}) {
    Profile profile;
    auto out = Run(c, {I64({}, {cs.m}), F32({}, {cs.limit})}, &profile);
    std::vector<double> s, blocks;
    for (int64_t k = 1; k <= cs.trips; ++k) {
      s.push_back(double(k));
      for (double b : {0, 10, 20, 30, 40, 50}) blocks.push_back(b + k);
    }
    BOOST_TEST(out[0]->ToDoubles() == std::vector<double>({double(cs.trips)}), "m=" << cs.m);
    BOOST_TEST(out[1]->ToDoubles() == s, "m=" << cs.m);
    BOOST_TEST(out[2]->ToDoubles() == blocks, "m=" << cs.m);
    if (cs.trips > 0) {
      BOOST_TEST(out[1]->dims() == std::vector<int64_t>({cs.trips}));
      BOOST_TEST(out[2]->dims() == std::vector<int64_t>({cs.trips, 2, 3}));
    }
    // Each output stores every row once and copies its rows only when the buffer doubles
    // (capacities 8, 16, ..., at most m): 1000 rows take 8 buffers, not 1000 copies.
    int64_t buffers = 0;
    for (int64_t cap = 8, rows = 0; rows < cs.trips; cap *= 2, ++buffers) rows = cap;
    BOOST_TEST(KernelCalls(profile, *c.exe, "scan_store") == 2 * cs.trips, "m=" << cs.m);
    BOOST_TEST(KernelCalls(profile, *c.exe, "scan_copy") == 2 * buffers, "m=" << cs.m);
    // The control costs one kernel call per iteration: the first test before the loop, then
    // one step (next i and whether to go on) after each iteration.
    BOOST_TEST(KernelCalls(profile, *c.exe, "loop_continue") == 1, "m=" << cs.m);
    BOOST_TEST(KernelCalls(profile, *c.exe, "loop_step") == cs.trips, "m=" << cs.m);
  }
}

}  // namespace
}  // namespace kiln::compiler
