// Emission: graphs compiled with a small lowering table of the test's own, run in the VM on the
// JIT, compared with the Evaluator (the same kernels outside the VM) and with known answers.
#define BOOST_TEST_MODULE emit_test
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <cmath>

#include "compiler/emit/emit.h"
#include "compiler/lower/evaluate.h"
#include "vm/disassembler.h"
#include "vm/providers.h"
#include "jit/compute.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::F32;

jit::BroadcastDim Hint(const DimExpr& in, const DimExpr& out) {
  if (in.is_const() && in.const_value() == 1) return jit::BroadcastDim::kOne;
  if (in == out) return jit::BroadcastDim::kSame;
  return jit::BroadcastDim::kUnknown;
}

std::vector<jit::BroadcastDim> Hints(const LowerContext& ctx, int i) {
  std::vector<jit::BroadcastDim> h;
  const SymbolicShape& in = ctx.input_shape(i);
  const SymbolicShape& out = ctx.output_shape(0);
  for (size_t a = 0; a < in.size(); ++a) h.push_back(Hint(in[a], out[out.size() - in.size() + a]));
  return h;
}

Status LowerAdd(LowerContext& ctx) {
  auto ha = Hints(ctx, 0), hb = Hints(ctx, 1);
  ctx.SetCompute(0, [&](const std::vector<jit::Expr>& i) {
    return jit::Add(jit::BroadcastLoad(ctx.in(0), i, ha), jit::BroadcastLoad(ctx.in(1), i, hb));
  });
  return Status::Ok();
}

// Broadcast of the two input shapes; -1 where they contradict.
Status AddShape(ShapeFuncContext& ctx) {
  int ra = ctx.input_rank(0), rb = ctx.input_rank(1), r = std::max(ra, rb);
  std::vector<jit::Stmt> stores;
  for (int k = 0; k < r; ++k) {
    int ia = k - (r - ra), ib = k - (r - rb);
    jit::Expr a = ia >= 0 ? ctx.InputDim(0, ia) : jit::IntImm(1);
    jit::Expr b = ib >= 0 ? ctx.InputDim(1, ib) : jit::IntImm(1);
    jit::Expr d = jit::Select(jit::Eq(a, jit::IntImm(1)), b,
                              jit::Select(jit::Or(jit::Eq(b, jit::IntImm(1)), jit::Eq(a, b)), a,
                                          jit::IntImm(-1)));
    stores.push_back(jit::Store(ctx.out_shape(0), {jit::IntImm(k)}, d));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

Status LowerRelu(LowerContext& ctx) {
  ctx.SetCompute(0, [&](const std::vector<jit::Expr>& i) {
    jit::Expr x = jit::Load(ctx.in(0), i);
    return jit::Max(x, jit::ConstLike(x, 0));
  });
  return Status::Ok();
}

Status LowerView(LowerContext& ctx) {
  ctx.SetView(0);
  return Status::Ok();
}

const LoweringTable& Table() {
  static const LoweringTable* t = [] {
    auto* t = new LoweringTable;
    t->MustAdd({"Add", 7, INT32_MAX, LowerAdd, AddShape});
    t->MustAdd({"Relu", 6, INT32_MAX, LowerRelu, nullptr});
    t->MustAdd({"Reshape", 5, INT32_MAX, LowerView, nullptr});
    t->MustAdd({"Identity", 1, INT32_MAX, LowerView, nullptr});
    return t;
  }();
  return *t;
}

StatusOr<std::vector<uint8_t>> Emit(const std::string& text, EmitStats* stats = nullptr) {
  ASSIGN_OR_RETURN(Graph g, testing::InferText(text));
  EmitOptions o;
  o.table = &Table();
  return EmitExecutable(g, o, stats);
}

std::vector<double> Values(const TensorData& t) { return t.ToDoubles(); }

BOOST_AUTO_TEST_CASE(static_chain_matches_reference) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3] x, float[3] y) => (float[2, 3] z) { s = Add(x, y)  z = Relu(s) }
  )";
  StatusOr<std::vector<uint8_t>> bytes = Emit(text);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  auto out = testing::RunExecutable(*exe, {F32({2, 3}, {1, -2, 3, -4, 5, -6}), F32({3}, {1, 1, -10})});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
  BOOST_REQUIRE_EQUAL(out->size(), 1u);
  std::string diff = Compare(*(*out)[0], *F32({2, 3}, {2, 0, 0, 0, 6, 0}), 0, 0);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(symbolic_batch_runs_at_several_sizes_in_one_context) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3] x, float[3] y) => (float[N, 3] z) { s = Add(x, y)  t = Relu(s)  z = Add(t, y) }
  )";
  auto bytes = Emit(text);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  auto ctx = Context::Create(*exe);
  BOOST_REQUIRE(ctx.ok());
  for (int64_t n : {1, 4, 7, 0, 1023}) {
    auto x = testing::RandomTensor(DType::kF32, {n, 3}, -2, 2, 7 + n);
    auto y = F32({3}, {0.5, -1, 2});
    auto out = testing::RunExecutable(*exe, {x, y}, ctx->get());
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
    std::vector<double> xv = Values(*x), expect;
    for (int64_t i = 0; i < n * 3; ++i) {
      float s = static_cast<float>(xv[i]) + static_cast<float>(y->ToDoubles()[i % 3]);
      float t = std::max(s, 0.0f);
      expect.push_back(t + static_cast<float>(y->ToDoubles()[i % 3]));
    }
    std::string diff = Compare(*(*out)[0], *F32({n, 3}, expect), 0, 0);
    BOOST_TEST(diff.empty(), "N=" << n << ": " << diff);
  }
}

// Dynamic values of one shape share the shape and byte size the batched shape function
// computes: one view pair per distinct shape, not per value (a loop body pays each view on
// every iteration). Four [N, 3] values and one [N]: the batch's whole output plus two pairs.
BOOST_AUTO_TEST_CASE(values_of_one_shape_share_their_computed_shape) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3] x, float[3] y, float[N] v) => (float[N, 3] z, float[N, 3] w, float[N] u) {
      s = Add(x, y)  t = Relu(s)  z = Add(t, y)  w = Add(s, t)  u = Relu(v)
    }
  )";
  auto bytes = Emit(text);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  const std::string listing = DisassembleFunction(**exe, 0);
  size_t views = 0;
  for (size_t at = listing.find("alloc_tensor i64"); at != std::string::npos;
       at = listing.find("alloc_tensor i64", at + 1)) {
    ++views;
  }
  BOOST_TEST(views == 5u, listing);
  for (int64_t n : {1, 5, 0}) {
    auto x = testing::RandomTensor(DType::kF32, {n, 3}, -2, 2, 3 + n);
    auto v = testing::RandomTensor(DType::kF32, {n}, -2, 2, 9 + n);
    auto y = F32({3}, {0.5, -1, 2});
    auto out = testing::RunExecutable(*exe, {x, y, v});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
    std::vector<double> xv = Values(*x), vv = Values(*v), yv = Values(*y), z, w, u;
    for (int64_t i = 0; i < n * 3; ++i) {
      float s = static_cast<float>(xv[i]) + static_cast<float>(yv[i % 3]);
      float t = std::max(s, 0.0f);
      z.push_back(t + static_cast<float>(yv[i % 3]));
      w.push_back(s + t);
    }
    for (int64_t i = 0; i < n; ++i) u.push_back(std::max(static_cast<float>(vv[i]), 0.0f));
    BOOST_TEST(Compare(*(*out)[0], *F32({n, 3}, z), 0, 0).empty(), "N=" << n);
    BOOST_TEST(Compare(*(*out)[1], *F32({n, 3}, w), 0, 0).empty(), "N=" << n);
    BOOST_TEST(Compare(*(*out)[2], *F32({n}, u), 0, 0).empty(), "N=" << n);
  }
}

BOOST_AUTO_TEST_CASE(unrelated_symbols_broadcast_through_the_shape_function) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[A] x, float[B] y) => (float[C] z) { z = Add(x, y) }
  )";
  auto bytes = Emit(text);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  struct Case {
    int64_t a, b;
  };
  for (Case c : {Case{4, 4}, Case{1, 5}, Case{5, 1}}) {
    auto x = testing::RandomTensor(DType::kF32, {c.a}, -1, 1, 1);
    auto y = testing::RandomTensor(DType::kF32, {c.b}, -1, 1, 2);
    auto out = testing::RunExecutable(*exe, {x, y});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
    int64_t n = std::max(c.a, c.b);
    std::vector<double> xv = Values(*x), yv = Values(*y), expect;
    for (int64_t i = 0; i < n; ++i) {
      expect.push_back(static_cast<float>(xv[c.a == 1 ? 0 : i]) +
                       static_cast<float>(yv[c.b == 1 ? 0 : i]));
    }
    std::string diff = Compare(*(*out)[0], *F32({n}, expect), 0, 0);
    BOOST_TEST(diff.empty(), c.a << "x" << c.b << ": " << diff);
  }
  // 3 vs 4 does not broadcast: an error, never an out-of-bounds kernel.
  auto out = testing::RunExecutable(*exe, {F32({3}, {1, 2, 3}), F32({4}, {1, 2, 3, 4})});
  BOOST_REQUIRE(!out.ok());
  BOOST_TEST_MESSAGE(out.status().message());
}

BOOST_AUTO_TEST_CASE(reshape_is_a_view_static_and_symbolic) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 6] x) => (float[N, 2, 3] z) {
      shape = Constant <value = int64[3] {-1, 2, 3}> ()
      r = Reshape(x, shape)
      z = Relu(r)
    }
  )";
  auto bytes = Emit(text);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  for (int64_t n : {1, 3}) {
    auto x = testing::RandomTensor(DType::kF32, {n, 6}, -1, 1, n);
    auto out = testing::RunExecutable(*exe, {x});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
    std::vector<double> expect;
    for (double v : Values(*x)) expect.push_back(std::max(v, 0.0));
    std::string diff = Compare(*(*out)[0], *F32({n, 2, 3}, expect), 0, 0);
    BOOST_TEST(diff.empty(), diff);
  }
}

BOOST_AUTO_TEST_CASE(arena_reuses_storage_by_liveness) {
  // Ten chained adds of [256] floats: at most three buffers are alive at once.
  std::string body;
  std::string prev = "x";
  for (int i = 0; i < 10; ++i) {
    std::string next = i == 9 ? "z" : "t" + std::to_string(i);
    body += next + " = Add(" + prev + ", y) ";
    prev = next;
  }
  std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[256] x, float[256] y) => (float[256] z) { )" + body + "}";
  EmitStats stats;
  auto bytes = Emit(text, &stats);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  BOOST_TEST(stats.planned_bytes <= 2 * 1024);
  BOOST_TEST(stats.kernels == 1);  // one Add kernel, stored once
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  auto x = testing::RandomTensor(DType::kF32, {256}, -1, 1, 3);
  auto y = testing::RandomTensor(DType::kF32, {256}, -1, 1, 4);
  auto out = testing::RunExecutable(*exe, {x, y});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
  std::vector<double> xv = Values(*x), yv = Values(*y), expect;
  for (int i = 0; i < 256; ++i) {
    float acc = static_cast<float>(xv[i]);
    for (int k = 0; k < 10; ++k) acc += static_cast<float>(yv[i]);
    expect.push_back(acc);
  }
  std::string diff = Compare(*(*out)[0], *F32({256}, expect), 0, 0);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(every_unlowerable_op_is_listed_once) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] z) { a = Tanh(x)  b = Sigmoid(a)  c = Tanh(b)  z = Relu(c) }
  )";
  auto bytes = Emit(text);
  BOOST_REQUIRE(!bytes.ok());
  BOOST_TEST(bytes.status().code() == StatusCode::kUnsupported);
  const std::string& m = bytes.status().message();
  BOOST_TEST(m.find("Tanh") != std::string::npos, m);
  BOOST_TEST(m.find("Sigmoid") != std::string::npos, m);
  BOOST_TEST(m.find("2 op type") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(inputs_that_contradict_the_signature_are_rejected) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3] x, float[N, 3] y) => (float[N, 3] z) { z = Add(x, y) }
  )";
  auto bytes = Emit(text);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE(exe.ok());
  auto out = testing::RunExecutable(
      *exe, {testing::RandomTensor(DType::kF32, {2, 3}, 0, 1, 1),
             testing::RandomTensor(DType::kF32, {3, 3}, 0, 1, 2)});
  BOOST_REQUIRE(!out.ok());
  BOOST_TEST(out.status().message().find("'N'") != std::string::npos, out.status().message());
}

// ---- Fusion ----------------------------------------------------------------------------------

// Elementwise lowerings that record their element function (as compiler/lower's do).
template <int kArity>
Status LowerElementwise(LowerContext& ctx, const ElementFn& f) {
  std::vector<int> slots;
  for (int i = 0; i < kArity; ++i) slots.push_back(i);
  ctx.SetElementFn(slots, f);
  ctx.SetCompute(0, [&](const std::vector<jit::Expr>& index) {
    Lets lets;  // (unused here: these formulas reuse nothing)
    std::vector<jit::Expr> v;
    for (int i = 0; i < kArity; ++i) v.push_back(jit::Widen(jit::BroadcastLoad(ctx.in(i), index)));
    return f(lets, v);
  });
  return Status::Ok();
}

Status FAdd(LowerContext& c) {
  return LowerElementwise<2>(c, [](Lets&, const std::vector<jit::Expr>& v) { return jit::Add(v[0], v[1]); });
}
Status FMul(LowerContext& c) {
  return LowerElementwise<2>(c, [](Lets&, const std::vector<jit::Expr>& v) { return jit::Mul(v[0], v[1]); });
}
Status FRelu(LowerContext& c) {
  return LowerElementwise<1>(c, [](Lets&, const std::vector<jit::Expr>& v) {
    return jit::Max(v[0], jit::ConstLike(v[0], 0));
  });
}
// ReduceSum over the last axis with keepdims (an anchor: not elementwise).
Status FReduceSum(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  ctx.SetCompute(0, [&](const std::vector<jit::Expr>& index) {
    jit::Var k("k");
    std::vector<jit::Expr> at(index.begin(), index.end());
    at[rank - 1] = k;
    return jit::Sum({{k, ctx.InputDim(0, rank - 1)}}, jit::Load(ctx.in(0), at));
  });
  return Status::Ok();
}

const LoweringTable& FusionTable() {
  static const LoweringTable* t = [] {
    auto* t = new LoweringTable;
    t->MustAdd({"Add", 7, INT32_MAX, FAdd, AddShape});
    t->MustAdd({"Mul", 7, INT32_MAX, FMul, nullptr});
    t->MustAdd({"Relu", 6, INT32_MAX, FRelu, nullptr});
    t->MustAdd({"ReduceSum", 13, INT32_MAX, FReduceSum, nullptr});
    return t;
  }();
  return *t;
}

struct FusedRun {
  EmitStats stats;
  std::vector<TensorDataRef> out;
};

FusedRun CompileAndRun(const std::string& text, bool fuse, const std::vector<TensorDataRef>& in,
                       const LoweringTable& table = FusionTable()) {
  FusedRun r;
  auto g = testing::InferText(text);
  if (!g.ok()) BOOST_FAIL(g.status().message());
  EmitOptions o;
  o.table = &table;
  o.fuse = fuse;
  auto bytes = EmitExecutable(*g, o, &r.stats);
  if (!bytes.ok()) BOOST_FAIL(bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  if (!exe.ok()) BOOST_FAIL(exe.status().message());
  auto out = testing::RunExecutable(*exe, in);
  if (!out.ok()) BOOST_FAIL(out.status().message());
  r.out = *out;
  return r;
}

BOOST_AUTO_TEST_CASE(elementwise_chains_fuse_into_one_bit_identical_kernel) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 5] x, float[5] y, float[N, 5] z) => (float[N, 5] w) {
      a = Add(x, y)  b = Relu(a)  w = Mul(b, z)
    }
  )";
  for (int64_t n : {1, 7}) {
    std::vector<TensorDataRef> in = {testing::RandomTensor(DType::kF32, {n, 5}, -1, 1, 1),
                                     testing::RandomTensor(DType::kF32, {5}, -1, 1, 2),
                                     testing::RandomTensor(DType::kF32, {n, 5}, -1, 1, 3)};
    FusedRun fused = CompileAndRun(text, true, in);
    FusedRun plain = CompileAndRun(text, false, in);
    BOOST_TEST(fused.stats.kernels == 1);
    BOOST_TEST(fused.stats.fused_nodes == 2);
    BOOST_TEST(plain.stats.kernels == 3);
    std::string diff = Compare(*fused.out[0], *plain.out[0], 0, 0);
    BOOST_TEST(diff.empty(), diff);
    // And against a plain reference.
    std::vector<double> x = in[0]->ToDoubles(), y = in[1]->ToDoubles(), z = in[2]->ToDoubles(), e;
    for (int64_t i = 0; i < n * 5; ++i) {
      float a = static_cast<float>(x[i]) + static_cast<float>(y[i % 5]);
      e.push_back(std::max(a, 0.0f) * static_cast<float>(z[i]));
    }
    diff = Compare(*fused.out[0], *F32({n, 5}, e), 0, 0);
    BOOST_TEST(diff.empty(), diff);
  }
}

BOOST_AUTO_TEST_CASE(elementwise_consumers_become_a_reduction_epilogue) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 6] x, float[1] b) => (float[N, 1] w) {
      axes = Constant <value = int64[1] {1}> ()
      s = ReduceSum <keepdims = 1> (x, axes)
      a = Add(s, b)
      w = Relu(a)
    }
  )";
  std::vector<TensorDataRef> in = {testing::RandomTensor(DType::kF32, {4, 6}, -1, 1, 4),
                                   F32({1}, {0.25})};
  FusedRun fused = CompileAndRun(text, true, in);
  FusedRun plain = CompileAndRun(text, false, in);
  BOOST_TEST(fused.stats.kernels == 1);  // the reduction with Add + Relu at its store
  BOOST_TEST(fused.stats.fused_nodes == 2);
  BOOST_TEST(plain.stats.kernels == 3);
  std::string diff = Compare(*fused.out[0], *plain.out[0], 0, 0);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(values_read_twice_or_broadcast_are_not_recomputed) {
  // a is read by Relu and Mul, both of d's group: a joins the group too, bound once per element
  // inside the fused kernel (never stored, never computed twice); b = Relu(a) fuses as well.
  // c has shape [N, 1] and is broadcast by its consumer: not absorbed (it would be recomputed
  // once per column).
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x, float[N, 4] y, float[N, 1] p, float[N, 1] q) => (float[N, 4] d, float[N, 4] e) {
      a = Add(x, y)  b = Relu(a)  d = Mul(a, b)
      c = Add(p, q)  e = Mul(c, x)
    }
  )";
  std::vector<TensorDataRef> in = {testing::RandomTensor(DType::kF32, {3, 4}, -1, 1, 5),
                                   testing::RandomTensor(DType::kF32, {3, 4}, -1, 1, 6),
                                   testing::RandomTensor(DType::kF32, {3, 1}, -1, 1, 7),
                                   testing::RandomTensor(DType::kF32, {3, 1}, -1, 1, 8)};
  FusedRun fused = CompileAndRun(text, true, in);
  FusedRun plain = CompileAndRun(text, false, in);
  BOOST_TEST(fused.stats.fused_nodes == 2);  // a and b into d; c stays a kernel of its own
  BOOST_TEST(fused.stats.kernels == 3);  // fused d, c, e (plain: 5)
  BOOST_TEST(plain.stats.kernels == 5);
  for (int k = 0; k < 2; ++k) {
    std::string diff = Compare(*fused.out[k], *plain.out[k], 0, 0);
    BOOST_TEST(diff.empty(), diff);
  }
}

// The erf-GELU exporters write reads x twice (x * (1 + erf(x / sqrt 2)) * 0.5): the whole DAG,
// the bias Add before it included, becomes the epilogue of the matrix product (one kernel).
BOOST_AUTO_TEST_CASE(gelu_dag_becomes_the_matmul_epilogue) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 6] x, float[6, 5] w, float[5] b) => (float[N, 5] y) {
      m = MatMul(x, w)
      a = Add(m, b)
      s2 = Constant <value = float {1.4142135}> ()
      one = Constant <value = float {1.0}> ()
      half = Constant <value = float {0.5}> ()
      d = Div(a, s2)
      e = Erf(d)
      p = Add(e, one)
      q = Mul(a, p)
      y = Mul(q, half)
    }
  )";
  std::vector<TensorDataRef> in = {testing::RandomTensor(DType::kF32, {7, 6}, -2, 2, 9),
                                   testing::RandomTensor(DType::kF32, {6, 5}, -1, 1, 10),
                                   testing::RandomTensor(DType::kF32, {5}, -1, 1, 11)};
  FusedRun fused = CompileAndRun(text, true, in, LoweringTable::Global());
  FusedRun plain = CompileAndRun(text, false, in, LoweringTable::Global());
  BOOST_TEST(fused.stats.kernels == 1);
  BOOST_TEST(fused.stats.fused_nodes == 6);  // Add, Div, Erf, Add, Mul, Mul
  // Every rounding matches the unfused program, but erf may run as libmvec's vector variant in
  // one and glibc's scalar erff in the other (remainder columns): they differ by a few ulp.
  std::string diff = Compare(*fused.out[0], *plain.out[0], 1e-6, 1e-7);
  BOOST_TEST(diff.empty(), diff);
}

// A vendor for the test: blob "relu_add" computes relu(in0) + constant0 (f32, same shape).
class ReluAddRegion : public TensorFunction {
 public:
  explicit ReluAddRegion(Tensor c) : c_(std::move(c)) {}
  Status Run(const Tensor* const* args, int num_inputs, int num_outputs) override {
    const Tensor& x = *args[0];
    const Tensor& y = *args[1];
    if (x.NumElements() != y.NumElements() || c_.NumElements() != x.dim(x.rank() - 1)) {
      return InvalidArgument("relu_add: shapes do not match");
    }
    const float* xp = x.data_as<float>();
    const float* cp = c_.data_as<float>();
    float* yp = y.data_as<float>();
    int64_t inner = c_.NumElements();
    for (int64_t i = 0; i < x.NumElements(); ++i) yp[i] = std::max(xp[i], 0.0f) + cp[i % inner];
    return Status::Ok();
  }

 private:
  Tensor c_;
};

class TestVendor : public ExternalProvider {
 public:
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override {
    std::string blob(reinterpret_cast<const char*>(spec.blob), spec.blob_size);
    if (spec.vendor != "testvendor") return NotFound("no vendor " + std::string(spec.vendor));
    if (blob != "relu_add" || spec.constants.size() != 1 || spec.num_inputs != 1 ||
        spec.num_outputs != 1) {
      return InvalidArgument("bad region");
    }
    ++created;
    return std::unique_ptr<TensorFunction>(new ReluAddRegion(spec.constants[0]));
  }
  int created = 0;
};

BOOST_AUTO_TEST_CASE(external_regions_run_between_jit_kernels_at_symbolic_shapes) {
  auto g = testing::InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3] x, float[3] y) => (float[N, 3] z) {
      c = Constant <value = float[3] {10, 20, 30}> ()
      a = Relu(x)
      b = Add(a, c)
      z = Add(b, y)
    }
  )");
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  EmitOptions o;
  o.table = &Table();
  ExternalRegionToEmit r;
  r.vendor = "testvendor";
  r.name = "region0";
  r.nodes = {*g->FindNode(g->node(g->value(*g->FindValue("a")).producer).name),
             g->value(*g->FindValue("b")).producer};
  r.inputs = {*g->FindValue("x")};
  r.outputs = {*g->FindValue("b")};
  r.blob = {'r', 'e', 'l', 'u', '_', 'a', 'd', 'd'};
  r.constants.push_back({*g->FindValue("c"), nullptr});
  o.regions.push_back(r);
  o.fallbacks = false;  // main's own lowering; the region's fallback: fallback_test.cc
  EmitStats stats;
  auto bytes = EmitExecutable(*g, o, &stats);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  BOOST_TEST(stats.external_regions == 1);
  BOOST_TEST(stats.kernels == 1);  // only z = Add(b, y) is a JIT kernel
  auto vendor = std::make_shared<TestVendor>();
  auto exe = testing::LoadWithJit(*bytes, vendor);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  BOOST_TEST(vendor->created == 1);
  for (int64_t n : {1, 5}) {
    auto x = testing::RandomTensor(DType::kF32, {n, 3}, -1, 1, n);
    auto out = testing::RunExecutable(*exe, {x, F32({3}, {1, 2, 3})});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
    std::vector<double> xv = Values(*x), expect;
    const double c[3] = {10, 20, 30}, y[3] = {1, 2, 3};
    for (int64_t i = 0; i < n * 3; ++i) {
      expect.push_back(static_cast<float>(std::max<float>(xv[i], 0) + c[i % 3]) + y[i % 3]);
    }
    std::string diff = Compare(*(*out)[0], *F32({n, 3}, expect), 1e-6, 0);
    BOOST_TEST(diff.empty(), diff);
  }
  // Without the vendor the load fails, naming it.
  auto missing = testing::LoadWithJit(*bytes, nullptr);
  BOOST_TEST(!missing.ok());
}

BOOST_AUTO_TEST_CASE(a_region_that_hides_an_input_is_rejected) {
  auto g = testing::InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[3] x, float[3] y) => (float[3] z) { a = Add(x, y)  z = Relu(a) }
  )");
  BOOST_REQUIRE(g.ok());
  EmitOptions o;
  o.table = &Table();
  ExternalRegionToEmit r;
  r.vendor = "testvendor";
  r.name = "bad";
  r.nodes = {g->value(*g->FindValue("a")).producer};
  r.inputs = {*g->FindValue("x")};  // y is missing
  r.outputs = {*g->FindValue("a")};
  o.regions.push_back(r);
  auto bytes = EmitExecutable(*g, o);
  BOOST_REQUIRE(!bytes.ok());
  BOOST_TEST(bytes.status().message().find("'y'") != std::string::npos, bytes.status().message());
}


// Ifs nested in both branches of an If, and Loops in both inner else branches: ONNX leaves
// these nodes unnamed, so the importer names them per graph and both branches hold an "If_0"
// (and a "Loop_1"). Every VM function still gets a name of its own, or the loader rejects the
// file ("duplicate name").
constexpr const char* kNestedControlFlow = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (bool c, bool d, int64 m, float[N] x) => (float[N] y) {
    one = Constant <value = float {1}> ()
    two = Constant <value = float {2}> ()
    y = If (c) <
      then_branch = t () => (float[N] ty) {
        ty = If (d) <
          then_branch = t2 () => (float[N] a2) { a2 = Add(x, one) },
          else_branch = e2 () => (float[N] b2) {
            yes = Constant <value = bool {1}> ()
            b2 = Loop (m, yes, x) <
              body = l2 (int64 i, bool cin, float[N] v) => (bool cout, float[N] vout) {
                vout = Add(v, two)
                cout = Identity(cin)
              }
            >
          }
        >
      },
      else_branch = e () => (float[N] ey) {
        ey = If (d) <
          then_branch = t3 () => (float[N] a3) { a3 = Sub(x, one) },
          else_branch = e3 () => (float[N] b3) {
            yes = Constant <value = bool {1}> ()
            b3 = Loop (m, yes, x) <
              body = l3 (int64 i, bool cin, float[N] v) => (bool cout, float[N] vout) {
                vout = Mul(v, two)
                cout = Identity(cin)
              }
            >
          }
        >
      }
    >
  }
)";

// Renames every node of `g` and of its subgraphs to `name` ("" or one name shared by all).
void RenameNodes(Graph& g, const std::string& name) {
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    Node& node = g.mutable_node(n);
    node.name = name;
    for (auto& [key, attr] : node.attributes) {
      if (attr.type() == Attribute::Type::kGraph) RenameNodes(*attr.graph(), name);
    }
  }
}

BOOST_DATA_TEST_CASE(nested_control_flow_functions_have_unique_names,
                     boost::unit_test::data::make({"as imported", "", "node"}), rename) {
  auto g = testing::InferText(kNestedControlFlow);
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  if (std::string(rename) != "as imported") RenameNodes(*g, rename);
  EmitOptions o;
  o.table = &LoweringTable::Global();
  auto bytes = EmitExecutable(*g, o);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  BOOST_TEST((*exe)->num_functions() == 9);  // main, 2 + 4 branches, 2 loop bodies
  if (std::string(rename) == "as imported") {
    // Names stay readable where they are unique; the second "If_0" gets its parent's path.
    for (const char* f : {"If_2/then", "If_2/else", "If_0/then", "If_0/else", "Loop_1/body",
                          "If_2/else/If_0/then", "If_2/else/If_0/else"}) {
      BOOST_TEST((*exe)->FindFunction(f) >= 0, f);
    }
  }
  const std::vector<double> x = {0.5, -3, 7};
  for (int64_t m : {0, 3}) {
    for (bool c : {true, false}) {
      for (bool d : {true, false}) {
        std::vector<double> expect;
        for (double v : x) {
          expect.push_back(c ? (d ? v + 1 : v + 2.0 * m) : (d ? v - 1 : v * std::pow(2.0, m)));
        }
        auto out = testing::RunExecutable(
            *exe, {testing::MakeTensor(DType::kBool, {}, {double(c)}),
                   testing::MakeTensor(DType::kBool, {}, {double(d)}), testing::I64({}, {double(m)}),
                   F32({3}, x)});
        BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
        BOOST_TEST(Values(*(*out)[0]) == expect, "c=" << c << " d=" << d << " m=" << m);
      }
    }
  }
}

// Exporters guard code on ranks (`if x.dim() == 3`): the cond is known at compile time, the branch
// not taken may have another rank (kiln cannot type it) and is neither inferred nor emitted. The
// nested branch sees only `half` [B, floordiv(T + 1, 2)], which does not give T: the symbol comes
// from the enclosing function's parameter x.
constexpr const char* kRankGuardedIf = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[B, T] x) => (float[B, H] y) {
    shape = Shape(x)
    rank = Shape(shape)
    two = Constant <value = int64[1] {2}> ()
    c = Equal(rank, two)
    st = Constant <value = int64[1] {0}> ()
    en = Constant <value = int64[1] {1000000}> ()
    ax = Constant <value = int64[1] {1}> ()
    sp = Constant <value = int64[1] {2}> ()
    half = Slice(x, st, en, ax, sp)
    y = If (c) <
      then_branch = t () => (float[B, H] ty) {
        ty = If (c) <
          then_branch = t2 () => (float[B, H] a) { a = Identity(half) },
          else_branch = e2 () => (float[B, 1, H] b) { b = Unsqueeze(half, ax) }
        >
      },
      else_branch = e () => (float[B, 1, H] ey) { ey = Unsqueeze(half, ax) }
    >
  }
)";

BOOST_AUTO_TEST_CASE(if_on_a_known_rank_takes_its_branch_at_compile_time) {
  auto g = testing::InferText(kRankGuardedIf);
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  EmitOptions o;
  o.table = &LoweringTable::Global();
  auto bytes = EmitExecutable(*g, o);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().message());
  auto exe = testing::LoadWithJit(*bytes);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().message());
  BOOST_TEST((*exe)->num_functions() == 3);  // main and the two then branches
  for (int64_t t : {1, 4, 7}) {
    std::vector<double> x, expect;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < t; ++i) {
        x.push_back(10 * b + i);
        if (i % 2 == 0) expect.push_back(10 * b + i);
      }
    }
    auto out = testing::RunExecutable(*exe, {F32({2, t}, x)});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
    BOOST_TEST((*out)[0]->dims() == (std::vector<int64_t>{2, (t + 1) / 2}));
    BOOST_TEST(Values(*(*out)[0]) == expect, "T=" << t);
  }
}

}  // namespace
}  // namespace kiln::compiler
