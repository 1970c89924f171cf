// Signal-processing and text-feature ops: DFT, STFT, MelWeightMatrix, TfIdfVectorizer.
#include <algorithm>

#include "compiler/ops/attributes.h"
#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

// An int scalar input's value when known at compile time.
std::optional<int64_t> ScalarInput(const InferenceContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  std::optional<std::vector<int64_t>> v = ctx.InputConstInts(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

// DFT: [*, n, *, 1 | 2] -> [*, m, *, 2], m = dft_length (default n), or m / 2 + 1 onesided.
Status DftRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 2, "input"));
  SymbolicShape x = ctx.input_shape(0);
  int rank = static_cast<int>(x.size());
  ASSIGN_OR_RETURN(int axis,
                   DftAxis(ctx, rank, ctx.has_input(2) ? ctx.InputConstInts(2) : std::nullopt));
  ASSIGN_OR_RETURN(int64_t onesided, ctx.GetInt("onesided", 0));
  RETURN_IF_ERROR(
      MergeDim(ctx, x[rank - 1],
               x[rank - 1].is_const() && x[rank - 1].const_value() == 1 ? DimExpr(1) : DimExpr(2),
               "the last dim (1: real, 2: complex)")
          .status());
  DimExpr n = x[axis];
  if (ctx.has_input(1)) {
    std::optional<int64_t> len = ScalarInput(ctx, 1);
    if (!len) {
      ctx.MarkDataDependent();
      ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, rank));
      return Status::Ok();
    }
    if (*len < 1) return ctx.Error("dft_length must be positive");
    n = DimExpr(*len);
  }
  x[axis] = onesided ? FloorDiv(n, DimExpr(2)) + DimExpr(1) : n;
  x[rank - 1] = DimExpr(2);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(x));
  return Status::Ok();
}

// STFT: signal [B, T, 1 | 2], frame_step, window [F]?, frame_length? -> [B, frames, bins, 2].
Status StftRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 3, "signal"));
  const SymbolicShape& x = ctx.input_shape(0);
  ASSIGN_OR_RETURN(int64_t onesided, ctx.GetInt("onesided", 1));
  std::optional<DimExpr> frame;
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(CheckRank(ctx, 2, 1, "window"));
    frame = ctx.input_shape(2)[0];
  }
  if (std::optional<int64_t> f = ScalarInput(ctx, 3)) frame = DimExpr(*f);
  if (!ctx.has_input(2) && !ctx.has_input(3)) return ctx.Error("needs a window or frame_length");
  std::optional<int64_t> step = ScalarInput(ctx, 1);
  if (!frame || !step || !x[1].is_const() || !frame->is_const()) {
    ctx.MarkDataDependent();
    ctx.SetOutput(0, ctx.input_dtype(0), {x[0], ctx.FreshDim(), ctx.FreshDim(), DimExpr(2)});
    return Status::Ok();
  }
  int64_t t = x[1].const_value(), f = frame->const_value();
  if (*step < 1 || f < 1 || f > t) return ctx.Error("frame_step or frame_length out of range");
  DimExpr bins = onesided ? DimExpr(f / 2 + 1) : DimExpr(f);
  ctx.SetOutput(0, ctx.input_dtype(0), {x[0], DimExpr((t - f) / *step + 1), bins, DimExpr(2)});
  return Status::Ok();
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] of output_datatype (default float).
Status MelWeightMatrixRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(int64_t dtype, ctx.GetInt("output_datatype", 1));
  StatusOr<DType> t = DTypeFromOnnx(dtype);
  if (!t.ok() || !IsFloat(*t)) return ctx.Error("output_datatype must be a float type");
  std::optional<int64_t> bins = ScalarInput(ctx, 0), length = ScalarInput(ctx, 1);
  if (!bins || !length) {
    ctx.MarkDataDependent();
    ctx.SetOutput(0, *t, FreshShape(ctx, 2));
    return Status::Ok();
  }
  ctx.SetOutput(0, *t, {DimExpr(*length / 2 + 1), DimExpr(*bins)});
  return Status::Ok();
}

// TfIdfVectorizer: [C] -> [max(ngram_indexes) + 1], [N, C] -> [N, max + 1], float.
Status TfIdfRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  if (x.size() != 1 && x.size() != 2) return ctx.Error("input must have rank 1 or 2");
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> indexes, ctx.GetInts("ngram_indexes"));
  if (!indexes || indexes->empty()) return ctx.Error("needs ngram_indexes");
  int64_t width = *std::max_element(indexes->begin(), indexes->end()) + 1;
  SymbolicShape out = {DimExpr(width)};
  if (x.size() == 2) out.insert(out.begin(), x[0]);
  ctx.SetOutput(0, DType::kF32, std::move(out));
  return Status::Ok();
}

}  // namespace

void RegisterSignalOps(OpRegistry& r) {
  auto add = [&r](OpDef d, DTypeSet types) {
    d.input0_types = types;
    MustRegister(r, std::move(d));
  };
  add(MakeDef("DFT", 17, 19, DftRule, 1, 2), kFloatTypes);
  add(MakeDef("DFT", 20, kLatestOpset, DftRule, 1, 3), kFloatTypes);
  add(MakeDef("STFT", 17, kLatestOpset, StftRule, 2, 4), kFloatTypes);
  add(MakeDef("MelWeightMatrix", 17, kLatestOpset, MelWeightMatrixRule, 5, 5),
      DTypeBit(DType::kI32) | DTypeBit(DType::kI64));
  add(MakeDef("TfIdfVectorizer", 9, kLatestOpset, TfIdfRule),
      DTypeBit(DType::kI32) | DTypeBit(DType::kI64));
}

}  // namespace kiln::compiler::ops
