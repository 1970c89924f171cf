// Indexing and data-dependent ops: Gather*, Scatter*, OneHot, NonZero, TopK, CumSum, Trilu,
// Compress, Unique, NonMaxSuppression, ReverseSequence.
#include <cmath>

#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

constexpr DTypeSet kIndexTypes = DTypeBit(DType::kI32) | DTypeBit(DType::kI64);

Status CheckIndexDType(const InferenceContext& ctx, int i) {
  if (DTypeBit(ctx.input_dtype(i)) & kIndexTypes) return Status::Ok();
  return ctx.Error("indices '" + ctx.input(i).name + "' have dtype " +
                   DTypeName(ctx.input_dtype(i)) + ", expected int32 or int64");
}

Status GatherRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckIndexDType(ctx, 1));
  const SymbolicShape& data = ctx.input_shape(0);
  const SymbolicShape& indices = ctx.input_shape(1);
  int rank = static_cast<int>(data.size());
  if (rank == 0) return ctx.Error("data must have rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  SymbolicShape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  // Shape(x)[i]: pick known values with constant indices.
  std::optional<std::vector<DimExpr>> values = ctx.InputValues(0);
  std::optional<std::vector<int64_t>> idx = ctx.InputConstInts(1);
  if (values && idx && rank == 1 && indices.size() <= 1) {
    std::vector<DimExpr> picked;
    auto n = static_cast<int64_t>(values->size());
    for (int64_t i : *idx) {
      if (i < -n || i >= n)
        return ctx.Error("index " + std::to_string(i) + " is out of range for " +
                         std::to_string(n));
      picked.push_back((*values)[i < 0 ? i + n : i]);
    }
    ctx.SetOutputValues(0, std::move(picked));
  }
  return Status::Ok();
}

Status GatherElementsRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckIndexDType(ctx, 1));
  int rank = ctx.input_rank(0);
  if (ctx.input_rank(1) != rank) return ctx.Error("data and indices must have the same rank");
  ASSIGN_OR_RETURN(int64_t axis, ctx.GetInt("axis", 0));
  RETURN_IF_ERROR(ctx.NormalizeAxis(axis, rank).status());
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(1));
  return Status::Ok();
}

// GatherND: indices [..., q]; output indices[:-1] + data[batch_dims + q:].
Status GatherNDRule(InferenceContext& ctx) {
  if (ctx.input_dtype(1) != DType::kI64) return ctx.Error("indices must be int64");
  const SymbolicShape& data = ctx.input_shape(0);
  const SymbolicShape& indices = ctx.input_shape(1);
  ASSIGN_OR_RETURN(int64_t b, ctx.GetInt("batch_dims", 0));
  if (indices.empty() || data.empty()) return ctx.Error("data and indices must have rank >= 1");
  if (!indices.back().is_const())
    return ctx.UnsupportedError("the last dim of indices must be static");
  int64_t q = indices.back().const_value();
  auto rank = static_cast<int64_t>(data.size());
  if (b < 0 || b >= static_cast<int64_t>(indices.size()) || q < 0 || q > rank || b + q > rank)
    return ctx.Error("indices " + ShapeToString(indices) + " do not fit data " +
                     ShapeToString(data));
  SymbolicShape out(indices.begin(), indices.end() - 1);
  out.insert(out.end(), data.begin() + b + q, data.end());
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// ScatterElements / Scatter / ScatterND: the output is data, updated.
Status ScatterRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckIndexDType(ctx, 1));
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 2));
  if (ctx.node().op_type != "ScatterND") {
    if (ctx.input_rank(1) != ctx.input_rank(0))
      return ctx.Error("data and indices must have the same rank");
    if (ctx.input_rank(2) != ctx.input_rank(1))
      return ctx.Error("indices and updates must have the same shape");
    ASSIGN_OR_RETURN(int64_t axis, ctx.GetInt("axis", 0));
    RETURN_IF_ERROR(ctx.NormalizeAxis(axis, ctx.input_rank(0)).status());
  }
  return SameAsInput0(ctx);
}

// OneHot(indices, depth, values): depth inserted at `axis`, values' dtype.
Status OneHotRule(InferenceContext& ctx) {
  const SymbolicShape& indices = ctx.input_shape(0);
  int out_rank = static_cast<int>(indices.size()) + 1;
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", -1));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, out_rank));
  if (ctx.input_rank(2) != 1 || ctx.input_shape(2)[0] != DimExpr(2))
    return ctx.Error("values must have shape [2], has " + ShapeToString(ctx.input_shape(2)));
  std::optional<DimExpr> depth;
  if (std::optional<std::vector<DimExpr>> v = ctx.InputValues(1); v && v->size() == 1) {
    depth = (*v)[0];
  } else if (const TensorData* d = ctx.input_data(1); d && d->num_elements() == 1) {
    double v = d->ToDoubles()[0];
    if (!(v >= 1 && v < 4e18)) return ctx.Error("depth " + std::to_string(v) + " is out of range");
    depth = DimExpr(static_cast<int64_t>(v));
  }
  if (!depth || depth->HasFreshSymbol()) ctx.MarkDataDependent();
  if (!depth) depth = ctx.FreshDim();
  if (depth->is_const() && depth->const_value() < 1) return ctx.Error("depth must be positive");
  SymbolicShape out = indices;
  out.insert(out.begin() + axis, *depth);
  ctx.SetOutput(0, ctx.input_dtype(2), std::move(out));
  return Status::Ok();
}

Status NonZeroRule(InferenceContext& ctx) {
  ctx.MarkDataDependent();
  ctx.SetOutput(0, DType::kI64, {DimExpr(static_cast<int64_t>(ctx.input_rank(0))), ctx.FreshDim()});
  return Status::Ok();
}

// TopK: k is an attribute before opset 10, a 1-element input from 10.
Status TopKRule(InferenceContext& ctx) {
  SymbolicShape out = ctx.input_shape(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", -1));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, static_cast<int>(out.size())));
  std::optional<DimExpr> k;
  if (ctx.opset() < 10) {
    ASSIGN_OR_RETURN(int64_t kv, ctx.GetRequiredInt("k"));
    k = DimExpr(kv);
  } else {
    if (ctx.input_dtype(1) != DType::kI64) return ctx.Error("k must be int64");
    if (std::optional<std::vector<DimExpr>> v = ctx.InputValues(1); v && v->size() == 1)
      k = (*v)[0];
  }
  if (!k || k->HasFreshSymbol()) ctx.MarkDataDependent();
  if (!k) k = ctx.FreshDim();
  if (k->is_const() && k->const_value() < 0) return ctx.Error("k must be non-negative");
  if (k->is_const() && out[axis].is_const() && k->const_value() > out[axis].const_value())
    return ctx.Error("k " + k->ToString() + " exceeds dim " + out[axis].ToString());
  out[axis] = *k;
  ctx.SetOutput(0, ctx.input_dtype(0), out);
  ctx.SetOutput(1, DType::kI64, out);
  return Status::Ok();
}

Status CumSumRule(InferenceContext& ctx) {
  if (ctx.input_rank(1) > 1) return ctx.Error("axis must be a scalar");
  return SameAsInput0(ctx);
}

Status TriluRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 2, "input"));
  return SameAsInput0(ctx);
}

// sequence_lens holds one length per batch entry. ONNX Runtime rejects any other length; a
// kernel would otherwise read past it (or leave entries unused), so a mismatch is an error here
// when both sizes are known, and a precondition of the node's kernel (checked before every
// call) when either is symbolic.
Status ReverseSequenceRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 2, "input"));
  if (ctx.input_rank(1) != 1) return ctx.Error("sequence_lens must be 1-D");
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t batch_attr, ctx.GetInt("batch_axis", 1));
  ASSIGN_OR_RETURN(int batch, ctx.NormalizeAxis(batch_attr, rank, "batch_axis"));
  const DimExpr& lens = ctx.input_shape(1)[0];
  const DimExpr& batch_dim = ctx.input_shape(0)[batch];
  if (lens.is_const() && batch_dim.is_const() && lens != batch_dim) {
    return ctx.Error("sequence_lens has " + lens.ToString() + " entries but the batch dim (axis " +
                     std::to_string(batch) + " of '" + ctx.input(0).name + "') is " +
                     batch_dim.ToString() + ": it needs one length per batch entry");
  }
  ctx.Assume(DimFact::Kind::kEqual, lens, batch_dim);
  return SameAsInput0(ctx);
}

Status CompressRule(InferenceContext& ctx) {
  if (ctx.input_dtype(1) != DType::kBool || ctx.input_rank(1) != 1)
    return ctx.Error("condition must be 1-D bool");
  ctx.MarkDataDependent();
  if (!ctx.HasAttr("axis")) {
    ctx.SetOutput(0, ctx.input_dtype(0), {ctx.FreshDim()});
    return Status::Ok();
  }
  SymbolicShape out = ctx.input_shape(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetRequiredInt("axis"));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, static_cast<int>(out.size())));
  out[axis] = ctx.FreshDim();
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// Unique: Y, indices, inverse_indices, counts.
Status UniqueRule(InferenceContext& ctx) {
  ctx.MarkDataDependent();
  const SymbolicShape& x = ctx.input_shape(0);
  DimExpr n = ctx.FreshDim();
  if (!ctx.HasAttr("axis")) {
    ctx.SetOutput(0, ctx.input_dtype(0), {n});
    ctx.SetOutput(2, DType::kI64, {Product(x, 0, static_cast<int>(x.size()))});
  } else {
    ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetRequiredInt("axis"));
    ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, static_cast<int>(x.size())));
    SymbolicShape y = x;
    y[axis] = n;
    ctx.SetOutput(0, ctx.input_dtype(0), std::move(y));
    ctx.SetOutput(2, DType::kI64, {x[axis]});
  }
  ctx.SetOutput(1, DType::kI64, {n});
  ctx.SetOutput(3, DType::kI64, {n});
  return Status::Ok();
}

Status NonMaxSuppressionRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 3, "boxes"));
  RETURN_IF_ERROR(CheckRank(ctx, 1, 3, "scores"));
  ctx.MarkDataDependent();
  ctx.SetOutput(0, DType::kI64, {ctx.FreshDim(), DimExpr(3)});
  return Status::Ok();
}

}  // namespace

void RegisterIndexingOps(OpRegistry& r) {
  MustRegister(r, MakeDef("Gather", 1, kLatestOpset, GatherRule, 2, 2));
  MustRegister(r, MakeDef("GatherElements", 11, kLatestOpset, GatherElementsRule, 2, 2));
  MustRegister(r, MakeDef("GatherND", 11, kLatestOpset, GatherNDRule, 2, 2));
  MustRegister(r, MakeDef("Scatter", 9, 10, ScatterRule, 3, 3));
  MustRegister(r, MakeDef("ScatterElements", 11, kLatestOpset, ScatterRule, 3, 3));
  MustRegister(r, MakeDef("ScatterND", 11, kLatestOpset, ScatterRule, 3, 3));
  MustRegister(r, MakeDef("OneHot", 9, kLatestOpset, OneHotRule, 3, 3));
  MustRegister(r, MakeDef("NonZero", 9, kLatestOpset, NonZeroRule));
  OpDef topk1 = MakeDef("TopK", 1, 9, TopKRule, 1, 1, 2, 2);
  topk1.input0_types = kNumericTypes;
  MustRegister(r, topk1);
  OpDef topk10 = MakeDef("TopK", 10, kLatestOpset, TopKRule, 2, 2, 2, 2);
  topk10.input0_types = kNumericTypes;
  MustRegister(r, topk10);
  OpDef cumsum = MakeDef("CumSum", 11, kLatestOpset, CumSumRule, 2, 2);
  cumsum.input0_types = kNumericTypes;
  MustRegister(r, cumsum);
  MustRegister(r, MakeDef("Trilu", 14, kLatestOpset, TriluRule, 1, 2));
  MustRegister(r, MakeDef("Compress", 9, kLatestOpset, CompressRule, 2, 2));
  MustRegister(r, MakeDef("Unique", 11, kLatestOpset, UniqueRule, 1, 1, 1, 4));
  OpDef nms = MakeDef("NonMaxSuppression", 10, kLatestOpset, NonMaxSuppressionRule, 2, 5);
  nms.input0_types = DTypeBit(DType::kF32);
  MustRegister(r, nms);
  MustRegister(r, MakeDef("ReverseSequence", 10, kLatestOpset, ReverseSequenceRule, 2, 2));
}

}  // namespace kiln::compiler::ops
