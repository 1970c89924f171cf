// Shape-manipulating ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split,
// Slice, Expand, Tile, Pad, Shape, Size, ConstantOfShape, Range, Constant, EyeLike.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

// Length of a 1-D input (Reshape's shape, Expand's shape...), which fixes the output rank.
StatusOr<int> ConstLength(const InferenceContext& ctx, int i, std::string_view what) {
  if (ctx.input_rank(i) != 1)
    return ctx.Error(std::string(what) + " must be 1-D, has shape " +
                     ShapeToString(ctx.input_shape(i)));
  const DimExpr& n = ctx.input_shape(i)[0];
  if (!n.is_const())
    return ctx.UnsupportedError(std::string(what) + " has run-time length " + n.ToString() +
                                ", so the output rank is unknown");
  if (n.const_value() > 64) return ctx.UnsupportedError(std::string(what) + " is too long");
  return static_cast<int>(n.const_value());
}

bool AnyFresh(const std::vector<DimExpr>& v) {
  return std::any_of(v.begin(), v.end(), [](const DimExpr& d) { return d.HasFreshSymbol(); });
}

// ---- Reshape, Flatten, Transpose, Squeeze, Unsqueeze -----------------------------------------

Status ReshapeRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "shape"));
  ASSIGN_OR_RETURN(int64_t allowzero, ctx.GetInt("allowzero", 0));
  std::optional<std::vector<DimExpr>> target = ctx.InputValues(1);
  if (!target) {
    ctx.MarkDataDependent();
    ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, n));
    return Status::Ok();
  }
  if (static_cast<int>(target->size()) != n)
    return ctx.Error("shape values do not match its length");
  if (AnyFresh(*target)) ctx.MarkDataDependent();
  SymbolicShape out(n);
  int infer = -1;
  for (int i = 0; i < n; ++i) {
    const DimExpr& v = (*target)[i];
    if (!v.is_const()) {
      out[i] = v;
    } else if (v.const_value() == 0 && !allowzero) {
      if (i >= static_cast<int>(x.size()))
        return ctx.Error("shape " + ShapeToString(*target) + " copies dim " + std::to_string(i) +
                         " of " + ShapeToString(x) + ", which has none");
      out[i] = x[i];
    } else if (v.const_value() == -1) {
      if (infer >= 0) return ctx.Error("shape " + ShapeToString(*target) + " has more than one -1");
      infer = i;
    } else if (v.const_value() < -1) {
      return ctx.Error("shape " + ShapeToString(*target) + " has a negative dim");
    } else {
      out[i] = v;
    }
  }
  DimExpr total = Product(x, 0, static_cast<int>(x.size()));
  if (infer >= 0) {
    out[infer] = DimExpr(1);
    DimExpr known = Product(out, 0, n);
    if (std::optional<DimExpr> q = ExactDiv(total, known)) {
      out[infer] = *q;
    } else if (total.is_const() && known.is_const()) {
      return ctx.Error("cannot reshape " + ShapeToString(x) + " to " + ShapeToString(*target) +
                       ": " + total.ToString() + " elements are not a multiple of " +
                       known.ToString());
    } else {
      out[infer] = FloorDiv(total, known);  // the run-time shape function checks divisibility
    }
  } else {
    DimExpr count = Product(out, 0, n);
    if (total.is_const() && count.is_const() && total != count)
      return ctx.Error("cannot reshape " + ShapeToString(x) + " (" + total.ToString() +
                       " elements) to " + ShapeToString(out) + " (" + count.ToString() +
                       " elements)");
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

Status FlattenRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  int rank = static_cast<int>(x.size());
  ASSIGN_OR_RETURN(int64_t axis, ctx.GetInt("axis", 1));
  if (axis < -rank || axis > rank)
    return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  int a = static_cast<int>(axis);
  ctx.SetOutput(0, ctx.input_dtype(0), {Product(x, 0, a), Product(x, a, rank)});
  return Status::Ok();
}

Status TransposeRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  int rank = static_cast<int>(x.size());
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> perm, ctx.GetInts("perm"));
  if (!perm || perm->empty()) {
    perm.emplace();
    for (int i = rank - 1; i >= 0; --i) perm->push_back(i);
  }
  std::vector<int64_t> sorted = *perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(sorted.size()) == rank;
  for (int i = 0; ok && i < rank; ++i) ok = sorted[i] == i;
  if (!ok)
    return ctx.Error("perm " + IntsToString(*perm) + " is not a permutation of rank " +
                     std::to_string(rank));
  SymbolicShape out;
  for (int64_t p : *perm) out.push_back(x[p]);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

Status SqueezeRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  int rank = static_cast<int>(x.size());
  bool axes_given = ctx.HasAttr("axes") || ctx.has_input(1);
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, IntsFromAttrOrInput(ctx, "axes", 1));
  if (axes_given && !axes) {
    // Axes known only at run time: their count fixes the output rank, the shape function the dims.
    ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "axes"));
    if (n > rank) return ctx.Error("more axes than dims");
    ctx.MarkDataDependent();
    ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, rank - n));
    return Status::Ok();
  }
  std::vector<bool> drop(rank, false);
  if (axes) {
    ASSIGN_OR_RETURN(std::vector<int> norm, NormalizeAxes(ctx, *axes, rank));
    for (int a : norm) {
      if (x[a].is_const() && x[a].const_value() != 1)
        return ctx.Error("cannot squeeze dim " + std::to_string(a) + " of " + ShapeToString(x) +
                         ": it is not 1");
      drop[a] = true;  // a symbolic dim is checked to be 1 at run time
    }
  } else {
    // No axes: drop the dims that are 1. Symbolic dims are assumed not to be 1 (the output rank
    // must be static; the run-time shape function rejects a symbolic dim that turns out 1).
    for (int i = 0; i < rank; ++i) drop[i] = x[i].is_const() && x[i].const_value() == 1;
  }
  SymbolicShape out;
  for (int i = 0; i < rank; ++i)
    if (!drop[i]) out.push_back(x[i]);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  if (ctx.input(0).symbolic_value && rank <= 1)
    ctx.SetOutputValues(0, *ctx.input(0).symbolic_value);
  return Status::Ok();
}

Status UnsqueezeRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, IntsFromAttrOrInput(ctx, "axes", 1));
  if (!axes && ctx.has_input(1)) {
    // Axes known only at run time: their count fixes the output rank, the shape function the dims.
    ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "axes"));
    ctx.MarkDataDependent();
    ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, static_cast<int>(x.size()) + n));
    return Status::Ok();
  }
  if (!axes) return ctx.UnsupportedError("axes must be known at compile time");
  int out_rank = static_cast<int>(x.size() + axes->size());
  ASSIGN_OR_RETURN(std::vector<int> norm, NormalizeAxes(ctx, *axes, out_rank));
  SymbolicShape out;
  size_t next = 0;
  for (int i = 0; i < out_rank; ++i) {
    if (std::binary_search(norm.begin(), norm.end(), i)) {
      out.push_back(DimExpr(1));
    } else {
      out.push_back(x[next++]);
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  if (ctx.input(0).symbolic_value && out_rank <= 1)
    ctx.SetOutputValues(0, *ctx.input(0).symbolic_value);
  return Status::Ok();
}

// ---- Concat, Split ---------------------------------------------------------------------------

Status ConcatRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetRequiredInt("axis"));
  int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("cannot concatenate scalars");
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  SymbolicShape out = ctx.input_shape(0);
  std::optional<std::vector<DimExpr>> values = std::vector<DimExpr>();
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, i));
    const SymbolicShape& s = ctx.input_shape(i);
    if (static_cast<int>(s.size()) != rank)
      return ctx.Error("input " + std::to_string(i) + " has shape " + ShapeToString(s) + ", rank " +
                       std::to_string(rank) + " expected like " +
                       ShapeToString(ctx.input_shape(0)));
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      ASSIGN_OR_RETURN(out[d], MergeDim(ctx, out[d], s[d],
                                        "input " + std::to_string(i) + " " + ShapeToString(s) +
                                            " dim " + std::to_string(d) + " differs from " +
                                            ShapeToString(ctx.input_shape(0))));
    }
    if (i > 0) out[axis] = out[axis] + s[axis];
    std::optional<std::vector<DimExpr>> v = ctx.InputValues(i);
    if (values && v && rank == 1) {
      values->insert(values->end(), v->begin(), v->end());
    } else {
      values.reset();
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  if (values && IsInteger(ctx.input_dtype(0))) ctx.SetOutputValues(0, std::move(*values));
  return Status::Ok();
}

Status SplitRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, static_cast<int>(x.size())));
  int n = ctx.num_outputs();
  std::vector<DimExpr> parts;
  bool split_given = ctx.HasAttr("split") || (ctx.has_input(1) && ctx.input_rank(1) == 1 &&
                                              ctx.input_shape(1)[0] != DimExpr(0));
  if (split_given) {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> split, ctx.GetInts("split"));
    if (split) {
      parts.assign(split->begin(), split->end());
    } else if (std::optional<std::vector<DimExpr>> v = ctx.InputValues(1)) {
      parts = *v;
    } else {
      ctx.MarkDataDependent();
      for (int i = 0; i < n; ++i) parts.push_back(ctx.FreshDim());
    }
    if (static_cast<int>(parts.size()) != n)
      return ctx.Error("split has " + std::to_string(parts.size()) + " parts for " +
                       std::to_string(n) + " outputs");
    DimExpr sum(0);
    for (const DimExpr& p : parts) {
      if (p.is_const() && p.const_value() < 0) return ctx.Error("split sizes must be non-negative");
      if (p.HasFreshSymbol()) ctx.MarkDataDependent();
      sum = sum + p;
    }
    RETURN_IF_ERROR(MergeDim(ctx, sum, x[axis],
                             "split sizes add up to " + sum.ToString() + ", dim " +
                                 std::to_string(axis) + " is " + x[axis].ToString())
                        .status());
  } else if (ctx.opset() >= 18 && ctx.HasAttr("num_outputs")) {
    // Split-18: ceil(d / n) per output, the last one smaller when d does not divide.
    ASSIGN_OR_RETURN(int64_t num, ctx.GetInt("num_outputs", n));
    if (num != n)
      return ctx.Error("num_outputs is " + std::to_string(num) + " but the node has " +
                       std::to_string(n) + " outputs");
    DimExpr chunk = FloorDiv(x[axis] + DimExpr(n - 1), DimExpr(n));
    DimExpr last = x[axis] - chunk * DimExpr(n - 1);
    if (last.is_const() && last.const_value() < 0)
      return ctx.Error("dim " + std::to_string(axis) + " of " + ShapeToString(x) +
                       " is too small for " + std::to_string(n) + " outputs");
    parts.assign(n - 1, chunk);
    parts.push_back(last);
  } else {
    if (x[axis].is_const() && x[axis].const_value() % n != 0)
      return ctx.Error("dim " + std::to_string(axis) + " of " + ShapeToString(x) +
                       " does not split into " + std::to_string(n) + " equal parts");
    parts.assign(n, FloorDiv(x[axis], DimExpr(n)));
  }
  for (int i = 0; i < n; ++i) {
    SymbolicShape s = x;
    s[axis] = parts[i];
    ctx.SetOutput(i, ctx.input_dtype(0), std::move(s));
  }
  return Status::Ok();
}

// ---- Slice -----------------------------------------------------------------------------------

// Bounds at or beyond this magnitude mean "to the end" (INT64_MAX and the like); symbolic dims
// are assumed smaller.
constexpr int64_t kHuge = INT32_MAX;

// One sliced dim, exact for any dim value (clamping per the ONNX spec written with min/max).
// nullopt when a bound is only known at run time.
std::optional<DimExpr> SliceDim(const DimExpr& d, const DimExpr& start, const DimExpr& end,
                                int64_t step) {
  if (start.HasFreshSymbol() || end.HasFreshSymbol()) return std::nullopt;
  // Non-constant bounds come from dims (Shape -> Gather) and are non-negative.
  auto is_pos_inf = [](const DimExpr& v) { return v.is_const() && v.const_value() >= kHuge; };
  auto is_neg_inf = [](const DimExpr& v) { return v.is_const() && v.const_value() <= -kHuge; };
  auto is_neg = [](const DimExpr& v) { return v.is_const() && v.const_value() < 0; };
  if (step > 0) {
    // Start clamped to [0, d]; clamping it at d is unnecessary since end <= d.
    DimExpr s = is_neg_inf(start) ? DimExpr(0) : is_neg(start) ? Max(d + start, DimExpr(0)) : start;
    if (is_pos_inf(start)) s = d;
    if (is_neg(start) && !is_neg_inf(start) && is_pos_inf(end))
      return CeilDiv(Min(-start, d), DimExpr(step));  // the last |start| elements
    DimExpr e = is_pos_inf(end)   ? d
                : is_neg_inf(end) ? DimExpr(0)
                : is_neg(end)     ? Max(d + end, DimExpr(0))
                                  : Min(end, d);
    return Max(CeilDiv(e - s, DimExpr(step)), DimExpr(0));
  }
  // Negative step: start clamped to [0, d-1], end to [-1, d-1].
  DimExpr last = d - DimExpr(1);
  DimExpr s = is_pos_inf(start)   ? last
              : is_neg_inf(start) ? DimExpr(0)
              : is_neg(start)     ? Max(d + start, DimExpr(0))
                                  : Max(Min(start, last), DimExpr(0));
  DimExpr e = is_pos_inf(end)   ? last
              : is_neg_inf(end) ? DimExpr(-1)
              : is_neg(end)     ? Max(d + end, DimExpr(-1))
                                : Min(end, last);
  return Max(CeilDiv(s - e, DimExpr(-step)), DimExpr(0));
}

Status SliceRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  int rank = static_cast<int>(x.size());
  std::optional<std::vector<DimExpr>> starts, ends;
  std::optional<std::vector<int64_t>> axes, steps;
  bool axes_given, steps_given;
  if (ctx.opset() < 10) {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> s, ctx.GetInts("starts"));
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> e, ctx.GetInts("ends"));
    if (!s || !e) return ctx.Error("starts and ends are required");
    starts = std::vector<DimExpr>(s->begin(), s->end());
    ends = std::vector<DimExpr>(e->begin(), e->end());
    ASSIGN_OR_RETURN(axes, ctx.GetInts("axes"));
    axes_given = axes.has_value();
    steps_given = false;
  } else {
    starts = ctx.InputValues(1);
    ends = ctx.InputValues(2);
    axes_given = ctx.has_input(3);
    steps_given = ctx.has_input(4);
    if (axes_given) axes = ctx.InputConstInts(3);
    if (steps_given) steps = ctx.InputConstInts(4);
  }
  SymbolicShape out = x;
  bool known = starts && ends && (axes || !axes_given) && (steps || !steps_given);
  if (!known) {
    // Bounds known only at run time: the sliced axes (all of them if unknown) get fresh dims.
    ctx.MarkDataDependent();
    if (axes) {
      ASSIGN_OR_RETURN(std::vector<int> norm, NormalizeAxes(ctx, *axes, rank));
      for (int a : norm) out[a] = ctx.FreshDim();
    } else {
      out = FreshShape(ctx, rank);
    }
    ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
    return Status::Ok();
  }
  size_t n = starts->size();
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < n; ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps) steps = std::vector<int64_t>(n, 1);
  if (ends->size() != n || axes->size() != n || steps->size() != n)
    return ctx.Error("starts, ends, axes and steps must have the same length");
  ASSIGN_OR_RETURN(std::vector<int> checked, NormalizeAxes(ctx, *axes, rank));
  (void)checked;  // rejects repeated axes
  for (size_t i = 0; i < n; ++i) {
    int a = static_cast<int>((*axes)[i] < 0 ? (*axes)[i] + rank : (*axes)[i]);
    if ((*steps)[i] == 0 || (*steps)[i] == INT64_MIN)
      return ctx.Error("step " + std::to_string((*steps)[i]) + " is invalid");
    std::optional<DimExpr> d = SliceDim(x[a], (*starts)[i], (*ends)[i], (*steps)[i]);
    if (!d) ctx.MarkDataDependent();
    out[a] = d ? *d : ctx.FreshDim();
  }
  // Known values of a sliced 1-D int tensor (Shape(x)[1:3]).
  std::optional<std::vector<DimExpr>> v = ctx.InputValues(0);
  if (v && rank == 1 && out[0].is_const() && (*starts)[0].is_const() && (*ends)[0].is_const()) {
    int64_t len = static_cast<int64_t>(v->size()), step = (*steps)[0];
    int64_t s = (*starts)[0].const_value(), e = (*ends)[0].const_value();
    s = s < 0 ? s + len : s;
    e = e < 0 ? e + len : e;
    s = step > 0 ? std::clamp<int64_t>(s, 0, len) : std::clamp<int64_t>(s, 0, len - 1);
    e = step > 0 ? std::clamp<int64_t>(e, 0, len) : std::clamp<int64_t>(e, -1, len - 1);
    std::vector<DimExpr> sliced;
    for (int64_t k = 0; k < out[0].const_value(); ++k) {
      if (k > 0 && (step > len || step < -len)) break;  // keeps s + k*step from overflowing
      int64_t j = s + k * step;
      if (j < 0 || j >= len) break;
      sliced.push_back((*v)[j]);
    }
    if (static_cast<int64_t>(sliced.size()) == out[0].const_value())
      ctx.SetOutputValues(0, std::move(sliced));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// ---- Expand, Tile, Pad -----------------------------------------------------------------------

Status ExpandRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "shape"));
  std::optional<std::vector<DimExpr>> target = ctx.InputValues(1);
  SymbolicShape out;
  if (!target) {
    ctx.MarkDataDependent();
    target = FreshShape(ctx, n);
  } else if (AnyFresh(*target)) {
    ctx.MarkDataDependent();
  }
  ASSIGN_OR_RETURN(out, Broadcast(ctx, ctx.input_shape(0), *target));
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

Status TileRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "repeats"));
  if (n != static_cast<int>(x.size()))
    return ctx.Error("repeats has " + std::to_string(n) + " values for rank " +
                     std::to_string(x.size()));
  std::optional<std::vector<DimExpr>> repeats = ctx.InputValues(1);
  SymbolicShape out;
  if (!repeats) {
    ctx.MarkDataDependent();
    out = FreshShape(ctx, n);
  } else {
    if (AnyFresh(*repeats)) ctx.MarkDataDependent();
    for (int i = 0; i < n; ++i) {
      if ((*repeats)[i].is_const() && (*repeats)[i].const_value() < 0)
        return ctx.Error("repeats must be non-negative");
      out.push_back(x[i] * (*repeats)[i]);
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// Pad: pads attribute (opset 2-10) or input (11+): all begins, then all ends; negative crops.
Status PadRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  int rank = static_cast<int>(x.size());
  std::optional<std::vector<DimExpr>> pads;
  if (ctx.opset() < 11) {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> p, ctx.GetInts("pads"));
    if (!p) return ctx.Error("pads is required");
    pads = std::vector<DimExpr>(p->begin(), p->end());
  } else if (ctx.has_input(3)) {
    // Pad-18 axes: pads for those dims only (compile-time axes), zero for the others.
    if (ctx.opset() < 18) return ctx.Error("the axes input needs opset >= 18");
    std::optional<std::vector<int64_t>> axes = ctx.InputConstInts(3);
    if (!axes) return ctx.UnsupportedError("axes known only at run time");
    RETURN_IF_ERROR(NormalizeAxes(ctx, *axes, rank).status());  // in range, none repeated
    int k = static_cast<int>(axes->size());
    std::vector<int> norm;
    for (int64_t a : *axes) norm.push_back(static_cast<int>(a < 0 ? a + rank : a));
    ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "pads"));
    if (n != 2 * k)
      return ctx.Error("pads has " + std::to_string(n) + " values for " + std::to_string(k) +
                       " axes");
    if (ctx.has_input(2)) RETURN_IF_ERROR(CheckSameDType(ctx, 0, 2));
    if (std::optional<std::vector<DimExpr>> given = ctx.InputValues(1)) {
      pads = std::vector<DimExpr>(2 * rank, DimExpr(0));
      for (int j = 0; j < k; ++j) {
        (*pads)[norm[j]] = (*given)[j];
        (*pads)[norm[j] + rank] = (*given)[j + k];
      }
    }
  } else {
    ASSIGN_OR_RETURN(int n, ConstLength(ctx, 1, "pads"));
    if (n != 2 * rank)
      return ctx.Error("pads has " + std::to_string(n) + " values for rank " +
                       std::to_string(rank));
    pads = ctx.InputValues(1);
    if (ctx.has_input(2)) RETURN_IF_ERROR(CheckSameDType(ctx, 0, 2));
  }
  SymbolicShape out;
  if (!pads) {
    ctx.MarkDataDependent();
    out = FreshShape(ctx, rank);
  } else {
    if (static_cast<int>(pads->size()) != 2 * rank)
      return ctx.Error("pads has " + std::to_string(pads->size()) + " values for rank " +
                       std::to_string(rank));
    if (AnyFresh(*pads)) ctx.MarkDataDependent();
    for (int i = 0; i < rank; ++i) out.push_back(x[i] + (*pads)[i] + (*pads)[i + rank]);
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// ---- Shape, Size, ConstantOfShape, Range, Constant, EyeLike -------------------------------------

Status ShapeRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  int64_t rank = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(int64_t start, ctx.GetInt("start", 0));
  ASSIGN_OR_RETURN(int64_t end, ctx.GetInt("end", rank));
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clamp(start);
  end = clamp(end);
  std::vector<DimExpr> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x[i]);
  ctx.SetOutput(0, DType::kI64, {DimExpr(static_cast<int64_t>(dims.size()))});
  ctx.SetOutputValues(0, std::move(dims));
  return Status::Ok();
}

Status SizeRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  ctx.SetOutput(0, DType::kI64, {});
  ctx.SetOutputValues(0, {Product(x, 0, static_cast<int>(x.size()))});
  return Status::Ok();
}

Status ConstantOfShapeRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(int n, ConstLength(ctx, 0, "shape"));
  ASSIGN_OR_RETURN(TensorDataRef value, ctx.GetTensor("value"));
  DType dtype = DType::kF32;
  if (value) {
    if (value->num_elements() != 1) return ctx.Error("value must have exactly one element");
    dtype = value->dtype();
  }
  std::optional<std::vector<DimExpr>> dims = ctx.InputValues(0);
  if (!dims) {
    ctx.MarkDataDependent();
    dims = FreshShape(ctx, n);
  } else if (AnyFresh(*dims)) {
    ctx.MarkDataDependent();
  }
  for (const DimExpr& d : *dims)
    if (d.is_const() && d.const_value() < 0)
      return ctx.Error("shape " + ShapeToString(*dims) + " has a negative dim");
  ctx.SetOutput(0, dtype, *dims);
  // A small integer fill (ConstantOfShape([2], value=1) in expanded functions) has known values.
  DimExpr count = Product(*dims, 0, n);
  if (n <= 1 && count.is_const() && count.const_value() <= 64 && (IsInteger(dtype) || !value)) {
    int64_t fill = 0;
    if (value) {
      StatusOr<std::vector<int64_t>> v = value->ToInt64s();
      if (!v.ok()) return Status::Ok();
      fill = (*v)[0];
    }
    if (IsInteger(dtype))
      ctx.SetOutputValues(0, std::vector<DimExpr>(count.const_value(), DimExpr(fill)));
  }
  return Status::Ok();
}

// Range: length max(ceil((limit - start) / delta), 0).
Status RangeRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 2));
  for (int i = 0; i < 3; ++i)
    if (ctx.input_rank(i) != 0 && !(ctx.input_rank(i) == 1 && ctx.input_shape(i)[0] == DimExpr(1)))
      return ctx.Error("start, limit and delta must be scalars");
  DType dtype = ctx.input_dtype(0);
  std::optional<DimExpr> n;
  if (IsFloat(dtype)) {
    const TensorData *s = ctx.input_data(0), *l = ctx.input_data(1), *d = ctx.input_data(2);
    if (s && l && d) {
      double delta = d->ToDoubles()[0];
      if (delta == 0) return ctx.Error("delta must be non-zero");
      double count = std::ceil((l->ToDoubles()[0] - s->ToDoubles()[0]) / delta);
      if (!(count < 1e15)) return ctx.Error("range is too long");
      n = DimExpr(count > 0 ? static_cast<int64_t>(count) : 0);
    }
  } else {
    std::optional<std::vector<DimExpr>> s = ctx.InputValues(0), l = ctx.InputValues(1),
                                        d = ctx.InputValues(2);
    if (s && l && d && (*d)[0].is_const() && !AnyFresh(*s) && !AnyFresh(*l)) {
      int64_t delta = (*d)[0].const_value();
      if (delta == 0) return ctx.Error("delta must be non-zero");
      n = Max(CeilDiv((*l)[0] - (*s)[0], DimExpr(delta)), DimExpr(0));
      if (n->is_const() && (*s)[0].is_const() && n->const_value() <= 64) {
        std::vector<DimExpr> values;
        for (int64_t i = 0; i < n->const_value(); ++i)
          values.push_back((*s)[0] + DimExpr(i * delta));
        ctx.SetOutputValues(0, std::move(values));
      }
    }
  }
  if (!n) {
    ctx.MarkDataDependent();
    n = ctx.FreshDim();
  }
  ctx.SetOutput(0, dtype, {*n});
  return Status::Ok();
}

StatusOr<TensorDataRef> ScalarOrList(const InferenceContext& ctx, DType dtype, const void* data,
                                     size_t count, bool scalar) {
  std::vector<int64_t> dims;
  if (!scalar) dims.push_back(static_cast<int64_t>(count));
  StatusOr<TensorDataRef> t = TensorData::Copy(dtype, dims, data, count * DTypeSize(dtype));
  if (!t.ok()) return ctx.Error(t.status().message());
  return t;
}

Status ConstantRule(InferenceContext& ctx) {
  TensorDataRef data;
  if (ctx.HasAttr("value")) {
    ASSIGN_OR_RETURN(data, ctx.GetTensor("value"));
  } else if (ctx.HasAttr("value_float")) {
    ASSIGN_OR_RETURN(float f, ctx.GetFloat("value_float", 0));
    ASSIGN_OR_RETURN(data, ScalarOrList(ctx, DType::kF32, &f, 1, true));
  } else if (ctx.HasAttr("value_floats")) {
    ASSIGN_OR_RETURN(std::optional<std::vector<float>> f, ctx.GetFloats("value_floats"));
    std::vector<float> floats = f.value_or(std::vector<float>());
    ASSIGN_OR_RETURN(data, ScalarOrList(ctx, DType::kF32, floats.data(), floats.size(), false));
  } else if (ctx.HasAttr("value_int")) {
    ASSIGN_OR_RETURN(int64_t i, ctx.GetRequiredInt("value_int"));
    ASSIGN_OR_RETURN(data, ScalarOrList(ctx, DType::kI64, &i, 1, true));
  } else if (ctx.HasAttr("value_ints")) {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> i, ctx.GetInts("value_ints"));
    std::vector<int64_t> ints = i.value_or(std::vector<int64_t>());
    ASSIGN_OR_RETURN(data, ScalarOrList(ctx, DType::kI64, ints.data(), ints.size(), false));
  } else if (ctx.HasAttr("sparse_value") || ctx.HasAttr("value_string") ||
             ctx.HasAttr("value_strings")) {
    return ctx.UnsupportedError("sparse and string constants are not supported");
  } else {
    return ctx.Error("has no value attribute");
  }
  if (!data) return ctx.Error("has no value");
  ctx.SetOutput(0, data->dtype(), SymbolicShape(data->dims().begin(), data->dims().end()));
  ctx.SetOutputData(0, data);
  return Status::Ok();
}

Status EyeLikeRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 2, "input"));
  DType dtype = ctx.input_dtype(0);
  if (ctx.HasAttr("dtype")) {
    ASSIGN_OR_RETURN(int64_t t, ctx.GetRequiredInt("dtype"));
    StatusOr<DType> d = DTypeFromOnnx(t);
    if (!d.ok()) return ctx.UnsupportedError(d.status().message());
    dtype = *d;
  }
  ctx.SetOutput(0, dtype, ctx.input_shape(0));
  return Status::Ok();
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  MustRegister(r, MakeDef("Reshape", 5, kLatestOpset, ReshapeRule, 2, 2));
  MustRegister(r, MakeDef("Flatten", 1, kLatestOpset, FlattenRule));
  MustRegister(r, MakeDef("Transpose", 1, kLatestOpset, TransposeRule));
  MustRegister(r, MakeDef("Squeeze", 1, 12, SqueezeRule));
  MustRegister(r, MakeDef("Squeeze", 13, kLatestOpset, SqueezeRule, 1, 2));
  MustRegister(r, MakeDef("Unsqueeze", 1, 12, UnsqueezeRule));
  MustRegister(r, MakeDef("Unsqueeze", 13, kLatestOpset, UnsqueezeRule, 2, 2));
  MustRegister(r, MakeDef("Concat", 4, kLatestOpset, ConcatRule, 1, kVariadic));
  MustRegister(r, MakeDef("Split", 2, 12, SplitRule, 1, 1, 1, kVariadic));
  MustRegister(r, MakeDef("Split", 13, kLatestOpset, SplitRule, 1, 2, 1, kVariadic));
  MustRegister(r, MakeDef("Slice", 1, 9, SliceRule));
  MustRegister(r, MakeDef("Slice", 10, kLatestOpset, SliceRule, 3, 5));
  MustRegister(r, MakeDef("Expand", 8, kLatestOpset, ExpandRule, 2, 2));
  MustRegister(r, MakeDef("Tile", 6, kLatestOpset, TileRule, 2, 2));
  MustRegister(r, MakeDef("Pad", 2, 10, PadRule));
  MustRegister(r, MakeDef("Pad", 11, kLatestOpset, PadRule, 2, 4));  // axes (input 3) from 18
  MustRegister(r, MakeDef("Shape", 1, kLatestOpset, ShapeRule));
  MustRegister(r, MakeDef("Size", 1, kLatestOpset, SizeRule));
  MustRegister(r, MakeDef("ConstantOfShape", 9, kLatestOpset, ConstantOfShapeRule));
  OpDef range = MakeDef("Range", 11, kLatestOpset, RangeRule, 3, 3);
  range.input0_types = kNumericTypes;
  MustRegister(r, range);
  MustRegister(r, MakeDef("Constant", 1, kLatestOpset, ConstantRule, 0, 0));
  MustRegister(r, MakeDef("EyeLike", 9, kLatestOpset, EyeLikeRule));
}

}  // namespace kiln::compiler::ops
