// Lowerings of the shape_ops family: views (Reshape, Flatten, Squeeze, Unsqueeze), data movement
// (Transpose, Concat, Split, Slice, Expand, Tile, Pad), generators (Shape, Size,
// ConstantOfShape, Range, Constant, EyeLike) and the run-time shape functions of the ones whose
// output shape can depend on input values.
//
// Parameters that ONNX passes as tensors (Reshape's shape, Slice's starts, Pad's pads, ...) are
// compile-time constants when shape inference knows them, and are otherwise loaded from their
// buffers inside the kernel, so one lowering serves both cases.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "compiler/lower/loops.h"
#include "compiler/lower/lower.h"
#include "jit/compute.h"
#include "jit/kernel_ir.h"

namespace kiln::compiler {
namespace {

using jit::Expr;
using jit::ForKind;
using jit::IntImm;
using jit::Stmt;
using jit::Var;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Expr Clamp(Expr v, Expr lo, Expr hi) { return jit::Max(jit::Min(std::move(v), std::move(hi)), lo); }

// Element k of the rank-0/1 integer (or integral float) input i as i64: a constant when shape
// inference knows it, else loaded inside the kernel.
Expr IntParam(const NodeContext& ctx, int i, int k) {
  if (std::optional<std::vector<int64_t>> v = ctx.InputConstInts(i);
      v && k < static_cast<int>(v->size())) {
    return IntImm((*v)[k]);
  }
  std::vector<Expr> index;
  if (ctx.input_rank(i) == 1) index.push_back(IntImm(k));
  return jit::Cast(DType::kI64, jit::Load(ctx.in(i), index));
}

// Element 0 of a rank-0/1 input in its own dtype (scalars passed as [1] tensors).
Expr ScalarLoad(const NodeContext& ctx, int i) {
  std::vector<Expr> index;
  if (ctx.input_rank(i) == 1) index.push_back(IntImm(0));
  return jit::Load(ctx.in(i), index);
}

// The constant length of 1-D input i (shape inference requires it for shape-carrying inputs).
StatusOr<int> ConstLength(const NodeContext& ctx, int i, std::string_view what) {
  if (ctx.input_rank(i) != 1 || !ctx.input_shape(i)[0].is_const())
    return ctx.UnsupportedError(std::string(what) + " must be 1-D with a static length");
  return static_cast<int>(ctx.input_shape(i)[0].const_value());
}

Expr InputCount(const NodeContext& ctx, int i) {
  Expr n = IntImm(1);
  for (int d = 0; d < ctx.input_rank(i); ++d) n = n * ctx.InputDim(i, d);
  return n;
}

// -1 where `ok` is false: how a shape function reports contradictory inputs.
Expr OrMinusOne(Expr ok, Expr dim) {
  return jit::Select(std::move(ok), std::move(dim), IntImm(-1));
}

Stmt StoreDims(const ShapeFuncContext& ctx, int output, const std::vector<Expr>& dims) {
  std::vector<Stmt> stores;
  for (size_t d = 0; d < dims.size(); ++d)
    stores.push_back(jit::Store(ctx.out_shape(output), {IntImm(static_cast<int64_t>(d))}, dims[d]));
  return jit::Seq(stores);
}

// ---- Views -----------------------------------------------------------------------------------

Status LowerView(LowerContext& ctx) {
  ctx.SetView(0);
  return Status::Ok();
}

// Reshape's output dims from the shape values: 0 copies the input dim (unless allowzero), one
// -1 takes what is left. Every dim is -1 when the values contradict the input's element count.
Status ReshapeShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "shape"));
  ASSIGN_OR_RETURN(int64_t allowzero, ctx.GetInt("allowzero", 0));
  int in_rank = ctx.input_rank(0);
  std::vector<Expr> d(n);
  Expr valid = IntImm(1, DType::kBool), infer_count = IntImm(0), known = IntImm(1);
  Expr any_zero = IntImm(0, DType::kBool);
  for (int i = 0; i < n; ++i) {
    Expr v = IntParam(ctx, 1, i);
    if (!allowzero) {
      Expr copied = i < in_rank ? ctx.InputDim(0, i) : IntImm(-2);  // copying a missing dim
      v = jit::Select(jit::Eq(v, IntImm(0)), copied, v);
    } else {
      any_zero = jit::Or(any_zero, jit::Eq(v, IntImm(0)));
    }
    d[i] = v;
    valid = jit::And(valid, jit::Ge(v, IntImm(-1)));
    Expr is_infer = jit::Eq(v, IntImm(-1));
    infer_count = infer_count + jit::Select(is_infer, IntImm(1), IntImm(0));
    known = known * jit::Select(is_infer, IntImm(1), v);
  }
  Expr total = InputCount(ctx, 0);
  Var k("known"), t("total"), c("infer_count");
  Expr inferred = jit::FloorDiv(t, k);
  Expr ok = jit::And(valid, jit::Le(c, IntImm(1)));
  ok = jit::And(ok, jit::Select(jit::Eq(c, IntImm(1)),
                                jit::And(jit::And(jit::Ne(k, IntImm(0)), jit::Not(any_zero)),
                                         jit::Eq(jit::FloorMod(t, k), IntImm(0))),
                                jit::Eq(k, t)));
  std::vector<Expr> dims;
  for (int i = 0; i < n; ++i)
    dims.push_back(OrMinusOne(ok, jit::Select(jit::Eq(d[i], IntImm(-1)), inferred, d[i])));
  ctx.SetBody(
      jit::Let(k, known, jit::Let(t, total, jit::Let(c, infer_count, StoreDims(ctx, 0, dims)))));
  return Status::Ok();
}

// The axes of Squeeze / Unsqueeze: the attribute before opset 13, else input 1 (nullopt when
// absent). `runtime` is set when the input is only known at run time.
StatusOr<std::optional<std::vector<int64_t>>> SqueezeAxes(const NodeContext& ctx, bool* runtime) {
  *runtime = false;
  if (ctx.opset() < 13) return ctx.GetInts("axes");
  if (!ctx.has_input(1)) return std::optional<std::vector<int64_t>>();
  std::optional<std::vector<int64_t>> axes = ctx.InputConstInts(1);
  *runtime = !axes.has_value();
  return axes;
}

// Input dim number `index` (a run-time value in [0, rank)), -1 when out of range.
Expr DimAt(const NodeContext& ctx, const Expr& index) {
  Expr dim = IntImm(-1);
  for (int d = ctx.input_rank(0) - 1; d >= 0; --d)
    dim = jit::Select(jit::Eq(index, IntImm(d)), ctx.InputDim(0, d), dim);
  return dim;
}

// Run-time axes normalized against `rank`, and whether they are all in range and distinct.
std::vector<Expr> RuntimeAxes(const NodeContext& ctx, int count, int rank, Expr* ok) {
  std::vector<Expr> axes;
  *ok = IntImm(1, DType::kBool);
  for (int k = 0; k < count; ++k) {
    Expr a = IntParam(ctx, 1, k);
    a = jit::Select(jit::Lt(a, IntImm(0)), a + rank, a);
    *ok = jit::And(*ok, jit::And(jit::Ge(a, IntImm(0)), jit::Lt(a, IntImm(rank))));
    for (const Expr& b : axes) *ok = jit::And(*ok, jit::Ne(a, b));
    axes.push_back(a);
  }
  return axes;
}

Expr AnyEqual(const std::vector<Expr>& axes, int d) {
  Expr any = IntImm(0, DType::kBool);
  for (const Expr& a : axes) any = jit::Or(any, jit::Eq(a, IntImm(d)));
  return any;
}

// Squeeze: the dropped dims must be 1 and (without axes) no kept dim may turn out 1 at run time.
Status SqueezeShape(ShapeFuncContext& ctx) {
  int rank = ctx.input_rank(0);
  bool runtime;
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, SqueezeAxes(ctx, &runtime));
  if (runtime) {
    // Output dim o is the o-th input dim not dropped.
    ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "axes"));
    Expr ok;
    std::vector<Expr> a = RuntimeAxes(ctx, n, rank, &ok);
    for (const Expr& e : a) ok = jit::And(ok, jit::Eq(DimAt(ctx, e), IntImm(1)));
    std::vector<Expr> dims(rank - n, IntImm(-1));
    Expr kept_before = IntImm(0);
    for (int d = 0; d < rank; ++d) {
      Expr kept = jit::Not(AnyEqual(a, d));
      for (int o = 0; o < rank - n; ++o)
        dims[o] = jit::Select(jit::And(kept, jit::Eq(kept_before, IntImm(o))), ctx.InputDim(0, d),
                              dims[o]);
      kept_before = kept_before + jit::Select(kept, IntImm(1), IntImm(0));
    }
    for (Expr& e : dims) e = OrMinusOne(ok, e);
    ctx.SetBody(StoreDims(ctx, 0, dims));
    return Status::Ok();
  }
  std::vector<bool> drop(rank, false);
  if (axes) {
    for (int64_t a : *axes) {
      ASSIGN_OR_RETURN(int n, ctx.NormalizeAxis(a, rank));
      drop[n] = true;
    }
  } else {
    for (int d = 0; d < rank; ++d) {
      const DimExpr& e = ctx.input_shape(0)[d];
      drop[d] = e.is_const() && e.const_value() == 1;
    }
  }
  Expr ok = IntImm(1, DType::kBool);
  std::vector<Expr> dims;
  for (int d = 0; d < rank; ++d) {
    Expr is_one = jit::Eq(ctx.InputDim(0, d), IntImm(1));
    if (drop[d]) {
      ok = jit::And(ok, is_one);
    } else {
      if (!axes) ok = jit::And(ok, jit::Not(is_one));
      dims.push_back(ctx.InputDim(0, d));
    }
  }
  for (Expr& e : dims) e = OrMinusOne(ok, e);
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

// Unsqueeze: a 1 at each (normalized) axis of the output, the input dims in order elsewhere.
Status UnsqueezeShape(ShapeFuncContext& ctx) {
  int rank = ctx.input_rank(0);
  bool runtime;
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, SqueezeAxes(ctx, &runtime));
  int n = axes ? static_cast<int>(axes->size()) : 0;
  if (runtime) {
    ASSIGN_OR_RETURN(n, ConstLength(ctx, 1, "axes"));
  }
  int out_rank = rank + n;
  Expr ok = IntImm(1, DType::kBool);
  std::vector<Expr> a;
  if (runtime) {
    a = RuntimeAxes(ctx, n, out_rank, &ok);
  } else {
    for (int64_t v : *axes) {
      ASSIGN_OR_RETURN(int norm, ctx.NormalizeAxis(v, out_rank));
      a.push_back(IntImm(norm));
    }
  }
  std::vector<Expr> dims;
  for (int o = 0; o < out_rank; ++o) {
    Expr below = IntImm(0);
    for (const Expr& e : a)
      below = below + jit::Select(jit::Lt(e, IntImm(o)), IntImm(1), IntImm(0));
    Expr dim = jit::Select(AnyEqual(a, o), IntImm(1), DimAt(ctx, IntImm(o) - below));
    dims.push_back(OrMinusOne(ok, dim));
  }
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

// ---- Transpose -------------------------------------------------------------------------------

StatusOr<std::vector<int>> Permutation(const LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> p, ctx.GetInts("perm"));
  std::vector<int> perm;
  if (!p || p->empty()) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  } else {
    for (int64_t v : *p) perm.push_back(static_cast<int>(v));
  }
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < static_cast<int>(sorted.size()); ++i)
    if (sorted[i] != i || static_cast<int>(sorted.size()) != rank)
      return ctx.Error("perm is not a permutation of rank " + std::to_string(rank));
  return perm;
}

// Side of the register-transposed blocks (EmitTransposeTile's 8 x 8).
constexpr int64_t kBlock = 8;

// Whether TiledTranspose's full tiles of `dtype` go through 8 x 8 register blocks: 4-byte types
// (f32, i32, u32), whose 8-lane rows are one AVX2 vector. The code generator moves any element
// width bit for bit; the others stay on the loop until measured.
bool RegisterTransposeFits(DType dtype, int64_t cols) {
  return DTypeSize(dtype) == 4 && cols % kBlock == 0;
}

// The input's innermost dim moves: copy in tiles of kRows output rows x `cols` output columns,
// parallel over (other dims x row tiles), vectorized along output rows. The tile is narrow
// (32 bytes of each output row) because its input rows are a power-of-two stride apart in the
// common shapes, so they share L1 sets: a tile reads only `cols` input lines, each reused for
// kRows output rows. Measured on 1024x1024 f32 (one thread): 32x8 ~0.75 ms, 32x32 ~2.6 ms.
Stmt TiledTranspose(const LowerContext& ctx, const std::vector<int>& perm) {
  constexpr int64_t kRows = 32;
  const int64_t cols =
      std::max<int64_t>(32 / static_cast<int64_t>(DTypeSize(ctx.input_dtype(0))), 4);
  int rank = static_cast<int>(perm.size());
  int q = static_cast<int>(std::find(perm.begin(), perm.end(), rank - 1) - perm.begin());
  int j = rank - 1;
  std::vector<Expr> dims = ctx.OutputDims(0);
  std::vector<int> rest;
  for (int d = 0; d < rank; ++d)
    if (d != q && d != j) rest.push_back(d);
  std::vector<Expr> index(rank);
  Var outer("outer"), tj("tj"), a("a"), b("b"), row0("row0"), col0("col0");
  Expr tiles_q = jit::FloorDiv(dims[q] + (kRows - 1), IntImm(kRows));
  Expr tiles_j = jit::FloorDiv(dims[j] + (cols - 1), IntImm(cols));
  index[q] = row0 + a;
  index[j] = col0 + b;
  std::vector<Var> rest_vars;
  for (int d : rest) {
    rest_vars.emplace_back("r" + std::to_string(d));
    index[d] = rest_vars.back();
  }
  std::vector<Expr> src(rank);
  for (int k = 0; k < rank; ++k) src[perm[k]] = index[k];
  Stmt copy = jit::Store(ctx.out(0), index, jit::Load(ctx.in(0), src));
  Stmt row = jit::For(b, jit::Min(IntImm(cols), dims[j] - col0), ForKind::kVectorized, copy);
  Stmt rows = jit::For(a, jit::Min(IntImm(kRows), dims[q] - row0), ForKind::kSerial, row);
  if (RegisterTransposeFits(ctx.input_dtype(0), cols)) {
    // A full tile's whole 8 x 8 blocks go through registers (jit/codegen_vector.cc,
    // EmitTransposeTile); its last rows (fewer than 8) and the last, partial tile of columns
    // keep the loop above.
    Var n_rows("n_rows"), ab("ab"), bb("bb");
    Expr whole = jit::FloorDiv(Expr(n_rows), IntImm(kBlock)) * kBlock;
    Stmt block = jit::For(a, ab * kBlock, IntImm(kBlock), ForKind::kVectorized,
                          jit::For(b, bb * kBlock, IntImm(kBlock), ForKind::kVectorized, copy));
    Stmt blocks = jit::For(ab, jit::FloorDiv(Expr(n_rows), IntImm(kBlock)), ForKind::kSerial,
                           jit::For(bb, IntImm(cols / kBlock), ForKind::kSerial, block));
    Stmt rest_rows = jit::For(a, whole, Expr(n_rows) - whole, ForKind::kSerial,
                              jit::For(b, IntImm(cols), ForKind::kVectorized, copy));
    Stmt full = jit::Let(n_rows, jit::Min(IntImm(kRows), dims[q] - row0),
                         jit::Seq({blocks, rest_rows}));
    rows = jit::If(jit::Ge(dims[j] - col0, IntImm(cols)), full, rows);
  }
  Stmt tile = jit::For(tj, tiles_j, ForKind::kSerial, jit::Let(col0, tj * cols, rows));
  // outer = ((r_0 * n_1 + r_1) ...) * tiles_q + tile_q
  Expr rem = jit::FloorDiv(Expr(outer), tiles_q);
  Stmt body = jit::Let(row0, jit::FloorMod(Expr(outer), tiles_q) * kRows, tile);
  Expr count = tiles_q;
  for (int k = static_cast<int>(rest.size()) - 1; k >= 0; --k) {
    body = jit::Let(rest_vars[k], k == 0 ? rem : jit::FloorMod(rem, dims[rest[k]]), body);
    if (k > 0) rem = jit::FloorDiv(rem, dims[rest[k]]);
    count = count * dims[rest[k]];
  }
  return jit::For(outer, count, ForKind::kParallel, body);
}

Status LowerTranspose(LowerContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int> perm, Permutation(ctx));
  int rank = static_cast<int>(perm.size());
  if (rank >= 2 && perm[rank - 1] != rank - 1) {
    ctx.SetBody(TiledTranspose(ctx, perm));
    return Status::Ok();
  }
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    std::vector<Expr> src(rank);
    for (int k = 0; k < rank; ++k) src[perm[k]] = index[k];
    return jit::Load(ctx.in(0), src);
  });
  return Status::Ok();
}

// ---- Concat, Split ---------------------------------------------------------------------------

Status LowerConcat(LowerContext& ctx) {
  int rank = ctx.output_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  std::vector<Stmt> copies;
  Expr offset = IntImm(0);
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    if (!ctx.has_input(k)) continue;
    Expr shift = offset;
    copies.push_back(ParallelNest(ctx.InputDims(k), [&](const std::vector<Expr>& index) {
      std::vector<Expr> dst = index;
      dst[axis] = dst[axis] + shift;
      return jit::Store(ctx.out(0), dst, jit::Load(ctx.in(k), index));
    }));
    offset = offset + ctx.InputDim(k, axis);
  }
  ctx.SetBody(jit::Seq(copies));
  return Status::Ok();
}

StatusOr<int> SplitAxis(const NodeContext& ctx) {
  ASSIGN_OR_RETURN(int64_t axis, ctx.GetInt("axis", 0));
  return ctx.NormalizeAxis(axis, ctx.input_rank(0));
}

// Each output copies its slab; offsets are the run-time sizes of the outputs before it, so the
// kernel needs the split sizes only through the output shapes.
Status LowerSplit(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int axis, SplitAxis(ctx));
  std::vector<Stmt> copies;
  Expr offset = IntImm(0);
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    if (!ctx.has_output(k))
      return ctx.UnsupportedError("an omitted Split output leaves the offsets unknown");
    Expr shift = offset;
    copies.push_back(ParallelNest(ctx.OutputDims(k), [&](const std::vector<Expr>& index) {
      std::vector<Expr> src = index;
      src[axis] = src[axis] + shift;
      return jit::Store(ctx.out(k), index, jit::Load(ctx.in(0), src));
    }));
    offset = offset + ctx.OutputDim(k, axis);
  }
  ctx.SetBody(jit::Seq(copies));
  return Status::Ok();
}

// Sizes from the split input (run-time values), the attribute or equal parts; -1 everywhere
// when they are negative or do not add up to the dim.
Status SplitShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(int axis, SplitAxis(ctx));
  int n = ctx.num_outputs();
  Expr dim = ctx.InputDim(0, axis);
  std::vector<Expr> parts;
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> attr, ctx.GetInts("split"));
  bool from_input =
      ctx.has_input(1) && ctx.input_rank(1) == 1 && ctx.input_shape(1)[0] != DimExpr(0);
  if (from_input) {
    ASSIGN_OR_RETURN(int len, ConstLength(ctx, 1, "split"));
    if (len != n)
      return ctx.Error("split has " + std::to_string(len) + " parts for " + std::to_string(n) +
                       " outputs");
    for (int k = 0; k < n; ++k) parts.push_back(IntParam(ctx, 1, k));
  } else if (attr) {
    for (int64_t v : *attr) parts.push_back(IntImm(v));
  } else if (ctx.opset() >= 18 && ctx.HasAttr("num_outputs")) {
    // Split-18 num_outputs: ceil(d / n) each, the rest (maybe less) last; the rule checked n.
    Expr chunk = jit::FloorDiv(dim + IntImm(n - 1), IntImm(n));
    parts.assign(n - 1, chunk);
    parts.push_back(dim - chunk * IntImm(n - 1));
  } else {
    Expr each = jit::Select(jit::Eq(jit::FloorMod(dim, IntImm(n)), IntImm(0)),
                            jit::FloorDiv(dim, IntImm(n)), IntImm(-1));
    parts.assign(n, each);
  }
  Expr ok = IntImm(1, DType::kBool), sum = IntImm(0);
  for (const Expr& p : parts) {
    ok = jit::And(ok, jit::Ge(p, IntImm(0)));
    sum = sum + p;
  }
  ok = jit::And(ok, jit::Eq(sum, dim));
  std::vector<Stmt> stores;
  for (int k = 0; k < n; ++k) {
    if (!ctx.has_output(k)) continue;
    std::vector<Expr> dims = ctx.InputDims(0);
    dims[axis] = k < static_cast<int>(parts.size()) ? parts[k] : IntImm(-1);
    for (Expr& e : dims) e = OrMinusOne(ok, e);
    stores.push_back(StoreDims(ctx, k, dims));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

// ---- Slice -----------------------------------------------------------------------------------

// One data dim of a slice, clamped per the ONNX spec: `start` the first index read, `step`,
// `count` the output length. `sliced` false means the dim is copied whole.
struct SliceDim {
  bool sliced = false;
  Expr start, step, count;
};

StatusOr<std::vector<SliceDim>> SliceDims(const NodeContext& ctx) {
  int rank = ctx.input_rank(0);
  int n;
  std::function<Expr(int)> start, end, step;
  std::optional<std::vector<int64_t>> axes;
  bool axes_given;
  std::function<Expr(int)> axis_expr;
  if (ctx.opset() < 10) {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> s, ctx.GetInts("starts"));
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> e, ctx.GetInts("ends"));
    ASSIGN_OR_RETURN(axes, ctx.GetInts("axes"));
    if (!s || !e || s->size() != e->size())
      return ctx.Error("starts and ends are required and must have the same length");
    n = static_cast<int>(s->size());
    start = [s](int k) { return IntImm((*s)[k]); };
    end = [e](int k) { return IntImm((*e)[k]); };
    step = [](int) { return IntImm(1); };
    axes_given = axes.has_value();
  } else {
    ASSIGN_OR_RETURN(n, ConstLength(ctx, 1, "starts"));
    ASSIGN_OR_RETURN(int ne, ConstLength(ctx, 2, "ends"));
    if (ne != n) return ctx.Error("starts and ends must have the same length");
    start = [&ctx](int k) { return IntParam(ctx, 1, k); };
    end = [&ctx](int k) { return IntParam(ctx, 2, k); };
    if (ctx.has_input(4)) {
      step = [&ctx](int k) { return IntParam(ctx, 4, k); };
    } else {
      step = [](int) { return IntImm(1); };
    }
    axes_given = ctx.has_input(3);
    if (axes_given) axes = ctx.InputConstInts(3);
    if (axes_given && !axes) axis_expr = [&ctx](int k) { return IntParam(ctx, 3, k); };
  }
  if (axes && static_cast<int>(axes->size()) != n)
    return ctx.Error("axes has " + std::to_string(axes->size()) + " values for " +
                     std::to_string(n) + " starts");
  std::vector<SliceDim> dims(rank);
  for (int d = 0; d < rank; ++d) {
    Expr s = IntImm(0), e = IntImm(kInt64Max), st = IntImm(1);
    bool any = false;
    for (int k = 0; k < n; ++k) {
      if (axis_expr) {  // run-time axes: pick entry k where its normalized axis is d
        Expr a = axis_expr(k);
        Expr match = jit::Eq(jit::Select(jit::Lt(a, IntImm(0)), a + rank, a), IntImm(d));
        s = jit::Select(match, start(k), s);
        e = jit::Select(match, end(k), e);
        st = jit::Select(match, step(k), st);
        any = true;
      } else {
        int64_t a = axes ? (*axes)[k] : k;
        if (a < -rank || a >= rank)
          return ctx.Error("axis " + std::to_string(a) + " is out of range for rank " +
                           std::to_string(rank));
        if ((a < 0 ? a + rank : a) != d) continue;
        s = start(k);
        e = end(k);
        st = step(k);
        any = true;
      }
    }
    if (!any) {
      dims[d].count = ctx.InputDim(0, d);
      continue;
    }
    Expr D = ctx.InputDim(0, d);
    s = jit::Select(jit::Lt(s, IntImm(0)), s + D, s);
    e = jit::Select(jit::Lt(e, IntImm(0)), e + D, e);
    Expr pos = jit::Gt(st, IntImm(0));
    s = jit::Select(pos, Clamp(s, IntImm(0), D), Clamp(s, IntImm(0), D - 1));
    e = jit::Select(pos, Clamp(e, IntImm(0), D), Clamp(e, IntImm(-1), D - 1));
    // ceil((e - s) / step) for either sign, without overflow for huge steps.
    Expr count = jit::Max(-jit::FloorDiv(s - e, st), IntImm(0));
    dims[d] = {true, s, st, jit::Select(jit::Eq(st, IntImm(0)), IntImm(-1), count)};
  }
  return dims;
}

// Whether the slice's innermost dim reads a contiguous run of the input: copied whole, or
// sliced with a step known to be 1.
bool InnerRunContiguous(const std::vector<SliceDim>& dims) {
  if (dims.empty()) return false;
  const SliceDim& d = dims.back();
  return !d.sliced || (d.step->op == jit::ExprOp::kIntImm && d.step->int_value == 1);
}

Status LowerSlice(LowerContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<SliceDim> dims, SliceDims(ctx));
  int rank = ctx.input_rank(0);
  Lets h("p");  // per-call parameters, bound outside the nest
  for (SliceDim& d : dims) {
    if (!d.sliced) continue;
    d.start = h.Hoist(d.start);
    d.step = h.Hoist(d.step);
  }
  // The output shape came from the same formulas, but the clamp keeps a mismatched caller from
  // making the kernel read outside the input.
  auto slice = [&](bool clamp, ForKind inner) {
    return ParallelNest(ctx.OutputDims(0), [&](const std::vector<Expr>& index) {
      std::vector<Expr> src(rank);
      for (int d = 0; d < rank; ++d) {
        if (!dims[d].sliced) {
          src[d] = index[d];
          continue;
        }
        src[d] = dims[d].start + index[d] * dims[d].step;
        if (clamp) src[d] = Clamp(src[d], IntImm(0), ctx.InputDim(0, d) - 1);
      }
      return jit::Store(ctx.out(0), index, jit::Cast(ctx.out(0)->dtype, jit::Load(ctx.in(0), src)));
    }, inner);
  };
  if (!InnerRunContiguous(dims)) {
    ctx.SetBody(h.Wrap(slice(true, ForKind::kVectorized)));
    return Status::Ok();
  }
  // A clamped index is no longer affine in the loop variable, so every element became a gather
  // (Slice_5 / Slice_6 of perceiver_like, splitting k and v: 1 MB each at ~4 GB/s). When the
  // first and last index of every sliced dim lie inside the input (always, for an output shape
  // from SliceShape), the rows are plain contiguous copies the JIT vectorizes; the clamped
  // nest, for a caller whose output shape disagrees, stays scalar (no gathers in the kernel).
  Expr inside = IntImm(1, DType::kBool);
  for (int d = 0; d < rank; ++d) {
    if (!dims[d].sliced) continue;
    Expr n = ctx.OutputDim(0, d), size = ctx.InputDim(0, d);
    Expr first = dims[d].start, last = dims[d].start + (n - 1) * dims[d].step;
    Expr ok = jit::And(jit::And(jit::Ge(first, IntImm(0)), jit::Lt(first, size)),
                       jit::And(jit::Ge(last, IntImm(0)), jit::Lt(last, size)));
    inside = jit::And(inside, jit::Or(jit::Le(n, IntImm(0)), ok));
  }
  ctx.SetBody(h.Wrap(jit::If(inside, slice(false, ForKind::kVectorized), slice(true, ForKind::kSerial))));
  return Status::Ok();
}

Status SliceShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<SliceDim> dims, SliceDims(ctx));
  std::vector<Expr> out;
  for (const SliceDim& d : dims) out.push_back(d.count);
  ctx.SetBody(StoreDims(ctx, 0, out));
  return Status::Ok();
}

// ---- Expand, Tile ----------------------------------------------------------------------------

Status LowerExpand(LowerContext& ctx) {
  int rank = ctx.input_rank(0), out_rank = ctx.output_rank(0);
  std::vector<jit::BroadcastDim> hint(rank, jit::BroadcastDim::kUnknown);
  for (int d = 0; d < rank; ++d) {
    const DimExpr& in = ctx.input_shape(0)[d];
    if (in.is_const() && in.const_value() == 1) {
      hint[d] = jit::BroadcastDim::kOne;
    } else if (in == ctx.output_shape(0)[out_rank - rank + d]) {
      hint[d] = jit::BroadcastDim::kSame;
    }
  }
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    return jit::BroadcastLoad(ctx.in(0), index, hint);
  });
  return Status::Ok();
}

// Numpy broadcast of the input shape with the shape values; -1 for dims that do not broadcast.
Status ExpandShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "shape"));
  int rank = ctx.input_rank(0);
  int out_rank = std::max(n, rank);
  std::vector<Expr> dims;
  for (int d = 0; d < out_rank; ++d) {
    int a = d - (out_rank - rank), b = d - (out_rank - n);
    Expr x = a >= 0 ? ctx.InputDim(0, a) : IntImm(1);
    Expr y = b >= 0 ? IntParam(ctx, 1, b) : IntImm(1);
    dims.push_back(
        jit::Select(jit::Eq(x, IntImm(1)), y,
                    jit::Select(jit::Or(jit::Eq(y, IntImm(1)), jit::Eq(x, y)), x, IntImm(-1))));
  }
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

Status LowerTile(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    std::vector<Expr> src(rank);
    for (int d = 0; d < rank; ++d) {
      const DimExpr& in = ctx.input_shape(0)[d];
      if (in.is_const() && in.const_value() == 1) {
        src[d] = IntImm(0);
      } else if (in == ctx.output_shape(0)[d]) {
        src[d] = index[d];
      } else {
        src[d] = jit::FloorMod(index[d], ctx.InputDim(0, d));
      }
    }
    return jit::Load(ctx.in(0), src);
  });
  return Status::Ok();
}

Status TileShape(ShapeFuncContext& ctx) {
  int rank = ctx.input_rank(0);
  std::vector<Expr> dims;
  for (int d = 0; d < rank; ++d) {
    Expr r = IntParam(ctx, 1, d);
    dims.push_back(OrMinusOne(jit::Ge(r, IntImm(0)), ctx.InputDim(0, d) * r));
  }
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

// ---- Pad -------------------------------------------------------------------------------------

// Begin and end pads per dim (negative crops), from the attribute before opset 11.
StatusOr<std::vector<Expr>> Pads(const NodeContext& ctx) {
  int rank = ctx.input_rank(0);
  std::vector<Expr> pads;
  if (ctx.opset() < 11) {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> p, ctx.GetInts("pads"));
    if (!p || static_cast<int>(p->size()) != 2 * rank)
      return ctx.Error("pads must have 2 * rank values");
    for (int64_t v : *p) pads.push_back(IntImm(v));
  } else if (ctx.has_input(3)) {
    // Pad-18 axes (compile-time, checked by the rule): pads for those dims, zero elsewhere.
    std::optional<std::vector<int64_t>> axes = ctx.InputConstInts(3);
    if (!axes) return ctx.UnsupportedError("Pad axes known only at run time");
    int k = static_cast<int>(axes->size());
    ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "pads"));
    if (n != 2 * k) return ctx.Error("pads must have 2 values per axis");
    pads.assign(2 * rank, IntImm(0));
    for (int j = 0; j < k; ++j) {
      ASSIGN_OR_RETURN(int d, ctx.NormalizeAxis((*axes)[j], rank, "axes entry"));
      pads[d] = IntParam(ctx, 1, j);
      pads[d + rank] = IntParam(ctx, 1, j + k);
    }
  } else {
    ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "pads"));
    if (n != 2 * rank) return ctx.Error("pads must have 2 * rank values");
    for (int k = 0; k < n; ++k) pads.push_back(IntParam(ctx, 1, k));
  }
  return pads;
}

Status LowerPad(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  DType dtype = ctx.input_dtype(0);
  ASSIGN_OR_RETURN(std::string mode, ctx.GetString("mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      !(mode == "wrap" && ctx.opset() >= 19))
    return ctx.UnsupportedError("mode '" + mode + "'");
  ASSIGN_OR_RETURN(std::vector<Expr> pads, Pads(ctx));
  Lets h("p");  // per-call parameters, bound outside the nest
  for (int d = 0; d < rank; ++d) pads[d] = h.Hoist(pads[d]);
  Expr value;
  if (ctx.opset() < 11) {
    ASSIGN_OR_RETURN(float v, ctx.GetFloat("value", 0));
    value = jit::Const(dtype, v);
  } else if (ctx.has_input(2) && !(ctx.input_rank(2) == 1 && ctx.input_shape(2)[0] == DimExpr(0))) {
    value = ScalarLoad(ctx, 2);
  } else {
    value = jit::Const(dtype, 0);
  }
  value = h.Hoist(value);
  // The source index along dim d for output index i (clamped: loads stay in bounds where
  // `inside` is false), and whether i reads the input at all (constant mode).
  auto source = [&](int d, const Expr& index, Expr* inside) {
    Expr n = ctx.InputDim(0, d), i = index - pads[d];
    if (mode == "constant")
      *inside = jit::And(*inside, jit::And(jit::Ge(i, IntImm(0)), jit::Lt(i, n)));
    if (mode == "reflect") {
      i = jit::Select(jit::Lt(i, IntImm(0)), -i, i);
      i = jit::Select(jit::Ge(i, n), (n - 1) * 2 - i, i);
    }
    if (mode == "wrap") i = jit::FloorMod(i, n);  // Pad-19; n > 0 here (empty: `fill`)
    return Clamp(i, IntImm(0), n - 1);
  };
  // Per output row (every dim but the last), the last dim in three loops: the pads on either
  // side through the mode's index map, and between them a plain copy of the input row, whose
  // affine loads the JIT vectorizes (with the map applied to every element, each was a gather:
  // ~1 ns an element, fast_style's reflect pads 5% of its run).
  Stmt pad;
  if (rank == 0) {
    pad = jit::ComputeInto(ctx.out(0),
                           [&](const std::vector<Expr>&) { return jit::Load(ctx.in(0), {}); });
  } else {
    const int last = rank - 1;
    std::vector<Expr> rows = ctx.OutputDims(0);
    rows.pop_back();
    pad = ParallelFlat(rows, [&](const std::vector<Expr>& row) {
      Lets r("r");
      std::vector<Expr> src;
      Expr row_inside = IntImm(1, DType::kBool);
      for (int d = 0; d < last; ++d) src.push_back(r.Bind(source(d, row[d], &row_inside)));
      row_inside = r.Bind(row_inside);
      const Expr width = ctx.OutputDim(0, last), n = ctx.InputDim(0, last), p = pads[last];
      // [0, lo): left pad; [lo, hi): input columns lo - p .. hi - p - 1; [hi, width): right pad.
      const Expr lo = r.Bind(Clamp(p, IntImm(0), width));
      const Expr hi = r.Bind(Clamp(p + n, lo, width));
      auto loop = [&](const std::string& name, const Expr& begin, const Expr& end, bool copy) {
        jit::Var x(name, DType::kI64);
        std::vector<Expr> at = row;
        at.push_back(x);
        std::vector<Expr> from = src;
        Expr inside = row_inside;
        from.push_back(copy ? Expr(x) - p : source(last, x, &inside));
        Expr v = jit::Load(ctx.in(0), from);
        if (mode == "constant") v = jit::Select(inside, v, value);
        return jit::For(x, begin, end - begin, copy ? ForKind::kVectorized : ForKind::kSerial,
                        jit::Store(ctx.out(0), at, jit::Cast(ctx.out(0)->dtype, v)));
      };
      return r.Wrap(jit::Seq({loop("x0", IntImm(0), lo, false), loop("x1", lo, hi, true),
                              loop("x2", hi, width, false)}));
    });
  }
  // An empty input has nothing to load from: every output element is the pad value.
  Expr empty = IntImm(0, DType::kBool);
  for (int d = 0; d < rank; ++d) empty = jit::Or(empty, jit::Eq(ctx.InputDim(0, d), IntImm(0)));
  Stmt fill = jit::ComputeInto(ctx.out(0), [&](const std::vector<Expr>&) { return value; });
  ctx.SetBody(h.Wrap(jit::If(empty, fill, pad)));
  return Status::Ok();
}

Status PadShape(ShapeFuncContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(std::vector<Expr> pads, Pads(ctx));
  std::vector<Expr> dims;
  for (int d = 0; d < rank; ++d) {
    Expr v = ctx.InputDim(0, d) + pads[d] + pads[d + rank];
    dims.push_back(OrMinusOne(jit::Ge(v, IntImm(0)), v));
  }
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

// ---- Shape, Size, ConstantOfShape, Range, Constant, EyeLike ---------------------------------

Status LowerShape(LowerContext& ctx) {
  int64_t rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t start, ctx.GetInt("start", 0));
  ASSIGN_OR_RETURN(int64_t end, ctx.GetInt("end", rank));
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clamp(start);
  end = clamp(end);
  std::vector<Stmt> stores;
  for (int64_t i = start; i < end; ++i)
    stores.push_back(
        jit::Store(ctx.out(0), {IntImm(i - start)}, ctx.InputDim(0, static_cast<int>(i))));
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

Status LowerSize(LowerContext& ctx) {
  ctx.SetBody(jit::Store(ctx.out(0), {}, InputCount(ctx, 0)));
  return Status::Ok();
}

// A constant of `dtype` exactly (integers through int64, not double).
StatusOr<Expr> ConstElement(const NodeContext& ctx, const TensorData& t, int64_t k) {
  DType dtype = t.dtype();
  if (IsFloat(dtype)) return jit::FloatImm(t.ToDoubles()[k], dtype);
  StatusOr<std::vector<int64_t>> ints = t.ToInt64s();
  if (!ints.ok()) return ctx.UnsupportedError("constant of dtype " + std::string(DTypeName(dtype)));
  return IntImm((*ints)[k], dtype);
}

Status LowerConstantOfShape(LowerContext& ctx) {
  ASSIGN_OR_RETURN(TensorDataRef value, ctx.GetTensor("value"));
  Expr fill = jit::FloatImm(0, DType::kF32);
  if (value) {
    if (value->num_elements() != 1) return ctx.Error("value must have exactly one element");
    ASSIGN_OR_RETURN(fill, ConstElement(ctx, *value, 0));
  }
  ctx.SetCompute(0, [&](const std::vector<Expr>&) { return fill; });
  return Status::Ok();
}

Status ConstantOfShapeShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(int n, ConstLength(ctx, 0, "shape"));
  std::vector<Expr> dims;
  for (int d = 0; d < n; ++d) {
    Expr v = IntParam(ctx, 0, d);
    dims.push_back(OrMinusOne(jit::Ge(v, IntImm(0)), v));
  }
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

Status LowerRange(LowerContext& ctx) {
  Lets h("p");  // per-call parameters, bound outside the nest
  Expr start = h.Hoist(jit::Widen(ScalarLoad(ctx, 0))),
       delta = h.Hoist(jit::Widen(ScalarLoad(ctx, 2)));
  ctx.SetBody(h.Wrap(jit::ComputeInto(ctx.out(0), [&](const std::vector<Expr>& index) {
    return jit::Cast(start.dtype(), index[0]) * delta + start;
  })));
  return Status::Ok();
}

// Length max(ceil((limit - start) / delta), 0) computed in the input dtype (as numpy does);
// -1 for a zero delta.
Status RangeShape(ShapeFuncContext& ctx) {
  Expr s = jit::Widen(ScalarLoad(ctx, 0)), l = jit::Widen(ScalarLoad(ctx, 1)),
       d = jit::Widen(ScalarLoad(ctx, 2));
  Expr count;
  if (IsFloat(s.dtype())) {
    count = jit::Cast(DType::kI64, jit::Ceil((l - s) / d));
  } else {
    s = jit::Cast(DType::kI64, s);
    l = jit::Cast(DType::kI64, l);
    d = jit::Cast(DType::kI64, d);
    count = -jit::FloorDiv(s - l, d);
  }
  Expr zero = jit::ConstLike(d, 0);
  ctx.SetBody(StoreDims(ctx, 0, {OrMinusOne(jit::Ne(d, zero), jit::Max(count, IntImm(0)))}));
  return Status::Ok();
}

// Constants are normally folded by shape inference; a kernel that stores every element is only
// sensible for small ones (and for any size when all elements are equal).
constexpr int64_t kMaxConstantElements = 4096;

Status LowerConstant(LowerContext& ctx) {
  const TensorDataRef& data = ctx.output(0).data;
  if (!data)
    return ctx.UnsupportedError("the value could not be expressed (sparse or string constant)");
  int64_t n = data->num_elements();
  std::vector<double> values = data->ToDoubles();
  bool splat = n > 0 && std::all_of(values.begin(), values.end(), [&](double v) {
                 return v == values[0] || (v != v && values[0] != values[0]);
               });
  std::optional<std::vector<int64_t>> ints;
  if (!IsFloat(data->dtype())) {
    StatusOr<std::vector<int64_t>> i = data->ToInt64s();
    if (!i.ok())
      return ctx.UnsupportedError("constant of dtype " + std::string(DTypeName(data->dtype())));
    ints = *i;
    splat = n > 0 &&
            std::all_of(ints->begin(), ints->end(), [&](int64_t v) { return v == (*ints)[0]; });
  }
  if (n == 0) {
    ctx.SetBody(jit::Seq({}));
    return Status::Ok();
  }
  if (splat) {
    ASSIGN_OR_RETURN(Expr v, ConstElement(ctx, *data, 0));
    ctx.SetCompute(0, [&](const std::vector<Expr>&) { return v; });
    return Status::Ok();
  }
  if (n > kMaxConstantElements)
    return ctx.UnsupportedError("a constant of " + std::to_string(n) +
                                " distinct elements is folded, not lowered to a kernel");
  std::vector<Stmt> stores;
  const std::vector<int64_t>& dims = data->dims();
  for (int64_t k = 0; k < n; ++k) {
    std::vector<Expr> index(dims.size());
    int64_t rem = k;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      index[d] = IntImm(rem % dims[d]);
      rem /= dims[d];
    }
    ASSIGN_OR_RETURN(Expr v, ConstElement(ctx, *data, k));
    stores.push_back(jit::Store(ctx.out(0), index, v));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

Status LowerEyeLike(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int64_t k, ctx.GetInt("k", 0));
  DType dtype = ctx.output_dtype(0);
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    return jit::Select(jit::Eq(index[1] - index[0], IntImm(k)), jit::Const(dtype, 1),
                       jit::Const(dtype, 0));
  });
  return Status::Ok();
}

}  // namespace

void AddShapeLowerings(LoweringTable& table) {
  table.MustAdd({"Reshape", 5, INT32_MAX, LowerView, ReshapeShape});
  table.MustAdd({"Flatten", 1, INT32_MAX, LowerView});
  table.MustAdd({"Squeeze", 1, INT32_MAX, LowerView, SqueezeShape});
  table.MustAdd({"Unsqueeze", 1, INT32_MAX, LowerView, UnsqueezeShape});
  table.MustAdd({"Transpose", 1, INT32_MAX, LowerTranspose});
  table.MustAdd({"Concat", 4, INT32_MAX, LowerConcat});
  table.MustAdd({"Split", 2, INT32_MAX, LowerSplit, SplitShape});
  table.MustAdd({"Slice", 1, INT32_MAX, LowerSlice, SliceShape});
  table.MustAdd({"Expand", 8, INT32_MAX, LowerExpand, ExpandShape});
  table.MustAdd({"Tile", 6, INT32_MAX, LowerTile, TileShape});
  table.MustAdd({"Pad", 2, INT32_MAX, LowerPad, PadShape});
  table.MustAdd({"Shape", 1, INT32_MAX, LowerShape});
  table.MustAdd({"Size", 1, INT32_MAX, LowerSize});
  table.MustAdd({"ConstantOfShape", 9, INT32_MAX, LowerConstantOfShape, ConstantOfShapeShape});
  table.MustAdd({"Range", 11, INT32_MAX, LowerRange, RangeShape});
  table.MustAdd({"Constant", 1, INT32_MAX, LowerConstant});
  table.MustAdd({"EyeLike", 9, INT32_MAX, LowerEyeLike});
}

}  // namespace kiln::compiler
