// Lowerings of the nn family: the registration table and the helpers the nn*.cc files share.
#include <limits>

#include "compiler/lower/lower.h"
#include "compiler/lower/nn_internal.h"
#include "jit/compute.h"

namespace kiln::compiler {
namespace nn {

DType AccType(DType t) { return t == DType::kF16 || t == DType::kBF16 ? DType::kF32 : t; }

Expr Lowest(DType t) { return jit::Lowest(AccType(t)); }

Expr InBounds(const Expr& p, const Expr& n) { return jit::And(jit::Ge(p, I(0)), jit::Lt(p, n)); }

Expr Clamp(const Expr& p, const Expr& n) { return jit::Max(jit::Min(p, n - I(1)), I(0)); }

Expr CeilDivE(const Expr& a, const Expr& b) { return jit::FloorDiv(a + b - I(1), b); }

std::optional<int64_t> ConstOf(const Expr& e) {
  if (e && e->op == jit::ExprOp::kIntImm) return e->int_value;
  return std::nullopt;
}

WindowAttrs ResolvePads(const WindowAttributes& w, const std::vector<Expr>& in_dims,
                        const std::vector<Expr>& out_dims) {
  WindowAttrs r;
  static_cast<WindowAttributes&>(r) = w;
  const int spatial = w.spatial();
  for (int i = 0; i < spatial; ++i) {
    if (w.same()) {
      Expr total =
          jit::Max((out_dims[i] - I(1)) * I(w.strides[i]) + I(w.extent(i)) - in_dims[i], I(0));
      Expr begin = w.auto_pad == AutoPad::kSameUpper ? jit::FloorDiv(total, I(2))
                                                     : jit::FloorDiv(total + I(1), I(2));
      r.pad_begin.push_back(begin);
      r.pad_end.push_back(total - begin);
    } else if (w.auto_pad == AutoPad::kValid) {
      r.pad_begin.push_back(I(0));
      r.pad_end.push_back(I(0));
    } else {
      r.pad_begin.push_back(I(w.pads[i]));
      r.pad_end.push_back(I(w.pads[i + spatial]));
    }
  }
  return r;
}

}  // namespace nn

void AddNnLowerings(LoweringTable& table) {
  auto add = [&](const char* op, int since, int until, LowerFn f, ShapeFuncFn s = nullptr) {
    table.MustAdd({op, since, until, f, s});
  };
  add("MatMul", 1, INT32_MAX, nn::LowerMatMul);
  add("Gemm", 7, INT32_MAX, nn::LowerGemm);
  add("PackedMatMul", 1, INT32_MAX, nn::LowerPackedMatMul);  // domain "kiln" (pack_weights)
  add("RecurrentSequence", 1, INT32_MAX, nn::LowerRecurrentSequence);  // "kiln" (expand_rnn)
  add("Einsum", 12, INT32_MAX, nn::LowerEinsum);
  add("Conv", 1, INT32_MAX, nn::LowerConv);
  add("ConvTranspose", 1, INT32_MAX, nn::LowerConvTranspose);
  add("MaxPool", 1, INT32_MAX, nn::LowerMaxPool);
  add("AveragePool", 1, INT32_MAX, nn::LowerAveragePool);
  add("LpPool", 2, INT32_MAX, nn::LowerLpPool);
  add("GlobalAveragePool", 1, INT32_MAX, nn::LowerGlobalPool);
  add("GlobalMaxPool", 1, INT32_MAX, nn::LowerGlobalPool);
  add("GlobalLpPool", 2, INT32_MAX, nn::LowerGlobalPool);
  add("BatchNormalization", 7, INT32_MAX, nn::LowerBatchNorm);
  add("InstanceNormalization", 1, INT32_MAX, nn::LowerInstanceNorm);
  add("LayerNormalization", 17, INT32_MAX, nn::LowerLayerNorm);
  add("MeanVarianceNormalization", 9, INT32_MAX, nn::LowerMeanVarianceNorm);
  add("LpNormalization", 1, INT32_MAX, nn::LowerLpNorm);
  add("LRN", 1, INT32_MAX, nn::LowerLrn);
  add("DepthToSpace", 1, INT32_MAX, nn::LowerDepthToSpace);
  add("SpaceToDepth", 1, INT32_MAX, nn::LowerSpaceToDepth);
  add("Resize", 10, INT32_MAX, nn::LowerResize, nn::ResizeShape);
  add("Upsample", 7, 9, nn::LowerUpsample, nn::UpsampleShape);
  add("MaxUnpool", 9, INT32_MAX, nn::LowerMaxUnpool, nn::MaxUnpoolShape);
  add("Det", 11, INT32_MAX, nn::LowerDet);
  add("Col2Im", 18, INT32_MAX, nn::LowerCol2Im, nn::Col2ImShape);
  add("GridSample", 16, INT32_MAX, nn::LowerGridSample);
  add("RoiAlign", 10, INT32_MAX, nn::LowerRoiAlign);
}

}  // namespace kiln::compiler
