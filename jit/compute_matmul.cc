// Compute builder for f32 matrix multiplication, tiled into register blocks.
#include "jit/compute.h"

namespace kiln::jit {
namespace {

// A tile of kRows x kCols outputs accumulates in local scratch that LLVM keeps in vector
// registers (6 x 64 f32 = 24 AVX-512 registers), streaming one row of B per k step.
constexpr int64_t kRows = 6;
constexpr int64_t kCols = 64;

struct MatmulOperands {
  Buffer a, b, c, acc;
  Expr i0, j0;  // the tile's first row and column
};

// One tile with `rows` x `cols` valid outputs. Full tiles use constant extents so the row loops
// unroll and the column loops vectorize without remainders; edge tiles use the dynamic extents.
Stmt Tile(const MatmulOperands& m, const Expr& rows, const Expr& cols, bool full) {
  ForKind row_kind = full ? ForKind::kUnrolled : ForKind::kSerial;
  Var i("ii"), j("jj"), k("k"), i2("ii"), j2("jj"), i3("ii"), j3("jj");
  Var a_ik("a_ik", DType::kF32);
  Stmt init =
      For(i, rows, row_kind, For(j, cols, ForKind::kVectorized, Store(m.acc, {i, j}, FloatImm(0))));
  Expr update = MulAdd(a_ik, Load(m.b, {k, m.j0 + j2}), Load(m.acc, {i2, j2}));
  Stmt accumulate =
      For(k, DimOf(m.a, 1), ForKind::kSerial,
          For(i2, rows, row_kind,
              Let(a_ik, Load(m.a, {m.i0 + i2, k}),
                  For(j2, cols, ForKind::kVectorized, Store(m.acc, {i2, j2}, update)))));
  Stmt write = For(i3, rows, row_kind,
                   For(j3, cols, ForKind::kVectorized,
                       Store(m.c, {m.i0 + i3, m.j0 + j3}, Load(m.acc, {i3, j3}))));
  return Seq({init, accumulate, write});
}

}  // namespace

Kernel MatmulKernel(std::string name) {
  MatmulOperands m;
  m.a = Buffer::Param("a", DType::kF32, 2);
  m.b = Buffer::Param("b", DType::kF32, 2);
  m.c = Buffer::Param("c", DType::kF32, 2);
  m.acc = Buffer::Local("acc", DType::kF32, {kRows, kCols});
  Var i0("i0"), j0("j0"), rows("rows"), cols("cols");
  m.i0 = i0;
  m.j0 = j0;
  Expr full = And(Eq(rows, IntImm(kRows)), Eq(cols, IntImm(kCols)));
  Stmt tile = Let(rows, Min(IntImm(kRows), DimOf(m.c, 0) - i0),
                  Let(cols, Min(IntImm(kCols), DimOf(m.c, 1) - j0),
                      Allocate(m.acc, If(full, Tile(m, IntImm(kRows), IntImm(kCols), true),
                                         Tile(m, rows, cols, false)))));
  // Tiles run column panel by column panel (t = jo * row_tiles + io), so a thread's contiguous
  // chunk of t reuses one K x 64 panel of B from cache across many row tiles.
  Expr row_tiles = FloorDiv(DimOf(m.c, 0) + (kRows - 1), IntImm(kRows));
  Expr col_tiles = FloorDiv(DimOf(m.c, 1) + (kCols - 1), IntImm(kCols));
  Var t("t");
  Stmt body =
      For(t, row_tiles * col_tiles, ForKind::kParallel,
          Let(i0, FloorMod(t, row_tiles) * kRows, Let(j0, FloorDiv(t, row_tiles) * kCols, tile)));
  return {std::move(name), {m.a, m.b, m.c}, {}, body};
}

}  // namespace kiln::jit
