// Lowerings of QuantizeLinear and DequantizeLinear, exactly as ONNX defines them:
// q = saturate(round_half_even(x / scale) + zero_point), x = (q - zero_point) * scale, with one
// scale (and zero point) per tensor or one per index along `axis`.
#include "compiler/lower/lower.h"

namespace kiln::compiler {
namespace {

using jit::Expr;

// Element `idx` of the scale or zero point in `slot`: its only element, or the one at
// idx[axis] for a per-axis parameter.
StatusOr<Expr> ParamAt(const LowerContext& ctx, int slot, const std::vector<Expr>& idx,
                       DType as) {
  if (!ctx.has_input(slot)) return jit::Const(as, 0);
  bool per_axis = ctx.input_rank(slot) == 1 && ctx.input_shape(slot)[0] != DimExpr(1);
  std::vector<Expr> at;
  if (per_axis) {
    ASSIGN_OR_RETURN(int64_t axis, ctx.GetInt("axis", 1));
    ASSIGN_OR_RETURN(int a, ctx.NormalizeAxis(axis, ctx.input_rank(0)));
    at.push_back(idx[a]);
  } else if (ctx.input_rank(slot) == 1) {
    at.push_back(jit::IntImm(0));
  }
  return jit::Cast(as, jit::Load(ctx.in(slot), at));
}

Status LowerQuantize(LowerContext& ctx) {
  DType q = ctx.output_dtype(0);
  double lo = q == DType::kU8 ? 0 : -128, hi = q == DType::kU8 ? 255 : 127;
  Status status;
  ctx.SetCompute(0, [&](const std::vector<Expr>& idx) -> Expr {
    StatusOr<Expr> scale = ParamAt(ctx, 1, idx, DType::kF32);
    StatusOr<Expr> zero = ParamAt(ctx, 2, idx, DType::kF32);
    if (!scale.ok() || !zero.ok()) {
      status = scale.ok() ? zero.status() : scale.status();
      return jit::Const(q, 0);
    }
    Expr x = jit::Cast(DType::kF32, jit::Load(ctx.in(0), idx));
    Expr v = jit::Add(jit::Round(jit::Div(x, *scale)), *zero);
    v = jit::Min(jit::Max(v, jit::Const(DType::kF32, lo)), jit::Const(DType::kF32, hi));
    return jit::Cast(q, v);
  });
  return status;
}

Status LowerDequantize(LowerContext& ctx) {
  DType out = ctx.output_dtype(0);
  Status status;
  ctx.SetCompute(0, [&](const std::vector<Expr>& idx) -> Expr {
    StatusOr<Expr> scale = ParamAt(ctx, 1, idx, out);
    // int32 inputs (biases) exceed float's exact range: subtract in int32 (ONNX requires a zero
    // point of 0 there, so this is the value itself), then convert once.
    DType wide = ctx.input_dtype(0) == DType::kI32 ? DType::kI32 : DType::kF32;
    StatusOr<Expr> zero = ParamAt(ctx, 2, idx, wide);
    if (!scale.ok() || !zero.ok()) {
      status = scale.ok() ? zero.status() : scale.status();
      return jit::Const(out, 0);
    }
    Expr x = jit::Cast(wide, jit::Load(ctx.in(0), idx));
    return jit::Mul(jit::Cast(out, jit::Sub(x, *zero)), *scale);
  });
  return status;
}

}  // namespace

void AddQuantizeLowerings(LoweringTable& table) {
  table.MustAdd({"QuantizeLinear", 10, 18, LowerQuantize, nullptr});
  table.MustAdd({"DequantizeLinear", 10, 18, LowerDequantize, nullptr});
}

}  // namespace kiln::compiler
