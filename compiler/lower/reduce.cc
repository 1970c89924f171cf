// Lowerings of the reduce family: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}
// with axes from the attribute or from input 1 (compile-time or run-time values), ArgMax, ArgMin.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/lower/loops.h"
#include "compiler/lower/lower.h"
#include "jit/compute.h"

namespace kiln::compiler {
namespace {

using jit::Expr;
using jit::ForKind;
using jit::IterVar;
using jit::ReduceOp;
using jit::Stmt;
using jit::Var;

// How one ONNX reduction maps onto the kernel IR: each element goes through `pre`, the results
// combine with `combine`, and `post` finishes the accumulator (given the reduced count).
enum class Kind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

StatusOr<Kind> KindOf(const NodeContext& ctx) {
  static const std::pair<const char*, Kind> kKinds[] = {{"ReduceSum", Kind::kSum},
                                                        {"ReduceMean", Kind::kMean},
                                                        {"ReduceMax", Kind::kMax},
                                                        {"ReduceMin", Kind::kMin},
                                                        {"ReduceProd", Kind::kProd},
                                                        {"ReduceL1", Kind::kL1},
                                                        {"ReduceL2", Kind::kL2},
                                                        {"ReduceLogSum", Kind::kLogSum},
                                                        {"ReduceLogSumExp", Kind::kLogSumExp},
                                                        {"ReduceSumSquare", Kind::kSumSquare}};
  for (const auto& [name, kind] : kKinds) {
    if (ctx.node().op_type == name) return kind;
  }
  return ctx.UnsupportedError("no reduce lowering for " + ctx.node().op_type);
}

ReduceOp CombineOf(Kind k) {
  switch (k) {
    case Kind::kMax:
      return ReduceOp::kMax;
    case Kind::kMin:
      return ReduceOp::kMin;
    case Kind::kProd:
      return ReduceOp::kProd;
    default:
      return ReduceOp::kSum;
  }
}

Expr ToFloat(const Expr& x) { return IsFloat(x.dtype()) ? x : jit::Cast(DType::kF64, x); }

// The value accumulated for element x (f16/bf16 already widened). LogSumExp accumulates
// exp(x - max) in a float type; `max` is null otherwise.
Expr Pre(Kind k, const Expr& x, const Expr& max) {
  switch (k) {
    case Kind::kL1:
      return jit::Abs(x);
    case Kind::kL2:
    case Kind::kSumSquare:
      return x * x;
    case Kind::kLogSumExp:
      return jit::Exp(ToFloat(x) - max);
    default:
      return x;
  }
}

// The result from the accumulator; `count` is the number of reduced elements (i64).
Expr Post(Kind k, const Expr& acc, const Expr& count, const Expr& max) {
  switch (k) {
    case Kind::kMean:
      return acc / jit::Cast(acc.dtype(), count);  // integers truncate; empty float mean is NaN
    case Kind::kL2:
      return jit::Sqrt(ToFloat(acc));
    case Kind::kLogSum:
      return jit::Log(ToFloat(acc));
    case Kind::kLogSumExp:
      // An infinite max (all -inf, an empty set, or a +inf element) is the answer itself.
      return jit::Select(jit::IsInf(max), max, max + jit::Log(acc));
    default:
      return acc;
  }
}

// The reduction of one op over compile-time axes, lowered as one kernel over ctx's buffers.
class StaticReduce {
 public:
  StaticReduce(const LowerContext& ctx, Kind kind, std::set<int> reduced, bool keepdims)
      : ctx_(ctx),
        kind_(kind),
        in_(ctx.in(0)),
        out_(ctx.out(0)),
        rank_(ctx.input_rank(0)),
        reduced_(std::move(reduced)),
        keepdims_(keepdims),
        dims_(ctx.InputDims(0)) {}

  Stmt Build() const {
    if (reduced_.empty()) {
      // Nothing reduced (a rank-0 input, or noop_with_empty_axes): each element mapped alone.
      return ParallelFlat(ctx_.OutputDims(0), [&](const std::vector<Expr>& o) {
        Expr x = Element(o, {});
        Expr acc = Pre(kind_, x, kind_ == Kind::kLogSumExp ? ToFloat(x) : Expr());
        return Store(out_, o, jit::Cast(out_->dtype, Post(kind_, acc, jit::IntImm(1), ToFloat(x))));
      });
    }
    if (!reduced_.count(rank_ - 1)) return Tiled();
    return PerOutput();
  }

 private:
  static constexpr int64_t kTile = 256;

  // x at the input position whose kept dims come from `out_index` (output coordinates) and
  // reduced dims from `r` (in reduced-dim order), f16/bf16 widened.
  Expr Element(const std::vector<Expr>& out_index, const std::vector<Expr>& r) const {
    std::vector<Expr> idx;
    size_t k = 0, j = 0;
    for (int d = 0; d < rank_; ++d) {
      if (reduced_.count(d)) {
        idx.push_back(r[j++]);
        if (keepdims_) ++k;
      } else {
        idx.push_back(out_index[k++]);
      }
    }
    return jit::Widen(jit::Load(in_, idx));
  }

  Expr Count() const {
    Expr count = jit::IntImm(1);
    for (int d : reduced_) count = count * dims_[d];
    return count;
  }

  std::vector<IterVar> Iters(const char* prefix, std::vector<Expr>* r) const {
    std::vector<IterVar> iters;
    for (int d : reduced_) {
      Var v(prefix + std::to_string(d));
      iters.push_back({v, dims_[d]});
      r->push_back(v);
    }
    return iters;
  }

  // The last dim is reduced: each output element reduces rows that are contiguous in memory, so
  // the reduction's inner loop streams (and vectorizes); output elements run in parallel.
  Stmt PerOutput() const {
    return ParallelFlat(ctx_.OutputDims(0), [&](const std::vector<Expr>& o) {
      std::vector<Expr> r;
      std::vector<IterVar> iters = Iters("r", &r);
      Expr x = Element(o, r);
      if (kind_ != Kind::kLogSumExp) {
        Expr acc = jit::Reduce(CombineOf(kind_), iters, Pre(kind_, x, Expr()));
        return Store(out_, o, jit::Cast(out_->dtype, Post(kind_, acc, Count(), Expr())));
      }
      std::vector<Expr> r2;
      std::vector<IterVar> iters2 = Iters("s", &r2);
      Var max("max", ToFloat(x).dtype()), sum("sum", ToFloat(x).dtype());
      Expr sum_value = jit::Reduce(ReduceOp::kSum, iters2, Pre(kind_, Element(o, r2), max));
      return Let(max, jit::ReduceMax(iters, ToFloat(x)),
                 Let(sum, sum_value,
                     Store(out_, o, jit::Cast(out_->dtype, Post(kind_, sum, Count(), max)))));
    });
  }

  // The last dim is kept: rows of the output accumulate in a local tile of kTile elements, so
  // the reduction loops stream the input and vectorize over the kept last dim. (Output rows x
  // tiles) run in parallel.
  Stmt Tiled() const {
    int out_rank = out_->rank;
    std::vector<Expr> out_dims = ctx_.OutputDims(0);
    Expr n = out_dims[out_rank - 1];
    Expr tiles = jit::FloorDiv(n + (kTile - 1), jit::IntImm(kTile));
    std::vector<Expr> loop_dims(out_dims.begin(), out_dims.end() - 1);
    loop_dims.push_back(tiles);
    return ParallelFlat(loop_dims, [&](const std::vector<Expr>& o) {
      Var base("base"), len("len");
      Stmt tile = Tile(o, base, len);
      return Let(base, o.back() * kTile, Let(len, jit::Min(jit::IntImm(kTile), n - base), tile));
    });
  }

  // One tile: positions [base, base + len) of the output row o[0..out_rank-2].
  Stmt Tile(const std::vector<Expr>& o, const Var& base, const Var& len) const {
    auto out_index = [&](const Expr& l) {
      std::vector<Expr> idx(o.begin(), o.end() - 1);
      idx.push_back(base + l);
      return idx;
    };
    // acc[l] = init; for reduced dims: for l: acc[l] = combine(acc[l], value(x, l)).
    auto accumulate = [&](const jit::Buffer& acc, ReduceOp op,
                          const std::function<Expr(const Expr&, const Expr&)>& value) {
      Var l("l"), l2("l2");
      std::vector<Expr> r;
      std::vector<IterVar> iters = Iters("r", &r);
      Expr x = Element(out_index(l2), r);
      Expr cur = jit::Load(acc, {l2});
      Expr v = value(x, l2);
      Expr combined = op == ReduceOp::kMax    ? jit::Max(cur, v)
                      : op == ReduceOp::kMin  ? jit::Min(cur, v)
                      : op == ReduceOp::kProd ? cur * v
                                              : cur + v;
      Stmt loop = For(l2, len, ForKind::kVectorized, Store(acc, {l2}, combined));
      for (auto it = iters.rbegin(); it != iters.rend(); ++it) {
        loop = For(it->var, it->extent, ForKind::kSerial, loop);
      }
      Stmt init = For(l, len, ForKind::kVectorized, Store(acc, {l}, Init(op, acc->dtype)));
      return jit::Seq({init, loop});
    };
    Expr probe =
        Element(out_index(jit::IntImm(0)), std::vector<Expr>(reduced_.size(), jit::IntImm(0)));
    Var l3("l3");
    if (kind_ != Kind::kLogSumExp) {
      DType t = Pre(kind_, probe, Expr()).dtype();
      jit::Buffer acc = jit::Buffer::Local("acc", t, {kTile});
      Stmt fill = accumulate(acc, CombineOf(kind_),
                             [&](const Expr& x, const Expr&) { return Pre(kind_, x, Expr()); });
      Expr result = Post(kind_, jit::Load(acc, {l3}), Count(), Expr());
      Stmt write = For(l3, len, ForKind::kVectorized,
                       Store(out_, out_index(l3), jit::Cast(out_->dtype, result)));
      return Allocate(acc, jit::Seq({fill, write}));
    }
    DType t = ToFloat(probe).dtype();
    jit::Buffer mx = jit::Buffer::Local("mx", t, {kTile});
    jit::Buffer acc = jit::Buffer::Local("acc", t, {kTile});
    Stmt max_pass =
        accumulate(mx, ReduceOp::kMax, [&](const Expr& x, const Expr&) { return ToFloat(x); });
    Stmt sum_pass = accumulate(acc, ReduceOp::kSum, [&](const Expr& x, const Expr& l) {
      return Pre(kind_, x, jit::Load(mx, {l}));
    });
    Expr result = Post(kind_, jit::Load(acc, {l3}), Count(), jit::Load(mx, {l3}));
    Stmt write = For(l3, len, ForKind::kVectorized,
                     Store(out_, out_index(l3), jit::Cast(out_->dtype, result)));
    return Allocate(mx, Allocate(acc, jit::Seq({max_pass, sum_pass, write})));
  }

  static Expr Init(ReduceOp op, DType t) {
    switch (op) {
      case ReduceOp::kProd:
        return jit::Const(t, 1);
      case ReduceOp::kMax:
        return jit::Lowest(t);
      case ReduceOp::kMin:
        return jit::Highest(t);
      default:
        return jit::Const(t, 0);
    }
  }

  const LowerContext& ctx_;
  Kind kind_;
  jit::Buffer in_, out_;
  int rank_;
  std::set<int> reduced_;
  bool keepdims_;
  std::vector<Expr> dims_;
};

// Axes known only at run time. `dims(o)` gives, per input dim, the reduction extent (in_d for a
// reduced dim, 1 for a kept one) and the input position the output element `o` starts at; the
// element reduces over those ranges.
using RuntimeDims = std::function<std::vector<std::pair<Expr, Expr>>(const std::vector<Expr>& o)>;

Stmt RuntimeAxesReduceWith(const LowerContext& ctx, Kind kind, const RuntimeDims& dims) {
  const jit::Buffer in = ctx.in(0), out = ctx.out(0);
  int rank = ctx.input_rank(0);
  return ParallelFlat(ctx.OutputDims(0), [&](const std::vector<Expr>& o) {
    std::vector<std::pair<Expr, Expr>> per_dim = dims(o);
    auto iters = [&](const char* prefix, std::vector<Expr>* idx) {
      std::vector<IterVar> it;
      for (int d = 0; d < rank; ++d) {
        Var v(prefix + std::to_string(d));
        it.push_back({v, per_dim[d].first});
        idx->push_back(per_dim[d].second + Expr(v));
      }
      return it;
    };
    std::vector<Expr> idx, idx2;
    std::vector<IterVar> it = iters("r", &idx), it2 = iters("s", &idx2);
    Expr count = jit::IntImm(1);
    for (const IterVar& i : it) count = count * i.extent;
    Expr x = jit::Widen(jit::Load(in, idx));
    if (kind != Kind::kLogSumExp) {
      Expr acc = jit::Reduce(CombineOf(kind), it, Pre(kind, x, Expr()));
      return Store(out, o, jit::Cast(out->dtype, Post(kind, acc, count, Expr())));
    }
    Var max("max", ToFloat(x).dtype()), sum("sum", ToFloat(x).dtype());
    Expr sum_value =
        jit::Reduce(ReduceOp::kSum, it2, Pre(kind, jit::Widen(jit::Load(in, idx2)), max));
    return Let(
        max, jit::ReduceMax(it, ToFloat(x)),
        Let(sum, sum_value, Store(out, o, jit::Cast(out->dtype, Post(kind, sum, count, max)))));
  });
}

// keepdims=1: dim d is reduced exactly when the output's dim differs from the input's, or both
// are 1; the output element o starts at input position o.
Stmt RuntimeAxesReduce(const LowerContext& ctx, Kind kind) {
  const jit::Buffer out = ctx.out(0);
  int rank = ctx.input_rank(0);
  return RuntimeAxesReduceWith(ctx, kind, [&](const std::vector<Expr>& o) {
    std::vector<std::pair<Expr, Expr>> dims;
    for (int d = 0; d < rank; ++d) {
      Expr in_d = ctx.InputDim(0, d);
      dims.emplace_back(jit::Select(jit::Eq(jit::DimOf(out, d), in_d), jit::IntImm(1), in_d), o[d]);
    }
    return dims;
  });
}

// keepdims=0: which input dims are reduced is only known at run time, so the kernel computes,
// per input dim d, reduced(d) from the axes buffer and the position of a kept dim in the output
// (d minus the reduced dims before it), and picks the output index for it with a select chain
// over the (compile-time) output rank.
Stmt RuntimeAxesReduceDropDims(const LowerContext& ctx, Kind kind, bool noop) {
  const jit::Buffer axes = ctx.in(1);
  const int rank = ctx.input_rank(0);
  const int out_rank = ctx.output_rank(0);
  Expr num_axes = jit::DimOf(axes, 0);
  // Empty axes reduce everything unless noop_with_empty_axes.
  Expr all = noop ? jit::IntImm(0, DType::kBool) : jit::Eq(num_axes, jit::IntImm(0));
  std::vector<Expr> reduced;  // bool per input dim
  for (int d = 0; d < rank; ++d) {
    Var k("a" + std::to_string(d));
    Expr a = jit::Cast(DType::kI64, jit::Load(axes, {k}));
    Expr hit = jit::Select(jit::Or(jit::Eq(a, jit::IntImm(d)), jit::Eq(a, jit::IntImm(d - rank))),
                           jit::IntImm(1), jit::IntImm(0));
    reduced.push_back(
        jit::Or(jit::Gt(jit::Reduce(ReduceOp::kMax, {{k, num_axes}}, hit), jit::IntImm(0)), all));
  }
  return RuntimeAxesReduceWith(ctx, kind, [&](const std::vector<Expr>& o) {
    auto pick = [&](const Expr& p) {  // o[p] for a run-time p in [0, out_rank); 0 otherwise
      Expr v = jit::IntImm(0);
      for (int j = out_rank - 1; j >= 0; --j) v = jit::Select(jit::Eq(p, jit::IntImm(j)), o[j], v);
      return v;
    };
    std::vector<std::pair<Expr, Expr>> dims;
    Expr before = jit::IntImm(0);  // reduced dims before d
    for (int d = 0; d < rank; ++d) {
      dims.emplace_back(jit::Select(reduced[d], ctx.InputDim(0, d), jit::IntImm(1)),
                        jit::Select(reduced[d], jit::IntImm(0), pick(jit::IntImm(d) - before)));
      before = before + jit::Select(reduced[d], jit::IntImm(1), jit::IntImm(0));
    }
    return dims;
  });
}

// Where the axes come from: input 1 for ReduceSum from opset 13 and every reduction from 18,
// the attribute otherwise (mirrors compiler/ops/reduce.cc).
bool AxesFromInput(const NodeContext& ctx) {
  return ctx.opset() >= 18 || (ctx.node().op_type == "ReduceSum" && ctx.opset() >= 13);
}

// The compile-time axes: nullopt when input 1 is present but only known at run time.
StatusOr<std::optional<std::vector<int64_t>>> StaticAxes(const NodeContext& ctx) {
  if (AxesFromInput(ctx)) {
    if (!ctx.has_input(1)) return std::optional<std::vector<int64_t>>(std::vector<int64_t>());
    return ctx.InputConstInts(1);
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.GetInts("axes"));
  return std::optional<std::vector<int64_t>>(axes.value_or(std::vector<int64_t>()));
}

// The reduced dims for compile-time axes; nullopt for the no-op (empty axes input with
// noop_with_empty_axes).
StatusOr<std::optional<std::set<int>>> ReducedDims(const NodeContext& ctx,
                                                   const std::vector<int64_t>& axes) {
  int rank = ctx.input_rank(0);
  std::set<int> reduced;
  if (axes.empty()) {
    ASSIGN_OR_RETURN(int64_t noop, ctx.GetInt("noop_with_empty_axes", 0));
    // Empty and omitted axes alike (ONNX: "when axes is empty and this attribute is set").
    if (noop) return std::optional<std::set<int>>();
    for (int d = 0; d < rank; ++d) reduced.insert(d);
  }
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int d, ctx.NormalizeAxis(a, rank, "axes entry"));
    reduced.insert(d);
  }
  return std::optional<std::set<int>>(std::move(reduced));
}

Status LowerReduce(LowerContext& ctx) {
  ASSIGN_OR_RETURN(Kind kind, KindOf(ctx));
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, StaticAxes(ctx));
  if (!axes) {
    ASSIGN_OR_RETURN(int64_t noop, ctx.GetInt("noop_with_empty_axes", 0));
    ctx.SetBody(keepdims ? RuntimeAxesReduce(ctx, kind)
                         : RuntimeAxesReduceDropDims(ctx, kind, noop != 0));
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::optional<std::set<int>> reduced, ReducedDims(ctx, *axes));
  if (!reduced) {
    // noop_with_empty_axes: nothing is reduced, but L1, L2, SumSquare and LogSum still map each
    // element (their ONNX function bodies: ReduceL2 is Sqrt(ReduceSumSquare(x)), so |x|); the
    // others give the input unchanged.
    if (kind == Kind::kL1 || kind == Kind::kL2 || kind == Kind::kSumSquare ||
        kind == Kind::kLogSum) {
      ctx.SetBody(StaticReduce(ctx, kind, {}, true).Build());
    } else {
      ctx.SetView(0);
    }
    return Status::Ok();
  }
  ctx.SetBody(StaticReduce(ctx, kind, std::move(*reduced), keepdims != 0).Build());
  return Status::Ok();
}

// ArgMax / ArgMin along `axis`: the first extreme (or, with select_last_index, the last), as i64.
// Two passes over each row, both plain min/max reductions that vectorize (an arg-reduction loop
// does not): the extreme value, then the first (last) position holding it. A NaN is the extreme
// when present (numpy's rule), so positions of NaN qualify too.
Status LowerArg(LowerContext& ctx) {
  bool is_max = ctx.node().op_type == "ArgMax";
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t last, ctx.GetInt("select_last_index", 0));
  const jit::Buffer in = ctx.in(0), out = ctx.out(0);
  Expr n = ctx.InputDim(0, axis);
  ctx.SetBody(ParallelFlat(ctx.OutputDims(0), [&](const std::vector<Expr>& o) {
    auto x = [&](const Var& r) {
      std::vector<Expr> idx;
      size_t k = 0;
      for (int d = 0; d < rank; ++d) {
        if (d == axis) {
          idx.push_back(r);
          if (keepdims) ++k;
        } else {
          idx.push_back(o[k++]);
        }
      }
      return jit::Widen(jit::Load(in, idx));
    };
    Var r("r"), r2("r2");
    Expr x0 = x(r);
    Var extreme("extreme", x0.dtype());
    Expr value = jit::Reduce(is_max ? ReduceOp::kMax : ReduceOp::kMin, {{r, n}}, x0);
    Expr x2 = x(r2);
    Expr hit = jit::Eq(x2, extreme);
    if (IsFloat(x2.dtype())) hit = jit::Or(hit, jit::IsNan(x2));
    Expr pos =
        last ? jit::Reduce(ReduceOp::kMax, {{r2, n}}, jit::Select(hit, Expr(r2), jit::IntImm(0)))
             : jit::Reduce(ReduceOp::kMin, {{r2, n}}, jit::Select(hit, Expr(r2), n));
    pos = jit::Select(jit::Eq(n, jit::IntImm(0)), jit::IntImm(0), pos);  // empty axis: 0
    return Let(extreme, value, Store(out, o, pos));
  }));
  return Status::Ok();
}

// ---- Shape functions -------------------------------------------------------------------------

// Output dims from input 0's dims and the axes (compile-time, or read from input 1).
Status ReduceShape(ShapeFuncContext& ctx) {
  const jit::Buffer shape = ctx.out_shape(0);
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, StaticAxes(ctx));
  std::vector<Stmt> stores;
  if (axes) {
    ASSIGN_OR_RETURN(std::optional<std::set<int>> reduced, ReducedDims(ctx, *axes));
    int k = 0;
    for (int d = 0; d < rank; ++d) {
      bool r = reduced && reduced->count(d);
      if (r && !keepdims) continue;
      stores.push_back(Store(shape, {jit::IntImm(k++)}, r ? jit::IntImm(1) : ctx.InputDim(0, d)));
    }
    ctx.SetBody(jit::Seq(stores));
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(int64_t noop, ctx.GetInt("noop_with_empty_axes", 0));
  const jit::Buffer axes_in = ctx.in(1);
  Expr num_axes = jit::DimOf(axes_in, 0);
  if (!keepdims) {
    // The kept dims in order. The output rank (rank - len(axes)) is fixed at compile time;
    // repeated or out-of-range axes make the count disagree, stored as -1 (an error).
    const int out_rank = ctx.output_rank(0);
    std::vector<Expr> is_reduced;
    Expr all = noop ? jit::IntImm(0) : jit::Select(jit::Eq(num_axes, jit::IntImm(0)),
                                                   jit::IntImm(1), jit::IntImm(0));
    for (int d = 0; d < rank; ++d) {
      Var k("k" + std::to_string(d));
      Expr a = jit::Cast(DType::kI64, jit::Load(axes_in, {k}));
      Expr hit = jit::Select(jit::Or(jit::Eq(a, jit::IntImm(d)), jit::Eq(a, jit::IntImm(d - rank))),
                             jit::IntImm(1), jit::IntImm(0));
      is_reduced.push_back(jit::Max(jit::Reduce(ReduceOp::kMax, {{k, num_axes}}, hit), all));
    }
    Expr reduced_count = jit::IntImm(0);
    for (const Expr& r : is_reduced) reduced_count = reduced_count + r;
    Expr consistent = jit::Eq(reduced_count, jit::IntImm(rank - out_rank));
    for (int j = 0; j < out_rank; ++j) {
      // The j-th kept dim: scan d, counting kept dims.
      Expr value = jit::IntImm(-1), kept_before = jit::IntImm(0);
      for (int d = 0; d < rank; ++d) {
        Expr kept = jit::Eq(is_reduced[d], jit::IntImm(0));
        value = jit::Select(jit::And(kept, jit::Eq(kept_before, jit::IntImm(j))), ctx.InputDim(0, d),
                            value);
        kept_before = kept_before + jit::Select(kept, jit::IntImm(1), jit::IntImm(0));
      }
      stores.push_back(Store(shape, {jit::IntImm(j)}, jit::Select(consistent, value, jit::IntImm(-1))));
    }
    ctx.SetBody(jit::Seq(stores));
    return Status::Ok();
  }
  for (int d = 0; d < rank; ++d) {
    Var k("k" + std::to_string(d));
    Expr a = jit::Cast(DType::kI64, jit::Load(axes_in, {k}));
    Expr hit = jit::Select(jit::Or(jit::Eq(a, jit::IntImm(d)), jit::Eq(a, jit::IntImm(d - rank))),
                           jit::IntImm(1), jit::IntImm(0));
    Expr named = jit::Gt(jit::Reduce(ReduceOp::kMax, {{k, num_axes}}, hit), jit::IntImm(0));
    Expr all = jit::Eq(num_axes, jit::IntImm(0));
    Expr reduced = noop ? named : jit::Or(named, all);
    stores.push_back(
        Store(shape, {jit::IntImm(d)}, jit::Select(reduced, jit::IntImm(1), ctx.InputDim(0, d))));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

Status ArgShape(ShapeFuncContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.GetInt("keepdims", 1));
  std::vector<Stmt> stores;
  int k = 0;
  for (int d = 0; d < rank; ++d) {
    if (d == axis && !keepdims) continue;
    stores.push_back(Store(ctx.out_shape(0), {jit::IntImm(k++)},
                           d == axis ? jit::IntImm(1) : ctx.InputDim(0, d)));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

}  // namespace

void AddReduceLowerings(LoweringTable& table) {
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    table.MustAdd({op, 1, INT32_MAX, LowerReduce, ReduceShape});  // axes as input from 18
  }
  table.MustAdd({"ReduceSum", 1, INT32_MAX, LowerReduce, ReduceShape});
  table.MustAdd({"ArgMax", 1, INT32_MAX, LowerArg, ArgShape});
  table.MustAdd({"ArgMin", 1, INT32_MAX, LowerArg, ArgShape});
}

}  // namespace kiln::compiler
