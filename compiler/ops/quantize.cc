// Shape rules of the quantization ops: QuantizeLinear and DequantizeLinear (per tensor, and per
// axis from opset 13). QLinearMatMul, QLinearConv, MatMulInteger and ConvInteger are expanded at
// import (compiler/onnx/expand_quant.h) into these and ordinary ops.
#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

constexpr uint32_t kQuantTypes = DTypeBit(DType::kU8) | DTypeBit(DType::kI8);

// Scale and zero point: one element (per tensor), or 1-D along `axis` (opset 13+), with the
// same shape; the zero point's dtype is the quantized dtype.
Status CheckScaleAndZeroPoint(InferenceContext& ctx, int data) {
  const SymbolicShape& x = ctx.input_shape(data);
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.input_rank(i) > 1) return ctx.Error("scale and zero point must be scalars or 1-D");
    if (ctx.input_rank(i) == 1 && ctx.input_shape(i)[0] != DimExpr(1)) {
      if (ctx.opset() < 13) return ctx.Error("per-axis scales need opset 13");
      ASSIGN_OR_RETURN(int64_t axis, ctx.GetInt("axis", 1));
      ASSIGN_OR_RETURN(int a, ctx.NormalizeAxis(axis, static_cast<int>(x.size())));
      RETURN_IF_ERROR(MergeDim(ctx, x[a], ctx.input_shape(i)[0], "scale length").status());
    }
  }
  auto single = [&](int i) {
    return ctx.input_rank(i) == 0 || ctx.input_shape(i)[0] == DimExpr(1);
  };
  if (ctx.has_input(2) && ctx.has_input(1) && !(single(1) && single(2)) &&
      ctx.input_shape(1) != ctx.input_shape(2))
    return ctx.Error("scale and zero point have different shapes");
  return Status::Ok();
}

Status QuantizeRule(InferenceContext& ctx) {
  if (!(DTypeBit(ctx.input_dtype(0)) & (DTypeBit(DType::kF32) | DTypeBit(DType::kI32))))
    return ctx.UnsupportedError(std::string("input dtype ") + DTypeName(ctx.input_dtype(0)) +
                                " (kiln quantizes float32 and int32)");
  DType out = ctx.has_input(2) ? ctx.input_dtype(2) : DType::kU8;
  if (!(DTypeBit(out) & kQuantTypes))
    return ctx.UnsupportedError(std::string("zero point dtype ") + DTypeName(out) +
                                " (kiln quantizes to uint8 and int8)");
  RETURN_IF_ERROR(CheckScaleAndZeroPoint(ctx, 0));
  ctx.SetOutput(0, out, ctx.input_shape(0));
  return Status::Ok();
}

Status DequantizeRule(InferenceContext& ctx) {
  if (!(DTypeBit(ctx.input_dtype(0)) & (kQuantTypes | DTypeBit(DType::kI32))))
    return ctx.UnsupportedError(std::string("input dtype ") + DTypeName(ctx.input_dtype(0)) +
                                " (kiln dequantizes uint8, int8 and int32)");
  if (ctx.has_input(2)) RETURN_IF_ERROR(CheckSameDType(ctx, 0, 2));
  RETURN_IF_ERROR(CheckScaleAndZeroPoint(ctx, 0));
  ctx.SetOutput(0, ctx.input_dtype(1), ctx.input_shape(0));
  return Status::Ok();
}

}  // namespace

void RegisterQuantizeOps(OpRegistry& r) {
  MustRegister(r, MakeDef("QuantizeLinear", 10, 18, QuantizeRule, 2, 3));
  MustRegister(r, MakeDef("DequantizeLinear", 10, 18, DequantizeRule, 2, 3));
}

}  // namespace kiln::compiler::ops
