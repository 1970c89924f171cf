// Tests for jit/codegen_vector.cc's transpose tile: an 8 x 8 nest of kVectorized loops copying
// between two buffers with its loop variables swapped becomes vector loads, shuffles and vector
// stores. Every element width moves bit for bit; nests that do not fit stay loops.
#define BOOST_TEST_MODULE codegen_vector_test
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <regex>
#include <string>

#include "jit/codegen.h"
#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::TestBuffer;
namespace data = boost::unit_test::data;

// out[p, a, b] = in[p, b, a] over whole 8 x 8 blocks of (a, b), the inner extents `ea` x `eb`
// (8 x 8 is the tile), with `in` strided when `strided_in` (its strides from the caller).
Kernel TileKernel(DType t, int64_t ea, int64_t eb, bool strided_in = false) {
  Buffer in = Buffer::Param("in", t, 3, /*contiguous=*/!strided_in);
  Buffer out = Buffer::Param("out", t, 3);
  Var p("p"), ta("ta"), tb("tb"), a("a"), b("b");
  Stmt copy = Store(out, {p, a, b}, Load(in, {p, b, a}));
  Stmt tile = For(a, ta * 8, IntImm(ea), ForKind::kVectorized,
                  For(b, tb * 8, IntImm(eb), ForKind::kVectorized, copy));
  Stmt blocks = For(ta, FloorDiv(DimOf(out, 1), IntImm(8)), ForKind::kSerial,
                    For(tb, FloorDiv(DimOf(out, 2), IntImm(8)), ForKind::kSerial, tile));
  return {"tile", {in, out}, {}, For(p, DimOf(out, 0), ForKind::kParallel, blocks)};
}

// Raw (unoptimized) IR: what the code generator itself emitted.
std::string RawIR(const Kernel& kernel) {
  StatusOr<TargetInfo> target = DetectHostTarget();
  BOOST_REQUIRE_MESSAGE(target.ok(), target.status().ToString());
  CodegenOptions options;
  options.optimize = false;
  StatusOr<KernelModule> generated = GenerateModule(kernel, "k", *target, options);
  BOOST_REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
  return ModuleText(*generated);
}

size_t Count(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// A distinct value per element that the dtype holds exactly (bool: a pattern of 0 and 1).
void Fill(TestBuffer& buf) {
  for (int64_t k = 0; k < buf.size(); ++k) {
    if (IsFloat(buf.dtype())) {
      buf.Set(k, static_cast<double>(k % 2000) - 1000.5);
    } else if (buf.dtype() == DType::kBool) {
      buf.SetI(k, (k * 7 + k / 3) % 2);
    } else {
      buf.SetI(k, (k * 37) % 251 - 120);
    }
  }
}

const DType kTypes[] = {DType::kBool, DType::kI8,  DType::kU8,  DType::kF16, DType::kBF16,
                        DType::kI16,  DType::kF32, DType::kI32, DType::kF64, DType::kI64};

// Every element width, blocks at offsets (the second of two tiles along each dim) and an outer
// index: out equals in transposed, bit for bit.
BOOST_DATA_TEST_CASE(tile_moves_every_dtype_bit_for_bit, data::make(kTypes), dtype) {
  KernelFn fn = CompileOrFail(TileKernel(dtype, 8, 8));
  BOOST_REQUIRE(fn);
  const int64_t n = 3, na = 16, nb = 24;
  TestBuffer in(dtype, {n, nb, na}), out(dtype, {n, na, nb});
  Fill(in);
  Call(fn, {&in, &out});
  for (int64_t p = 0; p < n; ++p)
    for (int64_t a = 0; a < na; ++a)
      for (int64_t b = 0; b < nb; ++b) {
        int64_t got = out.Offset({p, a, b}), want = in.Offset({p, b, a});
        if (IsFloat(dtype)) {
          BOOST_TEST(out.GetDouble(got) == in.GetDouble(want), p << "," << a << "," << b);
        } else {
          BOOST_TEST(out.GetInt(got) == in.GetInt(want), p << "," << a << "," << b);
        }
      }
}

// The tile is emitted as 8 vector loads, 24 shuffles and 8 vector stores of the element's
// integer width, and no element-wise access of the two buffers remains in it.
BOOST_AUTO_TEST_CASE(tile_is_vector_loads_shuffles_and_stores) {
  for (auto [t, bits] : {std::pair<DType, int>{DType::kF32, 32}, {DType::kI8, 8}, {DType::kF64, 64}}) {
    std::string ir = RawIR(TileKernel(t, 8, 8));
    const std::string vec = "<8 x i" + std::to_string(bits) + ">";
    BOOST_TEST_CONTEXT(DTypeShortName(t)) {
      BOOST_TEST(Count(ir, "load " + vec + ", ptr") == 8u);
      BOOST_TEST(Count(ir, "store " + vec + " ") == 8u);
      BOOST_TEST(Count(ir, "shufflevector " + vec + " ") == 24u);
    }
  }
}

// Nests that are not whole 8 x 8 copies with swapped last dims stay loops (and stay correct):
// a 4 x 8 and an 8 x 7 nest, and an input whose strides come from the caller.
BOOST_AUTO_TEST_CASE(other_nests_stay_loops) {
  BOOST_TEST(Count(RawIR(TileKernel(DType::kF32, 4, 8)), "shufflevector") == 0u);
  BOOST_TEST(Count(RawIR(TileKernel(DType::kF32, 8, 7)), "shufflevector") == 0u);
  BOOST_TEST(Count(RawIR(TileKernel(DType::kF32, 8, 8, true)), "shufflevector") == 0u);
  KernelFn fn = CompileOrFail(TileKernel(DType::kI32, 8, 8, true));
  BOOST_REQUIRE(fn);
  // in: [2, 16, 8] with row stride 11 (padding) and plane stride 200.
  TestBuffer in(DType::kI32, {2, 16, 8}, {200, 11, 1}), out(DType::kI32, {2, 8, 16});
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t b = 0; b < 16; ++b)
      for (int64_t a = 0; a < 8; ++a) in.SetInt(in.Offset({p, b, a}), 1000 * p + 10 * b + a);
  Call(fn, {&in, &out});
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t a = 0; a < 8; ++a)
      for (int64_t b = 0; b < 16; ++b)
        BOOST_TEST(out.GetInt(out.Offset({p, a, b})) == 1000 * p + 10 * b + a);
}

// out[a, b] = f(in[b, a], r[a, b]) as fusion writes an epilogue: Lets around the Store.
Kernel EpilogueKernel(ExprOp op) {
  Buffer in = Buffer::Param("in", DType::kF32, 2), r = Buffer::Param("r", DType::kF32, 2);
  Buffer out = Buffer::Param("out", DType::kF32, 2);
  Var ta("ta"), tb("tb"), a("a"), b("b"), e0("e0", DType::kF32), e1("e1", DType::kF32);
  Expr value = op == ExprOp::kAdd ? e0 * e0 + e1 : Unary(op, e0) + e1;
  Stmt body = Let(e0, Load(in, {b, a}), Let(e1, Load(r, {a, b}), Store(out, {a, b}, value)));
  Stmt tile = For(a, ta * 8, IntImm(8), ForKind::kVectorized,
                  For(b, tb * 8, IntImm(8), ForKind::kVectorized, body));
  return {"epilogue",
          {in, r, out},
          {},
          For(ta, FloorDiv(DimOf(out, 0), IntImm(8)), ForKind::kSerial,
              For(tb, FloorDiv(DimOf(out, 1), IntImm(8)), ForKind::kSerial, tile))};
}

// A lane-wise epilogue (in^2 + r) rides on the tile: its operands stay in vectors along b.
// One that is not (erf) keeps the loops. Both equal the element-wise reference.
BOOST_AUTO_TEST_CASE(fused_epilogue_on_the_tile) {
  for (ExprOp op : {ExprOp::kAdd, ExprOp::kErf}) {
    BOOST_TEST_CONTEXT(ExprOpName(op)) {
      BOOST_TEST(Count(RawIR(EpilogueKernel(op)), "shufflevector") ==
                 (op == ExprOp::kAdd ? 24u : 0u));
      KernelFn fn = CompileOrFail(EpilogueKernel(op));
      BOOST_REQUIRE(fn);
      TestBuffer in(DType::kF32, {24, 16}), r(DType::kF32, {16, 24}), out(DType::kF32, {16, 24});
      for (int64_t k = 0; k < 384; ++k) {
        in.Set(k, (k % 97) / 8.0 - 6);
        r.Set(k, (k % 13) * 0.25);
      }
      Call(fn, {&in, &r, &out});
      for (int64_t a = 0; a < 16; ++a)
        for (int64_t b = 0; b < 24; ++b) {
          float x = static_cast<float>(in.GetDouble(in.Offset({b, a})));
          float y = static_cast<float>(r.GetDouble(r.Offset({a, b})));
          float want = op == ExprOp::kAdd ? x * x + y : std::erf(x) + y;
          double got = out.GetDouble(out.Offset({a, b}));
          // erf: the vector erf's few ulps (jit/codegen_expr.cc); in^2 + r: exact or one
          // rounding less when contracted to an FMA.
          BOOST_TEST(std::abs(got - want) <= 4e-6 * (1 + std::abs(want)), a << "," << b);
        }
    }
  }
}

}  // namespace
}  // namespace kiln::jit
