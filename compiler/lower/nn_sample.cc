// Lowerings of ops that read an image at computed positions or write it at given ones
// (GridSample, RoiAlign, MaxUnpool), and Det. Their numerics follow ONNX Runtime's CPU kernels,
// which the ONNX reference tests were generated to agree with.
#include <optional>
#include <string>
#include <vector>

#include "compiler/lower/lower.h"
#include "compiler/lower/nn_internal.h"
#include "jit/compute.h"

namespace kiln::compiler::nn {
namespace {

using jit::ReduceOp;

Expr F(const Expr& like, double v) { return jit::ConstLike(like, v); }

// ---- Det ---------------------------------------------------------------------------------------

// One determinant: `a` (local M x M, f64) already holds the matrix; Gaussian elimination with
// partial pivoting (LAPACK getrf's choice of pivot, as numpy and ORT use), accumulating the
// product of the pivots and the sign of the row swaps into det[0]. A zero pivot column gives 0.
Stmt DetSteps(const Buffer& a, const Buffer& det, int64_t m) {
  Var k("k"), r("r"), p("p"), c("c"), i("i"), j("j");
  Var t("t", DType::kF64), piv("piv", DType::kF64), f("f", DType::kF64);
  Expr det0 = jit::Load(det, {I(0)});
  Expr pivot_row =
      k + jit::Reduce(ReduceOp::kArgMax, {{r, I(m) - k}}, jit::Abs(jit::Load(a, {k + r, k})));
  Stmt swap =
      jit::If(jit::Ne(p, k),
              jit::Seq({jit::For(c, I(m), ForKind::kSerial,
                                 jit::Let(t, jit::Load(a, {k, c}),
                                          jit::Seq({jit::Store(a, {k, c}, jit::Load(a, {p, c})),
                                                    jit::Store(a, {p, c}, t)}))),
                        jit::Store(det, {I(0)}, -det0)}));
  Expr factor = jit::Select(jit::Eq(piv, F(piv, 0)), F(piv, 0), jit::Load(a, {i, k}) / piv);
  Stmt eliminate = jit::For(
      i, k + I(1), I(m - 1) - k, ForKind::kSerial,
      jit::Let(
          f, factor,
          jit::For(j, k + I(1), I(m - 1) - k, ForKind::kSerial,
                   jit::Store(a, {i, j}, jit::Load(a, {i, j}) - Expr(f) * jit::Load(a, {k, j})))));
  Stmt step =
      jit::Seq({swap, jit::Let(piv, jit::Load(a, {k, k}),
                               jit::Seq({jit::Store(det, {I(0)}, det0 * piv), eliminate}))});
  return jit::For(k, I(m), ForKind::kSerial, jit::Let(p, pivot_row, step));
}

}  // namespace

// Det of every trailing M x M matrix, in f64 whatever the input type. M must be known at
// compile time (the working copy lives in stack scratch).
Status LowerDet(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  std::optional<int64_t> m = ConstOf(ctx.InputDim(0, rank - 1));
  if (!m) return ctx.UnsupportedError("needs the matrix size known at compile time");
  if (*m * *m * 8 > jit::kMaxLocalBytes)
    return ctx.UnsupportedError("matrices larger than 180 x 180 are not supported");
  Buffer a = Buffer::Local("lu", DType::kF64, {*m, *m});
  Buffer det = Buffer::Local("det", DType::kF64, {1});
  const Buffer in = ctx.in(0), out = ctx.out(0);
  ctx.SetBody(ParallelFlat(ctx.OutputDims(0), [&](const std::vector<Expr>& b) {
    Var i("ci"), j("cj");
    std::vector<Expr> at = b;
    at.push_back(i);
    at.push_back(j);
    Stmt copy =
        jit::For(i, I(*m), ForKind::kSerial,
                 jit::For(j, I(*m), ForKind::kSerial,
                          jit::Store(a, {i, j}, jit::Cast(DType::kF64, jit::Load(in, at)))));
    Stmt result = jit::Store(out, b, jit::Cast(out->dtype, jit::Load(det, {I(0)})));
    return jit::Allocate(
        a,
        jit::Allocate(det, jit::Seq({copy, jit::Store(det, {I(0)}, jit::FloatImm(1, DType::kF64)),
                                     DetSteps(a, det, *m), result})));
  }));
  return Status::Ok();
}

// ---- GridSample --------------------------------------------------------------------------------

namespace {

// ORT's GsReflect: x folded back into [lo, hi] by reflecting at both ends, repeatedly.
Expr Reflect(const Expr& x, const Expr& lo, const Expr& hi) {
  Expr range = hi - lo;
  Expr below = jit::Lt(x, lo), above = jit::Gt(x, hi);
  Expr d = jit::Select(below, lo - x, x - hi);
  Expr n = jit::Floor(d / range);
  Expr r = d - n * range;
  Expr even = jit::Eq(n - jit::Floor(n * F(n, 0.5)) * F(n, 2), F(n, 0));
  Expr from_lo = jit::Select(even, lo + r, hi - r);
  Expr from_hi = jit::Select(even, hi - r, lo + r);
  Expr folded = jit::Select(below, from_lo, jit::Select(above, from_hi, x));
  return jit::Select(jit::Gt(range, F(range, 0)), folded, lo);  // a 1-pixel axis: its centre
}

// The cubic convolution weights of the 4 taps around a point `t` (0 <= t < 1) past the second
// tap, with ORT's alpha of -0.75.
std::vector<Expr> CubicWeights(Lets& lets, const Expr& t) {
  const double a = -0.75;
  auto far = [&](const Expr& x) {  // 1 <= |x| < 2
    return ((F(x, a) * x - F(x, 5 * a)) * x + F(x, 8 * a)) * x - F(x, 4 * a);
  };
  auto near = [&](const Expr& x) {  // |x| < 1
    return (F(x, a + 2) * x - F(x, a + 3)) * x * x + F(x, 1);
  };
  Expr u = lets.Bind(F(t, 1) - t);
  return {lets.Bind(far(t + F(t, 1))), lets.Bind(near(t)), lets.Bind(near(u)),
          lets.Bind(far(u + F(u, 1)))};
}

struct GridSampler {
  const LowerContext& ctx;
  std::string mode;     // nearest | linear | cubic
  std::string padding;  // zeros | border | reflection
  bool align = false;
  DType t = DType::kF32;  // compute dtype

  Expr Dim(int axis) const { return ctx.InputDim(0, axis); }
  Expr DimF(int axis) const { return jit::Cast(t, Dim(axis)); }
  // The range a coordinate of `axis` may take before it is out of bounds.
  Expr Lo() const { return jit::FloatImm(align ? 0 : -0.5, t); }
  Expr Hi(int axis) const { return DimF(axis) - jit::FloatImm(align ? 1 : 0.5, t); }

  // Grid value g in [-1, 1] to a pixel coordinate along `axis` (2: y, 3: x).
  Expr Denormalize(const Expr& g, int axis) const {
    Expr one = jit::FloatImm(1, t), half = jit::FloatImm(0.5, t);
    if (align) return (g + one) * half * (DimF(axis) - one);
    return ((g + one) * DimF(axis) - one) * half;
  }
  // A coordinate out of [Lo, Hi] moved back in by border or reflection padding.
  Expr Pad(const Expr& v, int axis) const {
    // Bicubic with border padding clamps each tap, not the point (as PyTorch and ORT do).
    if (padding == "zeros" || (padding == "border" && mode == "cubic")) return v;
    Expr out = jit::Or(jit::Lt(v, Lo()), jit::Gt(v, Hi(axis)));
    Expr moved = padding == "border"
                     ? jit::Max(jit::Min(v, DimF(axis) - jit::FloatImm(1, t)), jit::FloatImm(0, t))
                     : Reflect(v, Lo(), Hi(axis));
    return jit::Select(out, moved, v);
  }
  // Integer pixel index along `axis` as ORT's PixelAtGrid resolves it, always in bounds; `inside`
  // is false when zeros padding reads 0 there.
  Expr Index(const Expr& i, int axis, Expr* inside) const {
    if (padding == "zeros") *inside = jit::And(*inside, InBounds(i, Dim(axis)));
    Expr j = i;
    if (padding == "reflection") {
      j = jit::Cast(DType::kI64, Reflect(jit::Cast(t, i), Lo(), Hi(axis)));
    }
    return Clamp(j, Dim(axis));
  }
  Expr Pixel(const std::vector<Expr>& o, const Expr& row, const Expr& col) const {
    Expr inside = jit::IntImm(1, DType::kBool);
    Expr r = Index(row, 2, &inside), c = Index(col, 3, &inside);
    Expr v = jit::Cast(t, jit::Load(ctx.in(0), {o[0], o[1], r, c}));
    return padding == "zeros" ? jit::Select(inside, v, jit::FloatImm(0, t)) : v;
  }

  Expr Sample(Lets& lets, const std::vector<Expr>& o, Expr x, Expr y) const {
    auto i64 = [](const Expr& e) { return jit::Cast(DType::kI64, e); };
    if (mode == "nearest") return Pixel(o, i64(y), i64(x));
    Expr x0 = lets.Bind(jit::Floor(x)), y0 = lets.Bind(jit::Floor(y));
    Expr fx = lets.Bind(x - x0), fy = lets.Bind(y - y0);
    Expr xi = lets.Bind(i64(x0)), yi = lets.Bind(i64(y0));
    if (mode == "linear") {
      Expr one = jit::FloatImm(1, t);
      Expr top = (one - fx) * Pixel(o, yi, xi) + fx * Pixel(o, yi, xi + I(1));
      Expr bottom = (one - fx) * Pixel(o, yi + I(1), xi) + fx * Pixel(o, yi + I(1), xi + I(1));
      return (one - fy) * top + fy * bottom;
    }
    std::vector<Expr> wx = CubicWeights(lets, fx), wy = CubicWeights(lets, fy);
    Expr sum = jit::FloatImm(0, t);
    for (int i = 0; i < 4; ++i) {
      Expr row = jit::FloatImm(0, t);
      for (int j = 0; j < 4; ++j) row = row + wx[j] * Pixel(o, yi + I(i - 1), xi + I(j - 1));
      sum = sum + wy[i] * row;
    }
    return sum;
  }
};

}  // namespace

// Bilinear / nearest / bicubic sampling of X [N, C, H, W] at grid [N, Ho, Wo, 2] (x then y,
// normalized to [-1, 1]) with zeros, border or reflection padding (ORT's GridSample).
Status LowerGridSample(LowerContext& ctx) {
  GridSampler s{ctx};
  ASSIGN_OR_RETURN(s.mode, ctx.GetString("mode", ctx.opset() >= 20 ? "linear" : "bilinear"));
  ASSIGN_OR_RETURN(s.padding, ctx.GetString("padding_mode", "zeros"));
  ASSIGN_OR_RETURN(int64_t align, ctx.GetInt("align_corners", 0));
  if (s.mode == "bilinear") s.mode = "linear";  // opset 16's names for opset 20's modes
  if (s.mode == "bicubic") s.mode = "cubic";
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic")
    return ctx.Error("unknown mode '" + s.mode + "'");
  if (s.padding != "zeros" && s.padding != "border" && s.padding != "reflection")
    return ctx.Error("unknown padding_mode '" + s.padding + "'");
  s.align = align != 0;
  s.t = AccType(ctx.input_dtype(0));
  const Buffer grid = ctx.in(1), out = ctx.out(0);
  ctx.SetBody(ParallelNest(
      ctx.OutputDims(0),
      [&](const std::vector<Expr>& o) {
        Lets lets("g");
        auto coord = [&](int k, int axis) {
          Expr v = s.Denormalize(jit::Cast(s.t, jit::Load(grid, {o[0], o[2], o[3], I(k)})), axis);
          if (s.mode == "nearest") v = jit::Round(v);  // nearbyint: half to even
          return lets.Bind(s.Pad(lets.Bind(v), axis));
        };
        Expr x = coord(0, 3), y = coord(1, 2);
        Expr value = s.Sample(lets, o, x, y);
        return lets.Wrap(jit::Store(out, o, jit::Cast(out->dtype, value)));
      },
      ForKind::kSerial));
  return Status::Ok();
}

// ---- RoiAlign ----------------------------------------------------------------------------------

// Each output bin [r, c, ph, pw] averages (or takes the max of) a grid of bilinear samples of
// X[batch_indices[r], c] inside its share of roi r, as ORT's RoiAlign computes them: samples
// beyond one pixel outside the image count as 0, others are clamped to the image.
Status LowerRoiAlign(LowerContext& ctx) {
  ASSIGN_OR_RETURN(std::string mode, ctx.GetString("mode", "avg"));
  if (mode != "avg" && mode != "max") return ctx.Error("unknown mode '" + mode + "'");
  ASSIGN_OR_RETURN(int64_t ratio, ctx.GetInt("sampling_ratio", 0));
  ASSIGN_OR_RETURN(float scale, ctx.GetFloat("spatial_scale", 1.0f));
  // Opset 10 has no coordinate_transformation_mode and behaves as output_half_pixel.
  ASSIGN_OR_RETURN(std::string coord,
                   ctx.GetString("coordinate_transformation_mode",
                                 ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  if (coord != "half_pixel" && coord != "output_half_pixel")
    return ctx.Error("unknown coordinate_transformation_mode '" + coord + "'");
  if (ratio < 0) return ctx.Error("sampling_ratio must be >= 0");
  const DType t = AccType(ctx.input_dtype(0));
  const Buffer x = ctx.in(0), rois = ctx.in(1), batch = ctx.in(2), out = ctx.out(0);
  const Expr height = ctx.InputDim(0, 2), width = ctx.InputDim(0, 3);
  const Expr pooled_h = ctx.OutputDim(0, 2), pooled_w = ctx.OutputDim(0, 3);
  const std::string site = "RoiAlign node '" + ctx.node().name + "' batch_indices";
  auto f = [&](double v) { return jit::FloatImm(v, t); };
  auto tf = [&](const Expr& e) { return jit::Cast(t, e); };
  ctx.SetBody(ParallelNest(
      ctx.OutputDims(0),
      [&](const std::vector<Expr>& o) {
        Lets lets("r");
        auto roi = [&](int k) {
          Expr v = tf(jit::Load(rois, {o[0], I(k)})) * f(scale);
          return lets.Bind(coord == "half_pixel" ? v - f(0.5) : v);
        };
        Expr x1 = roi(0), y1 = roi(1), x2 = roi(2), y2 = roi(3);
        Expr roi_w = x2 - x1, roi_h = y2 - y1;
        if (coord != "half_pixel") {  // legacy: at least one pixel
          roi_w = jit::Max(roi_w, f(1));
          roi_h = jit::Max(roi_h, f(1));
        }
        Expr bin_h = lets.Bind(roi_h / tf(pooled_h)), bin_w = lets.Bind(roi_w / tf(pooled_w));
        Expr grid_h = lets.Bind(ratio > 0 ? I(ratio) : jit::Cast(DType::kI64, jit::Ceil(bin_h)));
        Expr grid_w = lets.Bind(ratio > 0 ? I(ratio) : jit::Cast(DType::kI64, jit::Ceil(bin_w)));
        Expr n = lets.Bind(jit::CheckIndex(jit::Cast(DType::kI64, jit::Load(batch, {o[0]})),
                                           ctx.InputDim(0, 0), site));
        Var iy("iy"), ix("ix");
        Expr yy = y1 + tf(o[2]) * bin_h + (tf(iy) + f(0.5)) * bin_h / tf(grid_h);
        Expr xx = x1 + tf(o[3]) * bin_w + (tf(ix) + f(0.5)) * bin_w / tf(grid_w);
        // One sample: the bilinear weights of its 4 neighbours times their values.
        auto sample = [&](const Expr& sy, const Expr& sx, bool max) {
          Expr outside = jit::Or(jit::Or(jit::Lt(sy, f(-1)), jit::Gt(sy, tf(height))),
                                 jit::Or(jit::Lt(sx, f(-1)), jit::Gt(sx, tf(width))));
          auto axis = [&](const Expr& v, const Expr& size, Expr* lo, Expr* hi, Expr* frac) {
            Expr c = jit::Max(v, f(0));
            Expr low = jit::Cast(DType::kI64, c);
            Expr last = jit::Ge(low, size - I(1));
            *lo = jit::Select(last, size - I(1), low);
            *hi = jit::Select(last, size - I(1), low + I(1));
            *frac = jit::Select(last, f(0), c - tf(low));
          };
          Expr ylo, yhi, ly, xlo, xhi, lx;
          axis(sy, height, &ylo, &yhi, &ly);
          axis(sx, width, &xlo, &xhi, &lx);
          auto px = [&](const Expr& r, const Expr& c) {
            return tf(jit::Load(x, {n, o[1], Clamp(r, height), Clamp(c, width)}));
          };
          Expr hy = f(1) - ly, hx = f(1) - lx;
          std::vector<Expr> terms = {hy * hx * px(ylo, xlo), hy * lx * px(ylo, xhi),
                                     ly * hx * px(yhi, xlo), ly * lx * px(yhi, xhi)};
          Expr v = max ? jit::Max(jit::Max(terms[0], terms[1]), jit::Max(terms[2], terms[3]))
                       : terms[0] + terms[1] + terms[2] + terms[3];
          return jit::Select(outside, f(0), v);
        };
        Expr value;
        if (mode == "avg") {
          Expr count = tf(jit::Max(grid_h * grid_w, I(1)));
          value = jit::Sum({{iy, grid_h}, {ix, grid_w}}, sample(yy, xx, false)) / count;
        } else {
          value = jit::ReduceMax({{iy, grid_h}, {ix, grid_w}}, sample(yy, xx, true));
          value = jit::Select(jit::Gt(grid_h * grid_w, I(0)), value, f(0));  // ORT: no sample, 0
        }
        return lets.Wrap(jit::Store(out, o, jit::Cast(out->dtype, value)));
      },
      ForKind::kSerial));
  return Status::Ok();
}

// ---- MaxUnpool ---------------------------------------------------------------------------------

// Y = 0, then Y.flat[I.flat[e]] = X.flat[e] in element order (a repeated index keeps the last
// value, as ORT's loop does). An index outside Y is an error naming the node.
Status LowerMaxUnpool(LowerContext& ctx) {
  const int rank = ctx.output_rank(0);
  const Buffer x = ctx.in(0), idx = ctx.in(1), out = ctx.out(0);
  std::vector<Expr> out_dims = ctx.OutputDims(0);
  Stmt zero = jit::ComputeInto(
      out, [&](const std::vector<Expr>&) { return jit::Cast(out->dtype, jit::IntImm(0)); });
  Expr total = I(1);
  for (const Expr& d : out_dims) total = total * d;
  Lets h("p");
  Expr bound = h.Hoist(total);
  std::string site = "MaxUnpool node '" + ctx.node().name + "'";
  Stmt scatter = SerialNest(
      ctx.InputDims(0),
      [&](const std::vector<Expr>& e) {
        Expr flat = jit::CheckIndex(jit::Cast(DType::kI64, jit::Load(idx, e)), bound, site);
        std::vector<Expr> pos(rank);
        for (int d = rank - 1; d >= 0; --d) {
          pos[d] = jit::FloorMod(flat, out_dims[d]);
          flat = jit::FloorDiv(flat, out_dims[d]);
        }
        return jit::Store(out, pos, jit::Load(x, e));
      },
      ForKind::kSerial);
  ctx.SetBody(jit::Seq({zero, h.Wrap(scatter)}));
  return Status::Ok();
}

// The output dims from output_shape (input 2); called only when its value is a run-time one.
Status MaxUnpoolShape(ShapeFuncContext& ctx) {
  if (!ctx.has_input(2)) return ctx.Error("needs output_shape for a run-time output shape");
  std::vector<Stmt> stores;
  for (int d = 0; d < ctx.output_rank(0); ++d) {
    stores.push_back(
        jit::Store(ctx.out_shape(0), {I(d)}, jit::Cast(DType::kI64, jit::Load(ctx.in(2), {I(d)}))));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

}  // namespace kiln::compiler::nn
