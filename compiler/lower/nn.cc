// Lowerings of the nn family: the registration table and the helpers the nn*.cc files share.
#include <limits>

#include "compiler/lower/lower.h"
#include "compiler/lower/nn_internal.h"
#include "jit/compute.h"

namespace kiln::compiler {
namespace nn {

Stmt SerialNest(const std::vector<Expr>& extents, const IndexBody& body, ForKind inner) {
  int rank = static_cast<int>(extents.size());
  if (rank == 0) return body({});
  std::vector<Var> vars;
  std::vector<Expr> index;
  for (int d = 0; d < rank; ++d) {
    vars.emplace_back("i" + std::to_string(d));
    index.push_back(vars.back());
  }
  Stmt s = jit::For(vars[rank - 1], extents[rank - 1], inner, body(index));
  for (int d = rank - 2; d >= 0; --d) s = jit::For(vars[d], extents[d], ForKind::kSerial, s);
  return s;
}

DType AccType(DType t) { return t == DType::kF16 || t == DType::kBF16 ? DType::kF32 : t; }

Expr Lowest(DType t) {
  if (IsFloat(t)) return jit::FloatImm(-std::numeric_limits<double>::infinity(), AccType(t));
  if (t == DType::kU8) return jit::IntImm(0, t);
  return jit::IntImm(std::numeric_limits<int64_t>::min() >> (64 - 8 * DTypeSize(t)), t);
}

Expr InBounds(const Expr& p, const Expr& n) { return jit::And(jit::Ge(p, I(0)), jit::Lt(p, n)); }

Expr Clamp(const Expr& p, const Expr& n) { return jit::Max(jit::Min(p, n - I(1)), I(0)); }

Expr CeilDivE(const Expr& a, const Expr& b) { return jit::FloorDiv(a + b - I(1), b); }

std::optional<int64_t> ConstOf(const Expr& e) {
  if (e && e->op == jit::ExprOp::kIntImm) return e->int_value;
  return std::nullopt;
}

std::vector<jit::BroadcastDim> BroadcastHints(const SymbolicShape& in, const SymbolicShape& out) {
  std::vector<jit::BroadcastDim> hints;
  size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d].is_const() && in[d].const_value() == 1) {
      hints.push_back(jit::BroadcastDim::kOne);
    } else if (in[d] == out[offset + d]) {
      hints.push_back(jit::BroadcastDim::kSame);
    } else {
      hints.push_back(jit::BroadcastDim::kUnknown);
    }
  }
  return hints;
}

StatusOr<WindowAttrs> ReadWindowAttrs(const LowerContext& ctx, int spatial,
                                      const std::vector<int64_t>* kernel_from_weights,
                                      const std::vector<Expr>& in_dims,
                                      const std::vector<Expr>& out_dims) {
  WindowAttrs w;
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> k, ctx.GetInts("kernel_shape"));
  if (k && !k->empty()) {
    w.kernel = *k;
  } else if (kernel_from_weights) {
    w.kernel = *kernel_from_weights;
  } else {
    return ctx.Error("kernel_shape is required");
  }
  if (static_cast<int>(w.kernel.size()) != spatial) return ctx.Error("kernel_shape has wrong rank");
  auto list = [&](const char* name, int64_t fill, int n) -> StatusOr<std::vector<int64_t>> {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, ctx.GetInts(name));
    if (!v || v->empty()) return std::vector<int64_t>(n, fill);
    if (static_cast<int>(v->size()) != n) return ctx.Error(std::string(name) + " has wrong length");
    return *v;
  };
  ASSIGN_OR_RETURN(w.strides, list("strides", 1, spatial));
  ASSIGN_OR_RETURN(w.dilations, list("dilations", 1, spatial));
  ASSIGN_OR_RETURN(w.pads, list("pads", 0, 2 * spatial));
  ASSIGN_OR_RETURN(w.auto_pad, ctx.GetString("auto_pad", "NOTSET"));
  ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.GetInt("ceil_mode", 0));
  w.ceil_mode = ceil_mode != 0;
  for (int i = 0; i < spatial; ++i) {
    if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0) {
      return ctx.Error("kernel_shape, strides and dilations must be positive");
    }
    Expr extent = I((w.kernel[i] - 1) * w.dilations[i] + 1);
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      Expr total = jit::Max((out_dims[i] - I(1)) * I(w.strides[i]) + extent - in_dims[i], I(0));
      Expr begin = w.auto_pad == "SAME_UPPER" ? jit::FloorDiv(total, I(2))
                                              : jit::FloorDiv(total + I(1), I(2));
      w.pad_begin.push_back(begin);
      w.pad_end.push_back(total - begin);
    } else if (w.auto_pad == "VALID") {
      w.pad_begin.push_back(I(0));
      w.pad_end.push_back(I(0));
    } else if (w.auto_pad == "NOTSET") {
      w.pad_begin.push_back(I(w.pads[i]));
      w.pad_end.push_back(I(w.pads[i + spatial]));
    } else {
      return ctx.Error("unknown auto_pad '" + w.auto_pad + "'");
    }
  }
  return w;
}

}  // namespace nn

void AddNnLowerings(LoweringTable& table) {
  auto add = [&](const char* op, int since, int until, LowerFn f, ShapeFuncFn s = nullptr) {
    table.MustAdd({op, since, until, f, s});
  };
  add("MatMul", 1, INT32_MAX, nn::LowerMatMul);
  add("Gemm", 7, INT32_MAX, nn::LowerGemm);
  add("PackedMatMul", 1, INT32_MAX, nn::LowerPackedMatMul);  // domain "kiln" (pack_weights)
  add("Einsum", 12, INT32_MAX, nn::LowerEinsum);
  add("Conv", 1, INT32_MAX, nn::LowerConv);
  add("ConvTranspose", 1, INT32_MAX, nn::LowerConvTranspose);
  add("MaxPool", 1, INT32_MAX, nn::LowerMaxPool);
  add("AveragePool", 1, INT32_MAX, nn::LowerAveragePool);
  add("LpPool", 1, INT32_MAX, nn::LowerLpPool);
  add("GlobalAveragePool", 1, INT32_MAX, nn::LowerGlobalPool);
  add("GlobalMaxPool", 1, INT32_MAX, nn::LowerGlobalPool);
  add("GlobalLpPool", 1, INT32_MAX, nn::LowerGlobalPool);
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
}

}  // namespace kiln::compiler
