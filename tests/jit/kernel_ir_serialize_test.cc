// Tests for jit/kernel_ir_serialize: round trips of every compute builder and hostile payloads.
#define BOOST_TEST_MODULE kernel_ir_serialize_test
#include "jit/kernel_ir_serialize.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "jit/compute.h"
#include "jit/precondition.h"

namespace kiln::jit {
namespace {

template <typename T>
Kernel Must(StatusOr<T> k) {
  BOOST_REQUIRE_MESSAGE(k.ok(), k.status().ToString());
  return *std::move(k);
}

// A hand-written kernel using every statement kind, symbolic dims, shared sub-expressions,
// a non-contiguous buffer and special float constants.
KernelPayload HandWritten() {
  Buffer in = Buffer::Param("in", DType::kF32, 2, /*contiguous=*/false);
  Buffer out = Buffer::Param("out", DType::kF32, 1);
  Buffer tmp = Buffer::Local("tmp", DType::kF32, {4});
  Var n("n"), m("m"), i("i"), j("j"), t("t", DType::kF32), k("k");
  Expr shared = Load(in, {i, j}) * FloatImm(-0.0);
  Stmt inner = Seq({
      Store(tmp, {IntImm(0)}, Sum({{k, m}}, Load(in, {i, k}))),
      Let(t, Max(shared, shared),
          If(IsNan(t), Store(out, {i}, FloatImm(std::numeric_limits<double>::infinity())),
             Store(out, {i}, Select(Lt(t, Load(tmp, {IntImm(0)})), t, FloatImm(1.5e-40))))),
  });
  Stmt body = For(i, n, ForKind::kParallel,
                  Allocate(tmp, For(j, IntImm(1), DimOf(in, 1) - 1, ForKind::kUnrolled, inner)));
  KernelPayload p;
  p.kernel = Kernel{"hand", {in, out}, {n, m}, body};
  p.dim_bindings = {{1, 0}, {0, 1}};
  return p;
}

std::vector<Kernel> BuilderKernels() {
  std::vector<Kernel> ks;
  ks.push_back(Elementwise(
      "ew3", {{DType::kF32, 2, {}}, {DType::kF16, 1, {}}, {DType::kI32, 3, {}}}, DType::kF32,
      [](const std::vector<Expr>& v) { return MulAdd(v[0], v[1], Cast(DType::kF32, v[2])); }));
  ks.push_back(
      ElementwiseUnary("erf", DType::kBF16, DType::kBF16, 3, [](Expr x) { return Erf(x); }));
  ks.push_back(ElementwiseBinary("add", {DType::kF32, 2, {BroadcastDim::kSame, BroadcastDim::kOne}},
                                 {DType::kF32, 1, {}}, DType::kF32,
                                 [](Expr a, Expr b) { return a + b; }));
  for (Reduction r : {Reduction::kSum, Reduction::kMean, Reduction::kProd, Reduction::kMax,
                      Reduction::kMin, Reduction::kArgMax, Reduction::kArgMin}) {
    ks.push_back(Must(ReduceKernel("reduce", r, DType::kF32, 3, {0, 2}, r == Reduction::kSum)));
  }
  ks.push_back(Must(TransposeKernel("transpose", DType::kI64, {2, 0, 1})));
  ks.push_back(Must(GatherKernel("gather", DType::kF32, 3, DType::kI32, 2, 1)));
  ks.push_back(SliceKernel("slice", DType::kU8, 4));
  for (PadMode m : {PadMode::kConstant, PadMode::kEdge, PadMode::kReflect}) {
    ks.push_back(PadKernel("pad", DType::kF32, 2, m));
  }
  ks.push_back(Must(ConcatKernel("concat", DType::kF32, 2, 3, 1)));
  PoolSpec pool;
  pool.kernel = {3, 3};
  pool.strides = {2, 2};
  pool.pads_begin = {1, 1};
  ks.push_back(Must(PoolKernel("maxpool", DType::kF32, pool)));
  pool.max = false;
  ks.push_back(Must(PoolKernel("avgpool", DType::kF16, pool)));
  ks.push_back(MatmulKernel("matmul"));
  return ks;
}

void CheckRoundTrip(const Kernel& k, const std::vector<DimBinding>& bindings) {
  BOOST_TEST_CONTEXT(k.name) {
    BOOST_REQUIRE(ValidateKernel(k).ok());
    std::vector<uint8_t> bytes = SerializeKernel(k, bindings);
    auto back = DeserializeKernelPayload(bytes.data(), bytes.size());
    BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
    BOOST_TEST(StructurallyEqual(k, back->kernel));
    BOOST_TEST(HashKernel(k) == HashKernel(back->kernel));
    BOOST_TEST(ToText(k) == ToText(back->kernel));  // names survive too
    BOOST_TEST(back->kernel.name == k.name);
    BOOST_REQUIRE(back->dim_bindings.size() == bindings.size());
    for (size_t i = 0; i < bindings.size(); ++i) {
      BOOST_TEST(back->dim_bindings[i].buffer == bindings[i].buffer);
      BOOST_TEST(back->dim_bindings[i].axis == bindings[i].axis);
    }
    // Serialization is deterministic and stable through a second trip.
    BOOST_TEST(SerializeKernel(back->kernel, back->dim_bindings) == bytes);
  }
}

std::vector<DimBinding> BindAllToFirstAxis(const Kernel& k) {
  // Slice/Pad dims are offsets, not sizes; any in-range binding serves a round trip.
  return std::vector<DimBinding>(k.dims.size(), DimBinding{0, 0});
}

BOOST_AUTO_TEST_CASE(round_trips_every_builder) {
  for (const Kernel& k : BuilderKernels()) CheckRoundTrip(k, BindAllToFirstAxis(k));
}

BOOST_AUTO_TEST_CASE(round_trips_every_statement_kind_and_bindings) {
  KernelPayload p = HandWritten();
  CheckRoundTrip(p.kernel, p.dim_bindings);
}

BOOST_AUTO_TEST_CASE(shared_subexpressions_are_stored_once) {
  Buffer out = Buffer::Param("out", DType::kF32, 0);
  Expr e = FloatImm(1);
  for (int i = 0; i < 20; ++i) e = e + e;  // a 2^20-leaf tree, 21 distinct nodes
  Kernel k{"dag", {out}, {}, Store(out, {}, e)};
  std::vector<uint8_t> bytes = SerializeKernel(k);
  BOOST_TEST(bytes.size() < 200u);
  auto back = DeserializeKernel(bytes.data(), bytes.size());
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(HashKernel(*back) == HashKernel(k));
}

void ExpectError(const std::vector<uint8_t>& bytes, StatusCode code, const std::string& part) {
  auto r = DeserializeKernelPayload(bytes.data(), bytes.size());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == code);
  BOOST_TEST(r.status().message().find(part) != std::string::npos, r.status().ToString());
}

BOOST_AUTO_TEST_CASE(rejects_bad_headers_and_versions) {
  std::vector<uint8_t> good = SerializeKernel(MatmulKernel("mm"));
  std::vector<uint8_t> b = good;
  b[0] = 'X';
  ExpectError(b, StatusCode::kInvalidFormat, "bad magic");
  b = good;
  b[4] = 2;  // major 2
  ExpectError(b, StatusCode::kUnsupported, "version 2." + std::to_string(kKirMinorVersion));
  b = good;
  b[6] = kKirMinorVersion + 1;  // newer than this reader
  ExpectError(b, StatusCode::kUnsupported, "version 1." + std::to_string(kKirMinorVersion + 1));
  b = good;
  b.push_back(0);
  ExpectError(b, StatusCode::kInvalidFormat, "1 trailing bytes");
  ExpectError({}, StatusCode::kInvalidFormat, "bad magic");
  BOOST_TEST(DeserializeKernel(nullptr, 0).status().code() == StatusCode::kInvalidFormat);
}

BOOST_AUTO_TEST_CASE(preconditions_round_trip_and_old_payloads_still_load) {
  Kernel k = MatmulKernel("mm");
  std::vector<Expr> pre = {Eq(DimOf(k.buffers[0], 1), DimOf(k.buffers[1], 0)),
                           Eq(DimOf(k.buffers[2], 0), DimOf(k.buffers[0], 0))};
  std::vector<uint8_t> bytes = SerializeKernel(k, {}, pre);
  auto back = DeserializeKernelPayload(bytes.data(), bytes.size());
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_REQUIRE_EQUAL(back->preconditions.size(), 2u);
  BOOST_TEST(ToText(back->preconditions[0]) == ToText(pre[0]));
  // A 1.0 payload (no precondition section) is still read.
  std::vector<uint8_t> old = SerializeKernel(k);
  old.pop_back();  // the empty precondition count
  old[6] = 0;      // minor 0
  auto r = DeserializeKernelPayload(old.data(), old.size());
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(r->preconditions.empty());
}

BOOST_AUTO_TEST_CASE(preconditions_may_only_read_dims) {
  Kernel k = MatmulKernel("mm");
  Var i("i");
  // A load or a free variable is not a shape fact.
  ExpectError(SerializeKernel(k, {}, {Gt(Load(k.buffers[0], {IntImm(0), IntImm(0)}), FloatImm(0))}),
              StatusCode::kInvalidFormat, "not allowed");
  ExpectError(SerializeKernel(k, {}, {Eq(Expr(i), IntImm(1))}), StatusCode::kInvalidFormat,
              "not allowed");
  ExpectError(SerializeKernel(k, {}, {DimOf(k.buffers[0], 0)}), StatusCode::kInvalidFormat,
              "is not bool");
}

BOOST_AUTO_TEST_CASE(rejects_bindings_that_do_not_fit) {
  KernelPayload p = HandWritten();
  ExpectError(SerializeKernel(p.kernel, {}), StatusCode::kInvalidFormat,
              "0 dim bindings for 2 dims");
  ExpectError(SerializeKernel(p.kernel, {{0, 0}, {2, 0}}), StatusCode::kInvalidFormat,
              "binding buffer index 2 >= 2");
  ExpectError(SerializeKernel(p.kernel, {{0, 0}, {1, 1}}), StatusCode::kInvalidFormat,
              "binding axis index 1 >= 1");
}

BOOST_AUTO_TEST_CASE(rejects_invalid_ir_through_validation) {
  Buffer out = Buffer::Param("out", DType::kF32, 1);
  Var i("i");
  // Stores an i64 into an f32 buffer: well-formed bytes, ill-typed IR.
  Kernel k{"bad_store", {out}, {}, For(i, DimOf(out, 0), ForKind::kSerial, Store(out, {i}, i))};
  ExpectError(SerializeKernel(k), StatusCode::kInvalidFormat, "kernel IR: ");
}

BOOST_AUTO_TEST_CASE(rejects_nesting_deeper_than_the_limit) {
  Buffer out = Buffer::Param("out", DType::kF32, 0);
  Expr e = FloatImm(1);
  for (int i = 0; i < kMaxDepth + 10; ++i) e = Neg(e);
  Kernel k{"deep", {out}, {}, Store(out, {}, e)};
  ExpectError(SerializeKernel(k), StatusCode::kInvalidFormat, "nesting deeper than the limit");
}

BOOST_AUTO_TEST_CASE(rejects_dags_that_expand_to_huge_trees) {
  Buffer out = Buffer::Param("out", DType::kF32, 0);
  Expr e = FloatImm(1);
  for (int i = 0; i < 40; ++i) e = e + e;  // tiny payload, 2^40-node tree for any recursive walk
  Kernel k{"bomb", {out}, {}, Store(out, {}, e)};
  std::vector<uint8_t> bytes = SerializeKernel(k);
  BOOST_TEST(bytes.size() < 400u);
  ExpectError(bytes, StatusCode::kInvalidFormat, "tree too large");
}

// Decoding must end in a value or an error for any bytes; a crash fails the whole binary.
void DecodeMustNotCrash(const std::vector<uint8_t>& bytes, int* ok_count) {
  auto r = DeserializeKernelPayload(bytes.data(), bytes.size());
  if (r.ok()) {
    ++*ok_count;
    BOOST_REQUIRE(ValidateKernel(r->kernel).ok());
  } else {
    StatusCode c = r.status().code();
    BOOST_REQUIRE(c == StatusCode::kInvalidFormat || c == StatusCode::kUnsupported);
  }
}

BOOST_AUTO_TEST_CASE(every_truncation_is_an_error) {
  std::vector<Kernel> ks = BuilderKernels();
  KernelPayload hand = HandWritten();
  std::vector<std::vector<uint8_t>> payloads = {SerializeKernel(hand.kernel, hand.dim_bindings),
                                                SerializeKernel(ks.back()), SerializeKernel(ks[0])};
  for (const auto& full : payloads) {
    for (size_t n = 0; n < full.size(); ++n) {
      std::vector<uint8_t> prefix(full.begin(), full.begin() + n);
      auto r = DeserializeKernelPayload(prefix.data(), prefix.size());
      BOOST_REQUIRE(!r.ok());
      BOOST_REQUIRE(r.status().code() == StatusCode::kInvalidFormat);
    }
  }
}

BOOST_AUTO_TEST_CASE(byte_flips_never_crash) {
  std::vector<Kernel> ks = BuilderKernels();
  KernelPayload hand = HandWritten();
  std::vector<std::vector<uint8_t>> payloads = {SerializeKernel(hand.kernel, hand.dim_bindings),
                                                SerializeKernel(ks.back()), SerializeKernel(ks[2]),
                                                SerializeKernel(ks[3])};
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int ok_count = 0, trials = 0;
  for (const auto& full : payloads) {
    for (int t = 0; t < 1500; ++t) {
      std::vector<uint8_t> b = full;
      int flips = 1 + static_cast<int>(next() % 3);
      for (int f = 0; f < flips; ++f) {
        size_t pos = next() % b.size();
        b[pos] = (next() % 4 == 0) ? static_cast<uint8_t>(next()) : b[pos] ^ (1u << (next() % 8));
      }
      DecodeMustNotCrash(b, &ok_count);
      ++trials;
    }
  }
  BOOST_TEST(trials == 6000);
  // Most flips land in names or constants and still decode; many do not. Both paths ran.
  BOOST_TEST(ok_count > 0);
  BOOST_TEST(ok_count < trials);
}

}  // namespace
}  // namespace kiln::jit
