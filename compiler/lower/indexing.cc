// Lowerings of the indexing family: gathers and scatters, OneHot, NonZero, TopK, CumSum, Trilu,
// Compress and ReverseSequence, with the run-time shape functions of the data-dependent ones.
//
// Indices read from tensors are untrusted: every kernel here stays inside its buffers whatever
// the index values are. An index of a gather or scatter that is out of range even after adding
// the dim to a negative one is an error naming the node, the index and the bound, as in ONNX
// Runtime: the kernel reports it through jit::CheckIndex and whoever called it (the VM, constant
// folding) fails instead of using the outputs. So does a ReverseSequence sequence length outside
// [0, time dim] (jit::CheckInRange, naming the batch index). Where ONNX defines the result
// instead, it is documented per op: OneHot writes an all-`off` row.
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

Expr True() { return IntImm(1, DType::kBool); }

// An index value as i64 with negative values counted from the end of a dim of size n.
Expr Normalize(Expr raw, const Expr& n) {
  Expr i = jit::Cast(DType::kI64, std::move(raw));
  return jit::Select(jit::Lt(i, IntImm(0)), i + n, i);
}

// Index `raw` of the node's input 1 into a dim of size n, normalized and checked at run time
// (jit::CheckIndex). When input 1 is a constant whose every value is in range for a constant n,
// nothing can fail and the cheaper unchecked form is used.
Expr CheckedIndex(const LowerContext& ctx, Expr raw, const Expr& n) {
  if (n->op == jit::ExprOp::kIntImm) {
    if (std::optional<std::vector<int64_t>> v = ctx.InputConstInts(1)) {
      int64_t bound = n->int_value;
      bool in_range = std::all_of(v->begin(), v->end(),
                                  [bound](int64_t i) { return i >= -bound && i < bound; });
      if (in_range) return Normalize(std::move(raw), n);
    }
  }
  return jit::CheckIndex(jit::Cast(DType::kI64, std::move(raw)), n, ctx.node().Describe());
}

// Element k of the rank-0/1 integer input i as i64: constant when known, else loaded.
Expr IntParam(const NodeContext& ctx, int i, int k) {
  if (std::optional<std::vector<int64_t>> v = ctx.InputConstInts(i);
      v && k < static_cast<int>(v->size())) {
    return IntImm((*v)[k]);
  }
  std::vector<Expr> index;
  if (ctx.input_rank(i) == 1) index.push_back(IntImm(k));
  return jit::Cast(DType::kI64, jit::Load(ctx.in(i), index));
}

Stmt StoreDims(const ShapeFuncContext& ctx, int output, const std::vector<Expr>& dims) {
  std::vector<Stmt> stores;
  for (size_t d = 0; d < dims.size(); ++d)
    stores.push_back(jit::Store(ctx.out_shape(output), {IntImm(static_cast<int64_t>(d))}, dims[d]));
  return jit::Seq(stores);
}

Expr IsNonZero(const Expr& x) {
  if (x.dtype() == DType::kBool) return x;
  Expr w = jit::Widen(x);
  return jit::Ne(w, jit::ConstLike(w, 0));
}

// ---- Gather, GatherElements, GatherND --------------------------------------------------------

// Out-of-range indices (after negative ones are counted from the end) are an error.
Status LowerGather(LowerContext& ctx) {
  int rank = ctx.input_rank(0), index_rank = ctx.input_rank(1);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    std::vector<Expr> at(index.begin() + axis, index.begin() + axis + index_rank);
    Expr n = ctx.InputDim(0, axis);
    Expr i = CheckedIndex(ctx, jit::Load(ctx.in(1), at), n);
    std::vector<Expr> src(index.begin(), index.begin() + axis);
    src.push_back(i);
    src.insert(src.end(), index.begin() + axis + index_rank, index.end());
    return jit::Load(ctx.in(0), src);
  });
  return Status::Ok();
}

// Out-of-range indices are an error.
Status LowerGatherElements(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    Expr n = ctx.InputDim(0, axis);
    std::vector<Expr> src = index;
    src[axis] = CheckedIndex(ctx, jit::Load(ctx.in(1), index), n);
    // ONNX wants the other dims of indices no larger than data's; the shape rule does not check.
    for (int d = 0; d < rank; ++d) {
      if (d != axis && ctx.input_shape(1)[d] != ctx.input_shape(0)[d])
        src[d] = jit::Min(src[d], ctx.InputDim(0, d) - 1);
    }
    return jit::Load(ctx.in(0), src);
  });
  return Status::Ok();
}

// out[i..., r...] = data[i[:b]..., indices[i..., 0..q)..., r...]; each index checked.
Status LowerGatherND(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int64_t b, ctx.GetInt("batch_dims", 0));
  int m = ctx.input_rank(1);
  const DimExpr& last = ctx.input_shape(1)[m - 1];
  if (!last.is_const()) return ctx.UnsupportedError("the last dim of indices must be static");
  int q = static_cast<int>(last.const_value());
  int rank = ctx.input_rank(0);
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    std::vector<Expr> src(index.begin(), index.begin() + b);
    std::vector<Expr> at(index.begin(), index.begin() + (m - 1));
    at.push_back(Expr());
    for (int k = 0; k < q; ++k) {
      at.back() = IntImm(k);
      Expr n = ctx.InputDim(0, static_cast<int>(b) + k);
      src.push_back(CheckedIndex(ctx, jit::Load(ctx.in(1), at), n));
    }
    for (int d = static_cast<int>(b) + q; d < rank; ++d)
      src.push_back(index[(m - 1) + (d - b - q)]);
    return jit::Load(ctx.in(0), src);
  });
  return Status::Ok();
}

// ---- Scatter, ScatterElements, ScatterND -----------------------------------------------------

StatusOr<std::function<Expr(Expr, Expr)>> Combiner(const LowerContext& ctx) {
  ASSIGN_OR_RETURN(std::string r, ctx.GetString("reduction", "none"));
  if (r == "none") return std::function<Expr(Expr, Expr)>([](Expr, Expr u) { return u; });
  if (r == "add") return std::function<Expr(Expr, Expr)>([](Expr o, Expr u) { return o + u; });
  if (r == "mul") return std::function<Expr(Expr, Expr)>([](Expr o, Expr u) { return o * u; });
  if (r == "max")
    return std::function<Expr(Expr, Expr)>([](Expr o, Expr u) { return jit::Max(o, u); });
  if (r == "min")
    return std::function<Expr(Expr, Expr)>([](Expr o, Expr u) { return jit::Min(o, u); });
  return ctx.UnsupportedError("reduction '" + r + "'");
}

Stmt CopyDataToOutput(const LowerContext& ctx) {
  return jit::ComputeInto(
      ctx.out(0), [&](const std::vector<Expr>& index) { return jit::Load(ctx.in(0), index); });
}

// Updates apply in row-major order (the last of duplicate indices wins for "none"); an index
// out of range is an error. Updates can only collide along `axis`, so the loop
// over another dim runs in parallel.
Status LowerScatterElements(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  ASSIGN_OR_RETURN(auto combine, Combiner(ctx));
  int parallel = -1;
  for (int d = 0; d < rank && parallel < 0; ++d)
    if (d != axis) parallel = d;
  Stmt scatter = SerialNest(
      ctx.InputDims(1),
      [&](const std::vector<Expr>& index) {
        Expr n = ctx.InputDim(0, axis);
        Var i("target");
        std::vector<Expr> dst = index;
        dst[axis] = i;
        Expr u = jit::Load(ctx.in(2), index);
        Expr v = jit::Cast(ctx.output_dtype(0), combine(jit::Load(ctx.out(0), dst), u));
        Expr inside = True();
        for (int d = 0; d < rank; ++d) {
          if (d != axis && ctx.input_shape(1)[d] != ctx.input_shape(0)[d])
            inside = jit::And(inside, jit::Lt(index[d], ctx.InputDim(0, d)));
        }
        return jit::Let(i, CheckedIndex(ctx, jit::Load(ctx.in(1), index), n),
                        jit::If(inside, jit::Store(ctx.out(0), dst, v)));
      },
      ForKind::kSerial, parallel, "s");
  // Updates must have the shape of indices (not checked by the shape rule): otherwise no update
  // is applied rather than reading outside `updates`.
  Expr same = True();
  for (int d = 0; d < rank; ++d)
    same = jit::And(same, jit::Eq(ctx.InputDim(2, d), ctx.InputDim(1, d)));
  ctx.SetBody(jit::Seq({CopyDataToOutput(ctx), jit::If(same, scatter)}));
  return Status::Ok();
}

// Index tuples apply serially in order; a tuple with any component out of range is an error.
Status LowerScatterND(LowerContext& ctx) {
  int rank = ctx.input_rank(0), m = ctx.input_rank(1);
  const DimExpr& last = ctx.input_shape(1)[m - 1];
  if (!last.is_const()) return ctx.UnsupportedError("the last dim of indices must be static");
  int q = static_cast<int>(last.const_value());
  if (q > rank) return ctx.Error("indices tuples are longer than the data rank");
  ASSIGN_OR_RETURN(auto combine, Combiner(ctx));
  std::vector<Expr> tuples(ctx.InputDims(1));
  tuples.pop_back();
  std::vector<Expr> slab;
  for (int d = q; d < rank; ++d) slab.push_back(ctx.InputDim(0, d));
  Stmt scatter = SerialNest(
      tuples,
      [&](const std::vector<Expr>& t) {
        std::vector<Var> target;
        std::vector<Expr> at = t;
        at.push_back(Expr());
        for (int k = 0; k < q; ++k) target.emplace_back("t" + std::to_string(k));
        Stmt copy = ParallelNest(slab, [&](const std::vector<Expr>& r) {
          std::vector<Expr> dst(target.begin(), target.end());
          dst.insert(dst.end(), r.begin(), r.end());
          std::vector<Expr> src = t;
          src.insert(src.end(), r.begin(), r.end());
          Expr v = combine(jit::Load(ctx.out(0), dst), jit::Load(ctx.in(2), src));
          return jit::Store(ctx.out(0), dst, jit::Cast(ctx.output_dtype(0), v));
        });
        Stmt s = copy;
        for (int k = q - 1; k >= 0; --k) {
          at.back() = IntImm(k);
          s = jit::Let(target[k], CheckedIndex(ctx, jit::Load(ctx.in(1), at), ctx.InputDim(0, k)),
                       s);
        }
        return s;
      },
      ForKind::kSerial, -1, "s");
  // Updates must have shape indices[:-1] + data[q:] (not checked by the shape rule): otherwise
  // no update is applied rather than reading outside `updates`.
  std::vector<Expr> want = tuples;
  want.insert(want.end(), slab.begin(), slab.end());
  if (ctx.input_rank(2) != static_cast<int>(want.size()))
    return ctx.Error("updates must have rank " + std::to_string(want.size()));
  Expr same = True();
  for (size_t d = 0; d < want.size(); ++d)
    same = jit::And(same, jit::Eq(ctx.InputDim(2, static_cast<int>(d)), want[d]));
  ctx.SetBody(jit::Seq({CopyDataToOutput(ctx), jit::If(same, scatter)}));
  return Status::Ok();
}

// ---- OneHot ----------------------------------------------------------------------------------

// The depth comes from the output's dim; an index outside [-depth, depth) gives an all-off row.
Status LowerOneHot(LowerContext& ctx) {
  int out_rank = ctx.output_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", -1));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, out_rank));
  Expr depth = ctx.OutputDim(0, axis);
  Lets h("p");  // per-call parameters, bound outside the nest
  Expr off = h.Hoist(jit::Load(ctx.in(2), {IntImm(0)})),
       on = h.Hoist(jit::Load(ctx.in(2), {IntImm(1)}));
  ctx.SetBody(h.Wrap(jit::ComputeInto(ctx.out(0), [&](const std::vector<Expr>& index) {
    std::vector<Expr> at = index;
    at.erase(at.begin() + axis);
    // Float indices truncate toward zero (ONNX casts them to integers).
    Expr i = Normalize(jit::Load(ctx.in(0), at), depth);
    return jit::Select(jit::Eq(i, index[axis]), on, off);
  })));
  return Status::Ok();
}

Status OneHotShape(ShapeFuncContext& ctx) {
  int out_rank = ctx.output_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", -1));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, out_rank));
  std::vector<Expr> index;
  if (ctx.input_rank(1) == 1) index.push_back(IntImm(0));
  Expr depth = jit::Cast(DType::kI64, jit::Load(ctx.in(1), index));
  std::vector<Expr> dims = ctx.InputDims(0);
  dims.insert(dims.begin() + axis, jit::Select(jit::Ge(depth, IntImm(1)), depth, IntImm(-1)));
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

// ---- NonZero, Compress -----------------------------------------------------------------------

Expr CountNonZero(const NodeContext& ctx) {
  int rank = ctx.input_rank(0);
  std::vector<jit::IterVar> axes;
  std::vector<Expr> index;
  for (int d = 0; d < rank; ++d) {
    Var v("r" + std::to_string(d));
    axes.push_back({v, ctx.InputDim(0, d)});
    index.push_back(v);
  }
  Expr one = jit::Select(IsNonZero(jit::Load(ctx.in(0), index)), IntImm(1), IntImm(0));
  return rank == 0 ? one : jit::Sum(axes, one);
}

Status NonZeroShape(ShapeFuncContext& ctx) {
  ctx.SetBody(StoreDims(ctx, 0, {IntImm(ctx.input_rank(0)), CountNonZero(ctx)}));
  return Status::Ok();
}

// A serial scan with a running count in local scratch; never writes past the output's columns.
Status LowerNonZero(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  jit::Buffer count = jit::Buffer::Local("count", DType::kI64, {1});
  Expr columns = ctx.OutputDim(0, 1);
  Stmt scan = SerialNest(
      ctx.InputDims(0),
      [&](const std::vector<Expr>& index) {
        Var c("c");
        std::vector<Stmt> stores;
        for (int d = 0; d < rank; ++d)
          stores.push_back(jit::Store(ctx.out(0), {IntImm(d), c}, index[d]));
        stores.push_back(jit::Store(count, {IntImm(0)}, c + 1));
        Expr hit = jit::And(IsNonZero(jit::Load(ctx.in(0), index)), jit::Lt(c, columns));
        return jit::Let(c, jit::Load(count, {IntImm(0)}), jit::If(hit, jit::Seq(stores)));
      },
      ForKind::kSerial, -1, "s");
  ctx.SetBody(jit::Allocate(count, jit::Seq({jit::Store(count, {IntImm(0)}, IntImm(0)), scan})));
  return Status::Ok();
}

// Compress reads min(len(condition), extent) condition entries.
Expr CompressExtent(const NodeContext& ctx, std::optional<int> axis) {
  Expr n = IntImm(1);
  if (axis) {
    n = ctx.InputDim(0, *axis);
  } else {
    for (int d = 0; d < ctx.input_rank(0); ++d) n = n * ctx.InputDim(0, d);
  }
  return jit::Min(n, ctx.InputDim(1, 0));
}

StatusOr<std::optional<int>> CompressAxis(const NodeContext& ctx) {
  if (!ctx.HasAttr("axis")) return std::optional<int>();
  ASSIGN_OR_RETURN(int64_t a, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(a, ctx.input_rank(0)));
  return std::optional<int>(axis);
}

Status CompressShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(std::optional<int> axis, CompressAxis(ctx));
  Var j("j");
  Expr count = jit::Sum({{j, CompressExtent(ctx, axis)}},
                        jit::Select(jit::Load(ctx.in(1), {j}), IntImm(1), IntImm(0)));
  std::vector<Expr> dims = {count};
  if (axis) {
    dims = ctx.InputDims(0);
    dims[*axis] = count;
  }
  ctx.SetBody(StoreDims(ctx, 0, dims));
  return Status::Ok();
}

Status LowerCompress(LowerContext& ctx) {
  ASSIGN_OR_RETURN(std::optional<int> axis, CompressAxis(ctx));
  int rank = ctx.input_rank(0);
  jit::Buffer count = jit::Buffer::Local("count", DType::kI64, {1});
  Expr limit = ctx.OutputDim(0, axis ? *axis : 0);
  Stmt scan;
  if (axis) {
    // Copy each selected slab to the next output position.
    Var i("i"), c("c");
    std::vector<Expr> slab_dims = ctx.InputDims(0);
    slab_dims.erase(slab_dims.begin() + *axis);
    Stmt copy = ParallelNest(slab_dims, [&](const std::vector<Expr>& r) {
      std::vector<Expr> dst = r, src = r;
      dst.insert(dst.begin() + *axis, c);
      src.insert(src.begin() + *axis, i);
      return jit::Store(ctx.out(0), dst, jit::Load(ctx.in(0), src));
    });
    Expr hit = jit::And(jit::Load(ctx.in(1), {i}), jit::Lt(c, limit));
    scan =
        jit::For(i, CompressExtent(ctx, axis), ForKind::kSerial,
                 jit::Let(c, jit::Load(count, {IntImm(0)}),
                          jit::If(hit, jit::Seq({copy, jit::Store(count, {IntImm(0)}, c + 1)}))));
  } else {
    Expr len = CompressExtent(ctx, axis);
    scan = SerialNest(
        ctx.InputDims(0),
        [&](const std::vector<Expr>& index) {
          Expr flat = IntImm(0);
          for (int d = 0; d < rank; ++d) flat = flat * ctx.InputDim(0, d) + index[d];
          Var c("c"), f("f");
          Expr hit = jit::And(jit::Lt(f, len), jit::Lt(c, limit));
          // The condition load must stay in bounds even where f >= len.
          hit = jit::And(hit, jit::Load(ctx.in(1), {jit::Min(f, jit::Max(len - 1, IntImm(0)))}));
          Stmt take = jit::Seq({jit::Store(ctx.out(0), {c}, jit::Load(ctx.in(0), index)),
                                jit::Store(count, {IntImm(0)}, c + 1)});
          return jit::Let(f, flat, jit::Let(c, jit::Load(count, {IntImm(0)}), jit::If(hit, take)));
        },
        ForKind::kSerial, -1, "s");
    // An empty condition selects nothing (and must not be read).
    scan = jit::If(jit::Gt(len, IntImm(0)), scan);
  }
  ctx.SetBody(jit::Allocate(count, jit::Seq({jit::Store(count, {IntImm(0)}, IntImm(0)), scan})));
  return Status::Ok();
}

// ---- TopK ------------------------------------------------------------------------------------

StatusOr<int> TopKAxis(const NodeContext& ctx) {
  ASSIGN_OR_RETURN(int64_t a, ctx.GetInt("axis", -1));
  return ctx.NormalizeAxis(a, ctx.input_rank(0));
}

// Per row (every row dim flattened into one parallel loop: a kNN's rows of a batch of 1 are
// [1, points], which ParallelNest ran serially, parallel over the batch of 1 alone): insertion
// of each element into the sorted top-k kept in the outputs themselves. An element goes after every kept one that is better or equal, so ties keep
// the lower index first. Once k are kept, an element no better than the last kept one is passed
// over after one comparison: O(n + inserts * k), not O(n * k) (a kNN's TopK of 10 over rows of
// 512 distances spent 98% of its comparisons on elements that were never inserted). NaN orders
// above every number (as torch.topk and NumPy's sort): first for largest, never among the
// smallest while numbers remain; the order is total, so the kept values stay sorted under it and
// the one comparison with the last kept decides as the full count would.
Status LowerTopK(LowerContext& ctx) {
  if (!ctx.has_output(0) || !ctx.has_output(1))
    return ctx.UnsupportedError("both outputs are needed (the kernel sorts in them)");
  ASSIGN_OR_RETURN(int axis, TopKAxis(ctx));
  ASSIGN_OR_RETURN(int64_t largest, ctx.GetInt("largest", 1));
  jit::Buffer values = ctx.out(0), indices = ctx.out(1);
  Expr n = ctx.InputDim(0, axis), k = ctx.OutputDim(0, axis);
  std::vector<Expr> rows = ctx.InputDims(0);
  rows.erase(rows.begin() + axis);
  Stmt body = ParallelFlat(rows, [&](const std::vector<Expr>& r) {
    auto at = [&](Expr pos) {
      std::vector<Expr> index = r;
      index.insert(index.begin() + axis, std::move(pos));
      return index;
    };
    Var i("i"), x("x", ctx.input_dtype(0)), filled("filled"), p("p"), t("t"), j("j"), jj("jj");
    // Whether kept is better than or equal to x in the order with NaN above every number.
    bool floating = IsFloat(ctx.input_dtype(0));
    auto better = [&](Expr kept) {
      if (largest) {
        Expr ge = jit::Ge(kept, x);
        return floating ? jit::Or(jit::IsNan(kept), ge) : ge;
      }
      Expr le = jit::Le(kept, x);
      return floating ? jit::Or(jit::IsNan(x), le) : le;
    };
    Expr position = jit::Sum({{jj, filled}},
                             jit::Select(better(jit::Load(values, at(jj))), IntImm(1), IntImm(0)));
    Stmt shift = jit::For(
        t, filled - p, ForKind::kSerial,
        jit::Let(j, filled - 1 - t,
                 jit::If(jit::Lt(j + 1, k),
                         jit::Seq({jit::Store(values, at(j + 1), jit::Load(values, at(j))),
                                   jit::Store(indices, at(j + 1), jit::Load(indices, at(j)))}))));
    Stmt insert = jit::Seq({shift, jit::Store(values, at(p), x), jit::Store(indices, at(p), i)});
    Stmt place = jit::Let(p, position, jit::If(jit::Lt(p, k), insert));
    // Full: filled == k >= 1, so the last kept value is written.
    Stmt full = jit::If(jit::Not(better(jit::Load(values, at(k - 1)))), place);
    Stmt step =
        jit::Let(x, jit::Load(ctx.in(0), at(i)),
                 jit::Let(filled, jit::Min(Expr(i), k), jit::If(jit::Lt(filled, k), place, full)));
    return jit::For(i, n, ForKind::kSerial, step);
  });
  ctx.SetBody(body);
  return Status::Ok();
}

// k from the input (opset 10+); -1 when it is negative or exceeds the dim.
Status TopKShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(int axis, TopKAxis(ctx));
  Expr k;
  if (ctx.opset() < 10) {
    ASSIGN_OR_RETURN(int64_t kv, ctx.GetInt("k", 0));
    k = IntImm(kv);
  } else {
    k = IntParam(ctx, 1, 0);
  }
  Expr n = ctx.InputDim(0, axis);
  std::vector<Expr> dims = ctx.InputDims(0);
  dims[axis] = jit::Select(jit::And(jit::Ge(k, IntImm(0)), jit::Le(k, n)), k, IntImm(-1));
  ctx.SetBody(jit::Seq({StoreDims(ctx, 0, dims), StoreDims(ctx, 1, dims)}));
  return Status::Ok();
}

// ---- CumSum, Trilu, ReverseSequence ----------------------------------------------------------

// Along `axis`, row by row: out[s] = out[s - 1] + x[s] (or x[s - 1] when exclusive), vectorized
// over the dims after the axis and parallel over the dims before it.
Stmt CumSumAlong(const LowerContext& ctx, int axis, bool exclusive, bool reverse) {
  std::vector<Expr> dims = ctx.InputDims(0);
  std::vector<Expr> before(dims.begin(), dims.begin() + axis);
  std::vector<Expr> after(dims.begin() + axis + 1, dims.end());
  Expr n = dims[axis];
  Var s("s");
  Expr i = reverse ? n - 1 - s : Expr(s);
  Expr prev = reverse ? i + 1 : i - 1;
  auto row = [&](const std::vector<Expr>& outer) {
    auto at = [&](const Expr& pos, const std::vector<Expr>& inner) {
      std::vector<Expr> index = outer;
      index.push_back(pos);
      index.insert(index.end(), inner.begin(), inner.end());
      return index;
    };
    auto inner_nest = [&](const std::function<Expr(const std::vector<Expr>&)>& value) {
      std::vector<Var> vars;
      std::vector<Expr> inner;
      for (size_t d = 0; d < after.size(); ++d) {
        vars.emplace_back("a" + std::to_string(d));
        inner.push_back(vars.back());
      }
      Stmt st = jit::Store(ctx.out(0), at(i, inner), jit::Cast(ctx.output_dtype(0), value(inner)));
      for (int d = static_cast<int>(after.size()) - 1; d >= 0; --d)
        st = jit::For(
            vars[d], after[d],
            d + 1 == static_cast<int>(after.size()) ? ForKind::kVectorized : ForKind::kSerial, st);
      return st;
    };
    Stmt first = inner_nest([&](const std::vector<Expr>& inner) {
      Expr x = jit::Widen(jit::Load(ctx.in(0), at(i, inner)));
      return exclusive ? jit::ConstLike(x, 0) : x;
    });
    Stmt rest = inner_nest([&](const std::vector<Expr>& inner) {
      Expr acc = jit::Load(ctx.out(0), at(prev, inner));
      Expr x = jit::Load(ctx.in(0), at(exclusive ? prev : i, inner));
      return jit::Widen(acc) + jit::Widen(x);
    });
    return jit::For(s, n, ForKind::kSerial, jit::If(jit::Eq(s, IntImm(0)), first, rest));
  };
  if (before.empty()) return row({});
  // Parallel over the flattened dims before the axis.
  Var outer("outer");
  Expr count = before[0];
  for (size_t d = 1; d < before.size(); ++d) count = count * before[d];
  std::vector<Var> vars;
  std::vector<Expr> index;
  for (size_t d = 0; d < before.size(); ++d) {
    vars.emplace_back("o" + std::to_string(d));
    index.push_back(vars.back());
  }
  Stmt body = row(index);
  Expr rest = outer;
  for (int d = static_cast<int>(before.size()) - 1; d >= 0; --d) {
    body = jit::Let(vars[d], d == 0 ? rest : jit::FloorMod(rest, before[d]), body);
    if (d > 0) rest = jit::FloorDiv(rest, before[d]);
  }
  return jit::For(outer, count, ForKind::kParallel, body);
}

Status LowerCumSum(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("input must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t exclusive, ctx.GetInt("exclusive", 0));
  ASSIGN_OR_RETURN(int64_t reverse, ctx.GetInt("reverse", 0));
  if (std::optional<std::vector<int64_t>> a = ctx.InputConstInts(1); a && a->size() == 1) {
    ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis((*a)[0], rank));
    ctx.SetBody(CumSumAlong(ctx, axis, exclusive, reverse));
    return Status::Ok();
  }
  // The axis is a run-time value: one nest per possible axis (an out-of-range axis writes
  // nothing).
  Expr a = IntParam(ctx, 1, 0);
  a = jit::Select(jit::Lt(a, IntImm(0)), a + rank, a);
  std::vector<Stmt> cases;
  for (int d = 0; d < rank; ++d)
    cases.push_back(jit::If(jit::Eq(a, IntImm(d)), CumSumAlong(ctx, d, exclusive, reverse)));
  ctx.SetBody(jit::Seq(cases));
  return Status::Ok();
}

Status LowerTrilu(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t upper, ctx.GetInt("upper", 1));
  Lets h("p");  // per-call parameters, bound outside the nest
  Expr k = h.Hoist(ctx.has_input(1) ? IntParam(ctx, 1, 0) : IntImm(0));
  ctx.SetBody(h.Wrap(jit::ComputeInto(ctx.out(0), [&](const std::vector<Expr>& index) {
    Expr diff = index[rank - 1] - index[rank - 2];
    Expr keep = upper ? jit::Ge(diff, k) : jit::Le(diff, k);
    Expr x = jit::Load(ctx.in(0), index);
    return jit::Select(keep, x, jit::Cast(x.dtype(), IntImm(0)));
  })));
  return Status::Ok();
}

// Sequence length `raw` of batch `b` as i64, checked against [0, n] at run time as ONNX Runtime
// does ("Invalid sequence length"): out of range is an error naming the node, the batch index,
// the value and the bound (jit::CheckInRange). Constant lengths all in range for a constant n
// cannot fail and are used as they are.
Expr CheckedSequenceLength(const LowerContext& ctx, Expr raw, Expr b, const Expr& n) {
  Expr len = jit::Cast(DType::kI64, std::move(raw));
  if (n->op == jit::ExprOp::kIntImm) {
    if (std::optional<std::vector<int64_t>> v = ctx.InputConstInts(1)) {
      int64_t bound = n->int_value;
      if (std::all_of(v->begin(), v->end(), [bound](int64_t l) { return l >= 0 && l <= bound; }))
        return len;
    }
  }
  return jit::CheckInRange(len, n + 1, std::move(b), ctx.node().Describe() + ": sequence_lens");
}

Status LowerReverseSequence(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int64_t batch_attr, ctx.GetInt("batch_axis", 1));
  ASSIGN_OR_RETURN(int64_t time_attr, ctx.GetInt("time_axis", 0));
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int batch, ctx.NormalizeAxis(batch_attr, rank, "batch_axis"));
  ASSIGN_OR_RETURN(int time, ctx.NormalizeAxis(time_attr, rank, "time_axis"));
  if (batch == time) return ctx.Error("batch_axis and time_axis must differ");
  Stmt reverse = jit::ComputeInto(ctx.out(0), [&](const std::vector<Expr>& index) {
    Expr n = ctx.InputDim(0, time);
    Expr len = CheckedSequenceLength(ctx, jit::Load(ctx.in(1), {index[batch]}), index[batch], n);
    std::vector<Expr> src = index;
    src[time] = jit::Select(jit::Lt(index[time], len), len - 1 - index[time], index[time]);
    return jit::Load(ctx.in(0), src);
  });
  // sequence_lens has one entry per batch: the shape rule makes a mismatch a compile error, or
  // a fact the kernel's precondition checks before every call. The guard only keeps the kernel
  // inside sequence_lens should it be called without that check (it then copies the input).
  ctx.SetBody(
      jit::If(jit::Eq(ctx.InputDim(1, 0), ctx.InputDim(0, batch)), reverse, CopyDataToOutput(ctx)));
  return Status::Ok();
}

// ---- Unique ----------------------------------------------------------------------------------

// Unique works on items: the elements in row-major order (no axis), or the slices along `axis`
// (compared lexicographically, as numpy does). An item has `width` scalars.
class UniqueItems {
 public:
  static StatusOr<UniqueItems> Make(const NodeContext& ctx) {
    UniqueItems items(ctx);
    if (ctx.HasAttr("axis")) {
      ASSIGN_OR_RETURN(int64_t a, ctx.GetInt("axis", 0));
      ASSIGN_OR_RETURN(items.axis_, ctx.NormalizeAxis(a, ctx.input_rank(0)));
    }
    return items;
  }

  Expr count() const {
    if (axis_ >= 0) return ctx_.InputDim(0, axis_);
    Expr n = IntImm(1);
    for (int d = 0; d < ctx_.input_rank(0); ++d) n = n * ctx_.InputDim(0, d);
    return n;
  }
  Expr width() const {
    Expr n = IntImm(1);
    for (int d = 0; d < ctx_.input_rank(0); ++d)
      if (d != axis_) n = n * ctx_.InputDim(0, d);
    return axis_ >= 0 ? n : IntImm(1);
  }
  // Scalar e of item k of `buffer` (the input, or Y, whose dims match except along the axis).
  Expr At(const jit::Buffer& buffer, Expr k, Expr e) const {
    return jit::Load(buffer, Index(k, e));
  }
  std::vector<Expr> Index(Expr k, Expr e) const {
    int rank = ctx_.input_rank(0);
    if (axis_ < 0) {
      if (buffer_rank_one_) return {k};
      e = k;  // the flattened input: unravel the element number
    }
    std::vector<Expr> index(rank);
    for (int d = rank - 1; d >= 0; --d) {
      if (d == axis_) {
        index[d] = k;
        continue;
      }
      bool outermost = true;
      for (int o = 0; o < d; ++o) outermost = outermost && o == axis_;
      index[d] = outermost ? e : jit::FloorMod(e, ctx_.InputDim(0, d));
      if (!outermost) e = jit::FloorDiv(e, ctx_.InputDim(0, d));
    }
    return index;
  }
  // Y of the flattened form is 1-D.
  UniqueItems ForY() const {
    UniqueItems y = *this;
    y.buffer_rank_one_ = axis_ < 0;
    return y;
  }
  // Item ka of a and item kb of b are equal (NaNs never are).
  Expr Equal(const UniqueItems& bi, const jit::Buffer& a, Expr ka, const jit::Buffer& b,
             Expr kb) const {
    Var e("e" + std::to_string(vars_++));
    Expr diff = jit::Select(jit::Ne(At(a, ka, e), bi.At(b, kb, e)), IntImm(1), IntImm(0));
    return jit::Eq(jit::Sum({{e, width()}}, diff), IntImm(0));
  }
  // Item ka of a sorts before item kb of b: at the first scalar where they differ, a's is less.
  Expr Less(const UniqueItems& bi, const jit::Buffer& a, Expr ka, const jit::Buffer& b,
            Expr kb) const {
    Var e("e" + std::to_string(vars_++));
    Expr differs = jit::Select(jit::Ne(At(a, ka, e), bi.At(b, kb, e)), IntImm(1), IntImm(0));
    Expr first = jit::Reduce(jit::ReduceOp::kArgMax, {{e, width()}}, differs);
    return jit::Lt(At(a, ka, first), bi.At(b, kb, first));
  }

 private:
  explicit UniqueItems(const NodeContext& ctx) : ctx_(ctx) {}
  const NodeContext& ctx_;
  int axis_ = -1;
  bool buffer_rank_one_ = false;
  mutable int vars_ = 0;
};

// The number of distinct items: those equal to no item before them (O(n^2 * width)).
Status UniqueShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(UniqueItems items, UniqueItems::Make(ctx));
  Var f("f"), g("g");
  Expr dup = jit::Sum(
      {{g, f}}, jit::Select(items.Equal(items, ctx.in(0), g, ctx.in(0), f), IntImm(1), IntImm(0)));
  Expr n = items.count();
  Expr u = jit::Sum({{f, n}}, jit::Select(jit::Eq(dup, IntImm(0)), IntImm(1), IntImm(0)));
  Var uv("unique");
  std::vector<Stmt> stores;
  if (ctx.has_output(0)) {
    std::vector<Expr> dims = {uv};
    if (ctx.HasAttr("axis")) {
      ASSIGN_OR_RETURN(int64_t a, ctx.GetInt("axis", 0));
      ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(a, ctx.input_rank(0)));
      dims = ctx.InputDims(0);
      dims[axis] = uv;
    }
    stores.push_back(StoreDims(ctx, 0, dims));
  }
  for (int o = 1; o < ctx.num_outputs(); ++o) {
    if (ctx.has_output(o)) stores.push_back(StoreDims(ctx, o, {o == 2 ? n : Expr(uv)}));
  }
  ctx.SetBody(jit::Let(uv, u, jit::Seq(stores)));
  return Status::Ok();
}

// One serial pass keeps the distinct items found so far in Y (in first-occurrence order, or
// sorted by insertion), with their first index and count; a sorted Unique then finds each
// item's position in the sorted Y for inverse_indices. O(n * unique * width). No write goes
// past the unique count the outputs were allocated with.
Status LowerUnique(LowerContext& ctx) {
  ASSIGN_OR_RETURN(UniqueItems items, UniqueItems::Make(ctx));
  UniqueItems yi = items.ForY();
  ASSIGN_OR_RETURN(int64_t sorted, ctx.GetInt("sorted", 1));
  jit::Buffer x = ctx.in(0), y = ctx.out(0);
  jit::Buffer count = jit::Buffer::Local("count", DType::kI64, {1});
  if (!ctx.has_output(0)) return ctx.UnsupportedError("output Y is needed (it holds the state)");
  Expr u = ctx.OutputDim(0, 0);
  if (ctx.HasAttr("axis")) {
    ASSIGN_OR_RETURN(int64_t a, ctx.GetInt("axis", 0));
    ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(a, ctx.input_rank(0)));
    u = ctx.OutputDim(0, axis);
  }
  Expr n = items.count(), width = items.width();
  auto store = [&](int o, Expr at, Expr v) {
    return ctx.has_output(o) ? jit::Store(ctx.out(o), {std::move(at)}, std::move(v)) : jit::Seq({});
  };
  auto copy_item = [&](const UniqueItems& src_items, const jit::Buffer& src, Expr from, Expr to) {
    Var e("w");
    return jit::For(e, width, ForKind::kSerial,
                    jit::Store(y, yi.Index(to, e), src_items.At(src, from, e)));
  };
  auto move = [&](Expr from, Expr to) {
    std::vector<Stmt> s = {copy_item(yi, y, from, to)};
    for (int o : {1, 3})
      if (ctx.has_output(o))
        s.push_back(jit::Store(ctx.out(o), {to}, jit::Load(ctx.out(o), {from})));
    return jit::Seq(s);
  };
  Var f("f"), c("c"), p("p"), m("m"), j("j"), t("t"), jj("jj");
  auto add_new = [&](Expr at, std::vector<Stmt> before) {
    before.push_back(copy_item(items, x, f, at));
    before.push_back(store(1, at, f));
    before.push_back(store(3, at, IntImm(1)));
    if (!sorted) before.push_back(store(2, f, at));
    before.push_back(jit::Store(count, {IntImm(0)}, c + 1));
    return jit::If(jit::Lt(c, u), jit::Seq(before));
  };
  auto bump = [&](Expr at) {
    std::vector<Stmt> s;
    if (ctx.has_output(3))
      s.push_back(jit::Store(ctx.out(3), {at}, jit::Load(ctx.out(3), {at}) + 1));
    if (!sorted) s.push_back(store(2, f, at));
    return jit::Seq(s);
  };
  Stmt step;
  if (sorted) {
    Expr position =
        jit::Sum({{jj, c}}, jit::Select(yi.Less(items, y, jj, x, f), IntImm(1), IntImm(0)));
    Expr at_p = jit::Min(Expr(p), jit::Max(c - 1, IntImm(0)));
    Expr hit = jit::And(jit::Lt(p, c), yi.Equal(items, y, at_p, x, f));
    Stmt shift = jit::For(t, c - p, ForKind::kSerial, jit::Let(j, c - 1 - t, move(j, j + 1)));
    step = jit::Let(p, position, jit::If(hit, bump(p), add_new(p, {shift})));
  } else {
    Expr same = jit::Select(yi.Equal(items, y, jj, x, f), IntImm(1), IntImm(0));
    step = jit::Let(m, jit::Sum({{jj, c}}, same),
                    jit::Let(p, jit::Reduce(jit::ReduceOp::kArgMax, {{jj, c}}, same),
                             jit::If(jit::Gt(m, IntImm(0)), bump(p), add_new(c, {}))));
  }
  Stmt scan = jit::For(f, n, ForKind::kSerial, jit::Let(c, jit::Load(count, {IntImm(0)}), step));
  std::vector<Stmt> body = {jit::Store(count, {IntImm(0)}, IntImm(0)), scan};
  if (sorted && ctx.has_output(2)) {
    Var e("e");
    Expr below =
        jit::Sum({{jj, u}}, jit::Select(yi.Less(items, y, jj, x, e), IntImm(1), IntImm(0)));
    body.push_back(jit::For(e, n, ForKind::kParallel, jit::Store(ctx.out(2), {e}, below)));
  }
  ctx.SetBody(jit::Allocate(count, jit::Seq(body)));
  return Status::Ok();
}

// ---- NonMaxSuppression -----------------------------------------------------------------------

// Per-class box state lives in stack scratch of this many entries; larger inputs make the shape
// function report -1 (an error naming the node) and the kernel write nothing.
constexpr int64_t kMaxNmsBoxes = 65536;

struct Corners {
  Expr y1, x1, y2, x2;
};

Corners BoxCorners(const NodeContext& ctx, const Expr& b, const Expr& i, bool center) {
  auto c = [&](int k) { return jit::Widen(jit::Load(ctx.in(0), {b, i, IntImm(k)})); };
  if (center) {
    Expr half_w = c(2) * 0.5, half_h = c(3) * 0.5;
    return {c(1) - half_h, c(0) - half_w, c(1) + half_h, c(0) + half_w};
  }
  return {jit::Min(c(0), c(2)), jit::Min(c(1), c(3)), jit::Max(c(0), c(2)), jit::Max(c(1), c(3))};
}

// Greedy NMS per (batch, class) as ONNX Runtime does it: candidates are boxes scoring above
// score_threshold (all when it is absent), taken best score first (ties: lower index); a box
// whose IoU with a taken box exceeds iou_threshold is dropped (boxes of non-positive area never
// suppress); at most max_output_boxes_per_class per class. `emit(row, b, c, i)` records the
// selection numbered `row`; the selection count ends in `count[0]`. O(boxes^2) per class.
StatusOr<Stmt> NmsScan(const NodeContext& ctx, const jit::Buffer& count,
                       const std::function<Stmt(Expr, Expr, Expr, Expr)>& emit) {
  ASSIGN_OR_RETURN(int64_t center, ctx.GetInt("center_point_box", 0));
  Expr max_out =
      ctx.has_input(2) && !(ctx.input_rank(2) == 1 && ctx.input_shape(2)[0] == DimExpr(0))
          ? IntParam(ctx, 2, 0)
          : IntImm(0);
  auto float_param = [&](int i, double fallback) {
    if (!ctx.has_input(i) || (ctx.input_rank(i) == 1 && ctx.input_shape(i)[0] == DimExpr(0)))
      return jit::FloatImm(fallback, DType::kF32);
    std::vector<Expr> index;
    if (ctx.input_rank(i) == 1) index.push_back(IntImm(0));
    return jit::Cast(DType::kF32, jit::Load(ctx.in(i), index));
  };
  Expr iou_threshold = float_param(3, 0);
  bool has_score_threshold =
      ctx.has_input(4) && !(ctx.input_rank(4) == 1 && ctx.input_shape(4)[0] == DimExpr(0));
  Expr score_threshold = float_param(4, 0);
  Expr batches = ctx.InputDim(0, 0), boxes = ctx.InputDim(0, 1), classes = ctx.InputDim(1, 1);
  // boxes [B, N, 4] and scores [B, C, N] (the shape rule checks only ranks): nothing is selected
  // (and the shape function reports -1) when they disagree.
  Expr valid = jit::And(
      jit::And(jit::Eq(ctx.InputDim(1, 0), batches), jit::Eq(ctx.InputDim(1, 2), boxes)),
      jit::And(jit::Eq(ctx.InputDim(0, 2), IntImm(4)), jit::Le(boxes, IntImm(kMaxNmsBoxes))));
  jit::Buffer state = jit::Buffer::Local("state", DType::kU8, {kMaxNmsBoxes});  // 0 open, 1 done
  jit::Buffer taken = jit::Buffer::Local("taken", DType::kI64, {1});
  Var b("b"), c("c"), t("t"), i("i"), best("best"), open("open"), row("row");
  auto score = [&](const Expr& k) {
    return jit::Cast(DType::kF32, jit::Load(ctx.in(1), {b, c, k}));
  };
  auto is_open_at = [&](const Expr& k) {
    return jit::Eq(jit::Load(state, {k}), IntImm(0, DType::kU8));
  };
  auto candidate = [&](const Expr& k) {
    return has_score_threshold ? jit::And(is_open_at(k), jit::Gt(score(k), score_threshold))
                               : is_open_at(k);
  };
  Var r1("r1"), r2("r2");
  Expr is_open = is_open_at(i);
  Expr open_count = jit::Sum({{r1, boxes}}, jit::Select(candidate(r1), IntImm(1), IntImm(0)));
  Expr pick = jit::Reduce(jit::ReduceOp::kArgMax, {{r2, boxes}},
                          jit::Select(candidate(r2), score(r2),
                                      jit::FloatImm(-std::numeric_limits<double>::infinity())));
  // Suppression of open box i by the box just taken.
  Corners a = BoxCorners(ctx, b, best, center != 0), o = BoxCorners(ctx, b, i, center != 0);
  Var ay1("ay1", DType::kF32), ax1("ax1", DType::kF32), ay2("ay2", DType::kF32),
      ax2("ax2", DType::kF32);
  Expr area_a = (ax2 - ax1) * (ay2 - ay1), area_o = (o.x2 - o.x1) * (o.y2 - o.y1);
  Expr zero = jit::FloatImm(0);
  Expr inter = jit::Max(jit::Min(Expr(ax2), o.x2) - jit::Max(Expr(ax1), o.x1), zero) *
               jit::Max(jit::Min(Expr(ay2), o.y2) - jit::Max(Expr(ay1), o.y1), zero);
  Expr iou = inter / (area_a + area_o - inter);
  Expr suppress =
      jit::And(jit::And(jit::Gt(area_a, zero), jit::Gt(area_o, zero)), jit::Gt(iou, iou_threshold));
  Stmt sweep =
      jit::For(i, boxes, ForKind::kSerial,
               jit::If(jit::And(is_open, suppress), jit::Store(state, {i}, IntImm(1, DType::kU8))));
  sweep = jit::Let(ay1, a.y1, jit::Let(ax1, a.x1, jit::Let(ay2, a.y2, jit::Let(ax2, a.x2, sweep))));
  Stmt take = jit::Let(
      best, pick,
      jit::Let(
          row, jit::Load(count, {IntImm(0)}),
          jit::Seq({jit::Store(state, {best}, IntImm(1, DType::kU8)), emit(row, b, c, best),
                    jit::Store(count, {IntImm(0)}, row + 1),
                    jit::Store(taken, {IntImm(0)}, jit::Load(taken, {IntImm(0)}) + 1), sweep})));
  Stmt round = jit::If(jit::Lt(jit::Load(taken, {IntImm(0)}), max_out),
                       jit::Let(open, open_count, jit::If(jit::Gt(open, IntImm(0)), take)));
  Stmt per_class = jit::Seq(
      {jit::For(i, boxes, ForKind::kSerial, jit::Store(state, {i}, IntImm(0, DType::kU8))),
       jit::Store(taken, {IntImm(0)}, IntImm(0)), jit::For(t, boxes, ForKind::kSerial, round)});
  Stmt all =
      jit::For(b, batches, ForKind::kSerial, jit::For(c, classes, ForKind::kSerial, per_class));
  return jit::Allocate(state,
                       jit::Allocate(taken, jit::Seq({jit::Store(count, {IntImm(0)}, IntImm(0)),
                                                      jit::If(valid, all)})));
}

Status NmsShape(ShapeFuncContext& ctx) {
  jit::Buffer count = jit::Buffer::Local("count", DType::kI64, {1});
  ASSIGN_OR_RETURN(Stmt scan,
                   NmsScan(ctx, count, [](Expr, Expr, Expr, Expr) { return jit::Seq({}); }));
  Expr valid = jit::And(jit::And(jit::Eq(ctx.InputDim(1, 0), ctx.InputDim(0, 0)),
                                 jit::Eq(ctx.InputDim(1, 2), ctx.InputDim(0, 1))),
                        jit::And(jit::Eq(ctx.InputDim(0, 2), IntImm(4)),
                                 jit::Le(ctx.InputDim(0, 1), IntImm(kMaxNmsBoxes))));
  Expr n = jit::Select(valid, jit::Load(count, {IntImm(0)}), IntImm(-1));
  ctx.SetBody(jit::Allocate(count, jit::Seq({scan, StoreDims(ctx, 0, {n, IntImm(3)})})));
  return Status::Ok();
}

Status LowerNms(LowerContext& ctx) {
  jit::Buffer count = jit::Buffer::Local("count", DType::kI64, {1});
  Expr rows = ctx.OutputDim(0, 0);
  ASSIGN_OR_RETURN(Stmt scan, NmsScan(ctx, count, [&](Expr row, Expr b, Expr c, Expr i) {
                     return jit::If(jit::Lt(row, rows),
                                    jit::Seq({jit::Store(ctx.out(0), {row, IntImm(0)}, b),
                                              jit::Store(ctx.out(0), {row, IntImm(1)}, c),
                                              jit::Store(ctx.out(0), {row, IntImm(2)}, i)}));
                   }));
  ctx.SetBody(jit::Allocate(count, scan));
  return Status::Ok();
}
}  // namespace

void AddIndexingLowerings(LoweringTable& table) {
  table.MustAdd({"Gather", 1, INT32_MAX, LowerGather});
  table.MustAdd({"GatherElements", 11, INT32_MAX, LowerGatherElements});
  table.MustAdd({"GatherND", 11, INT32_MAX, LowerGatherND});
  table.MustAdd({"Scatter", 9, 10, LowerScatterElements});
  table.MustAdd({"ScatterElements", 11, INT32_MAX, LowerScatterElements});
  table.MustAdd({"ScatterND", 11, INT32_MAX, LowerScatterND});
  table.MustAdd({"OneHot", 9, INT32_MAX, LowerOneHot, OneHotShape});
  table.MustAdd({"NonZero", 9, INT32_MAX, LowerNonZero, NonZeroShape});
  table.MustAdd({"TopK", 1, INT32_MAX, LowerTopK, TopKShape});
  table.MustAdd({"CumSum", 11, INT32_MAX, LowerCumSum});
  table.MustAdd({"Trilu", 14, INT32_MAX, LowerTrilu});
  table.MustAdd({"Compress", 9, INT32_MAX, LowerCompress, CompressShape});
  table.MustAdd({"ReverseSequence", 10, INT32_MAX, LowerReverseSequence});
  table.MustAdd({"Unique", 11, INT32_MAX, LowerUnique, UniqueShape});
  table.MustAdd({"NonMaxSuppression", 10, INT32_MAX, LowerNms, NmsShape});
}

}  // namespace kiln::compiler
