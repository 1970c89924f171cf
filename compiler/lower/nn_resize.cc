// Layout and resampling lowerings: DepthToSpace, SpaceToDepth, Col2Im, Resize (nearest, linear,
// cubic; every coordinate transformation mode; opset 18's antialias, axes and
// keep_aspect_ratio_policy) and Upsample, with their run-time shape functions.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "compiler/lower/nn_internal.h"
#include "jit/compute.h"

namespace kiln::compiler::nn {

using jit::Cast;
using jit::FloorDiv;
using jit::FloorMod;
using jit::Load;
using jit::Select;
using jit::Store;

Status LowerDepthToSpace(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int64_t b, ctx.GetInt("blocksize", 0));
  ASSIGN_OR_RETURN(std::string mode, ctx.GetString("mode", "DCR"));
  if (b <= 0) return ctx.Error("blocksize must be positive");
  if (mode != "DCR" && mode != "CRD") return ctx.Error("mode must be DCR or CRD");
  Expr c_out = ctx.OutputDim(0, 1);
  ctx.SetCompute(0, [&](const std::vector<Expr>& o) {
    Expr i = FloorMod(o[2], I(b)), j = FloorMod(o[3], I(b));
    Expr c = mode == "DCR" ? (i * I(b) + j) * c_out + o[1] : o[1] * I(b * b) + i * I(b) + j;
    return Load(ctx.in(0), {o[0], c, FloorDiv(o[2], I(b)), FloorDiv(o[3], I(b))});
  });
  return Status::Ok();
}

Status LowerSpaceToDepth(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int64_t b, ctx.GetInt("blocksize", 0));
  if (b <= 0) return ctx.Error("blocksize must be positive");
  Expr c_in = ctx.InputDim(0, 1);
  ctx.SetCompute(0, [&](const std::vector<Expr>& o) {
    Expr block = FloorDiv(o[1], c_in), c = FloorMod(o[1], c_in);
    Expr i = FloorDiv(block, I(b)), j = FloorMod(block, I(b));
    return Load(ctx.in(0), {o[0], c, o[2] * I(b) + i, o[3] * I(b) + j});
  });
  return Status::Ok();
}

// ---- Col2Im ----------------------------------------------------------------------------------

namespace {

// Col2Im's block geometry per spatial dim, as expressions: constants when block_shape is known
// at compile time, else loaded from it.
struct Col2ImGeometry {
  std::vector<Expr> block;      // block_shape[d]
  std::vector<Expr> positions;  // block positions along d: (image + pads - extent) / stride + 1
  Expr block_size;              // prod(block_shape): input channels per output channel
};

Col2ImGeometry Col2ImDims(const NodeContext& ctx, const Col2ImAttributes& a,
                          const std::vector<Expr>& image) {
  const int spatial = static_cast<int>(image.size());
  std::optional<std::vector<int64_t>> block = ctx.InputConstInts(2);
  Col2ImGeometry g;
  g.block_size = I(1);
  for (int d = 0; d < spatial; ++d) {
    Expr b = block ? I((*block)[d]) : Load(ctx.in(2), {I(d)});
    Expr extent = I(a.dilations[d]) * (b - I(1)) + I(1);
    Expr span = image[d] + I(a.pads[d] + a.pads[d + spatial]) - extent;
    g.block.push_back(b);
    g.positions.push_back(FloorDiv(span, I(a.strides[d])) + I(1));
    g.block_size = g.block_size * b;
  }
  return g;
}

}  // namespace

// Col2Im as a gather, so no two threads write one output: output (n, c, y...) sums the input
// columns of every block tap k whose block position l = (y + pad_begin - k * dilation) / stride
// is whole and inside the grid of positions: input[n, c * prod(block) + flat(k), flat(l)].
Status LowerCol2Im(LowerContext& ctx) {
  const int spatial = ctx.output_rank(0) - 2;
  ASSIGN_OR_RETURN(Col2ImAttributes a, ParseCol2ImAttributes(ctx.node(), spatial));
  std::vector<Expr> image;
  for (int d = 0; d < spatial; ++d) image.push_back(ctx.OutputDim(0, 2 + d));
  Col2ImGeometry g = Col2ImDims(ctx, a, image);
  DType dtype = ctx.output_dtype(0), acc = AccType(dtype);
  Buffer x = ctx.in(0);
  Expr rows = ctx.InputDim(0, 1), columns = ctx.InputDim(0, 2);
  ctx.SetBody(ParallelNest(
      ctx.OutputDims(0),
      [&](const std::vector<Expr>& o) {
        std::vector<jit::IterVar> window;
        Expr valid = jit::IntImm(1, DType::kBool), k_flat = I(0), l_flat = I(0);
        for (int d = 0; d < spatial; ++d) {
          Var k("k" + std::to_string(d));
          window.push_back({k, g.block[d]});
          Expr q = o[2 + d] + I(a.pads[d]) - k * I(a.dilations[d]);
          Expr l = FloorDiv(q, I(a.strides[d]));
          valid = jit::And(valid, InBounds(l, g.positions[d]));
          if (a.strides[d] != 1)
            valid = jit::And(valid, jit::Eq(FloorMod(q, I(a.strides[d])), I(0)));
          k_flat = k_flat * g.block[d] + k;
          l_flat = l_flat * g.positions[d] + l;
        }
        // Clamped so that the taps the select discards still read inside the input.
        Expr channel = Clamp(o[1] * g.block_size + k_flat, rows);
        Expr value = Cast(acc, Load(x, {o[0], channel, Clamp(l_flat, columns)}));
        Expr sum = jit::Sum(window, Select(valid, value, jit::Const(acc, 0)));
        return Store(ctx.out(0), o, Cast(dtype, sum));
      },
      ForKind::kSerial));
  return Status::Ok();
}

// [N, C, image...] from image_shape and block_shape at run time; C is -1 (the allocation then
// fails naming the node) when the input contradicts them: channels not a multiple of the block
// size, a block or image length below 1, or L not the number of block positions.
Status Col2ImShape(ShapeFuncContext& ctx) {
  const int spatial = ctx.output_rank(0) - 2;
  ASSIGN_OR_RETURN(Col2ImAttributes a, ParseCol2ImAttributes(ctx.node(), spatial));
  std::optional<std::vector<int64_t>> known = ctx.InputConstInts(1);
  std::vector<Expr> image;
  for (int d = 0; d < spatial; ++d)
    image.push_back(known ? I((*known)[d]) : Load(ctx.in(1), {I(d)}));
  Col2ImGeometry g = Col2ImDims(ctx, a, image);
  Expr ok = jit::IntImm(1, DType::kBool), count = I(1);
  for (int d = 0; d < spatial; ++d) {
    ok = jit::And(ok, jit::And(jit::Ge(g.block[d], I(1)), jit::Ge(image[d], I(1))));
    ok = jit::And(ok, jit::Ge(g.positions[d], I(1)));
    count = count * g.positions[d];
  }
  Expr rows = ctx.InputDim(0, 1), block_size = jit::Max(g.block_size, I(1));
  ok = jit::And(ok, jit::Eq(FloorMod(rows, block_size), I(0)));
  ok = jit::And(ok, jit::Eq(count, ctx.InputDim(0, 2)));
  std::vector<Stmt> stores = {
      Store(ctx.out_shape(0), {I(0)}, ctx.InputDim(0, 0)),
      Store(ctx.out_shape(0), {I(1)}, Select(ok, FloorDiv(rows, block_size), I(-1)))};
  for (int d = 0; d < spatial; ++d) {
    stores.push_back(Store(ctx.out_shape(0), {I(2 + d)}, image[d]));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

// ---- Resize / Upsample -----------------------------------------------------------------------

namespace {

// Coordinates and weights in f64, as the ONNX reference computes them (an f32 computation
// rounds differently at exact half-way points such as (1 + 0.5) / 0.6 - 0.5).
constexpr DType kCoord = DType::kF64;

struct ResizePlan {
  std::string mode = "nearest";                // nearest | linear | cubic
  std::string coord = "half_pixel";            // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";  // nearest_mode, or "simple" (opset < 11)
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  int scales_input = -1;  // input slot of scales when they give the scale, else sizes do
  int sizes_input = -1;
  int roi_input = -1;
  std::vector<double> const_scales;  // when scales come from an attribute (Upsample 7/8)
  ResizeAttributes attrs;            // axes (all dims unless Resize-18 names some), policy,
                                     // antialias
  bool policy() const { return scales_input < 0 && attrs.policy != AspectPolicy::kStretch; }
};

// The value of sizes[i] (f64), constant when known at compile time.
Expr SizeAt(const NodeContext& ctx, int sizes_input, int i) {
  if (std::optional<std::vector<int64_t>> s = ctx.InputConstInts(sizes_input)) {
    if (static_cast<int>(s->size()) > i) return jit::FloatImm(static_cast<double>((*s)[i]), kCoord);
  }
  return Cast(kCoord, Load(ctx.in(sizes_input), {I(i)}));
}

// keep_aspect_ratio_policy's one scale: the smallest (not_larger) or largest (not_smaller)
// sizes[i] / in over the axes, in f64 as the ONNX reference computes it.
Expr PolicyScale(const NodeContext& ctx, const ResizeAttributes& a, int sizes_input) {
  Expr scale;
  for (size_t i = 0; i < a.axes.size(); ++i) {
    Expr r = jit::Div(SizeAt(ctx, sizes_input, static_cast<int>(i)),
                      Cast(kCoord, ctx.InputDim(0, a.axes[i])));
    if (!scale) {
      scale = r;
    } else {
      scale = a.policy == AspectPolicy::kNotLarger ? jit::Min(scale, r) : jit::Max(scale, r);
    }
  }
  return scale;
}

// The f32 scale of dim d: from the scales (constant or loaded) or out/in when sizes were given.
Expr ScaleOf(const LowerContext& ctx, const ResizePlan& plan, int d) {
  if (!plan.const_scales.empty()) return jit::FloatImm(plan.const_scales[d], kCoord);
  const int slot = plan.attrs.SlotOf(d);
  if (slot < 0) return jit::FloatImm(1, kCoord);
  if (plan.scales_input >= 0) {
    if (std::optional<std::vector<double>> s = ctx.InputConstDoubles(plan.scales_input)) {
      if (static_cast<int>(s->size()) > slot) {
        return jit::FloatImm(static_cast<double>(static_cast<float>((*s)[slot])), kCoord);
      }
    }
    return Cast(kCoord, Load(ctx.in(plan.scales_input), {I(slot)}));
  }
  if (plan.policy()) return PolicyScale(ctx, plan.attrs, plan.sizes_input);
  return jit::Div(Cast(kCoord, ctx.OutputDim(0, d)), Cast(kCoord, ctx.InputDim(0, d)));
}

// The scale of dim d when it is a compile-time constant.
std::optional<double> ConstScaleOf(const LowerContext& ctx, const ResizePlan& plan, int d) {
  Expr e = ScaleOf(ctx, plan, d);
  if (e->op == jit::ExprOp::kFloatImm) return e->float_value;
  const DimExpr &in = ctx.input_shape(0)[d], &out = ctx.output_shape(0)[d];
  if (!plan.policy() && plan.scales_input < 0 && in.is_const() && out.is_const())
    return static_cast<double>(out.const_value()) / static_cast<double>(in.const_value());
  return std::nullopt;
}

// True when dim d maps output index i to input index i exactly (same length, scale 1).
// Dims outside Resize-18's `axes` are always copied.
bool PassThrough(const LowerContext& ctx, const ResizePlan& plan, int d) {
  const int slot = plan.attrs.SlotOf(d);
  if (slot < 0) return true;
  if (plan.coord == "tf_crop_and_resize") return false;
  if (!(ctx.input_shape(0)[d] == ctx.output_shape(0)[d])) return false;
  if (!plan.const_scales.empty()) return plan.const_scales[d] == 1;
  if (plan.policy()) return false;  // round(scale * in) == in does not make the scale 1
  if (plan.scales_input < 0) return true;
  std::optional<std::vector<double>> s = ctx.InputConstDoubles(plan.scales_input);
  return s && static_cast<int>(s->size()) > slot && (*s)[slot] == 1;
}

struct Coordinate {
  Expr x;        // f32 position in the input
  Expr outside;  // bool: tf_crop_and_resize extrapolates here (null otherwise)
};

Coordinate SourceCoordinate(const LowerContext& ctx, const ResizePlan& plan, int d,
                            const Expr& out_index) {
  Expr scale = ScaleOf(ctx, plan, d);
  Expr x = Cast(kCoord, out_index);
  Expr in_len = Cast(kCoord, ctx.InputDim(0, d));
  // The ONNX reference uses the unrounded output length scale * in (align_corners,
  // pytorch_half_pixel, tf_crop_and_resize); with sizes given that is the size itself.
  Expr out_len = plan.scales_input >= 0 || !plan.const_scales.empty() || plan.policy()
                     ? scale * in_len
                     : Cast(kCoord, ctx.OutputDim(0, d));
  auto f = [](double v) { return jit::FloatImm(v, kCoord); };
  Coordinate c;
  const std::string& m = plan.coord;
  if (m == "asymmetric") {
    c.x = x / scale;
  } else if (m == "align_corners") {
    c.x = Select(jit::Le(out_len, f(1)), f(0), x * (in_len - f(1)) / (out_len - f(1)));
  } else if (m == "pytorch_half_pixel") {
    c.x = Select(jit::Gt(out_len, f(1)), (x + f(0.5)) / scale - f(0.5), f(0));
  } else if (m == "tf_half_pixel_for_nn") {
    c.x = (x + f(0.5)) / scale;
  } else if (m == "half_pixel_symmetric") {
    Expr adjustment = out_len / (scale * in_len);
    Expr center = in_len / f(2);
    c.x = center * (f(1) - adjustment) + (x + f(0.5)) / scale - f(0.5);
  } else if (m == "tf_crop_and_resize") {
    // roi holds the starts then the ends of the resized dims (all, or Resize-18's axes).
    const int64_t slot = plan.attrs.SlotOf(d), n = static_cast<int64_t>(plan.attrs.axes.size());
    Buffer roi = ctx.in(plan.roi_input);
    Expr start = Cast(kCoord, Load(roi, {I(slot)}));
    Expr end = Cast(kCoord, Load(roi, {I(slot + n)}));
    c.x = Select(jit::Gt(out_len, f(1)),
                 start * (in_len - f(1)) + x * (end - start) * (in_len - f(1)) / (out_len - f(1)),
                 f(0.5) * (start + end) * (in_len - f(1)));
    c.outside = jit::Or(jit::Lt(c.x, f(0)), jit::Gt(c.x, in_len - f(1)));
  } else {  // half_pixel
    c.x = (x + f(0.5)) / scale - f(0.5);
  }
  return c;
}

Expr NearestIndex(const ResizePlan& plan, const Expr& x, const Expr& scale) {
  auto f = [](double v) { return jit::FloatImm(v, kCoord); };
  Expr r;
  if (plan.nearest == "floor") {
    r = jit::Floor(x);
  } else if (plan.nearest == "ceil") {
    r = jit::Ceil(x);
  } else if (plan.nearest == "round_prefer_ceil") {
    r = jit::Floor(x + f(0.5));
  } else if (plan.nearest == "simple") {  // Upsample / Resize-10: floor up, ceil down
    r = Select(jit::Lt(scale, f(1)), jit::Ceil(x), jit::Floor(x));
  } else {  // round_prefer_floor
    r = jit::Ceil(x - f(0.5));
  }
  return Cast(DType::kI64, r);
}

// Cubic convolution weight of a tap at distance |t| (Keys, coefficient a).
Expr CubicWeight(const Expr& t, double a) {
  auto f = [](double v) { return jit::FloatImm(v, kCoord); };
  Expr d = jit::Abs(t);
  Expr near = ((f(a + 2) * d - f(a + 3)) * d) * d + f(1);
  Expr far = ((f(a) * d - f(5 * a)) * d + f(8 * a)) * d - f(4 * a);
  return Select(jit::Le(d, f(1)), near, Select(jit::Lt(d, f(2)), far, f(0)));
}

struct Tap {
  Expr index;   // i64, clamped into the input
  Expr weight;  // f32
};

// The taps of one dim at one output index: a short list summed unrolled, or (antialias) a
// window of `count` taps lo + t that the value reduces over, with the sum of their weights.
// Longest antialias window kept in a table of weights (a downscale by 1/512, cubic).
constexpr int64_t kMaxTableTaps = 2048;

struct DimTaps {
  std::vector<Tap> taps;
  Var t;
  Expr count, index, weight, norm;  // index and weight in terms of t
  bool windowed() const { return static_cast<bool>(count); }
};

// What the antialias windows bind per output element: Lets (positions, scales, weight sums)
// and, for windows of constant length, tables of their weights filled before the sum, so the
// sum over the window product reads each weight instead of recomputing it per tap.
struct WindowScope {
  Lets lets{"w"};
  std::vector<Buffer> tables;
  std::vector<Stmt> fills;
  Stmt Wrap(const Stmt& body) const {
    std::vector<Stmt> seq = fills;
    seq.push_back(body);
    Stmt s = jit::Seq(seq);
    for (auto it = tables.rbegin(); it != tables.rend(); ++it) s = jit::Allocate(*it, s);
    return lets.Wrap(s);
  }
};

// Antialias widens the filter to 1 / scale input pixels when downscaling; upscaling, or a
// scale known to be >= 1, interpolates as without it (same taps and weights).
bool Windowed(const LowerContext& ctx, const ResizePlan& plan, int d) {
  if (!plan.attrs.antialias || plan.mode == "nearest" || PassThrough(ctx, plan, d)) return false;
  std::optional<double> scale = ConstScaleOf(ctx, plan, d);
  return !(scale && *scale >= 1);
}

// The antialias window of dim d around input position c.x, as the ONNX reference and ONNX
// Runtime filter it: taps j with weight filter((j - x) * min(scale, 1)) (triangle of support 1,
// or cubic of support 2), out-of-range taps repeating the edge (or dropped with
// exclude_outside), normalized by the sum of the weights.
DimTaps WindowTaps(const LowerContext& ctx, const ResizePlan& plan, int d, const Expr& coord,
                   WindowScope& scope) {
  Lets& lets = scope.lets;
  auto f = [](double v) { return jit::FloatImm(v, kCoord); };
  const double support = plan.mode == "linear" ? 1 : 2;
  std::optional<double> const_scale = ConstScaleOf(ctx, plan, d);
  Expr len = ctx.InputDim(0, d), sc, count;
  if (const_scale) {
    double shrink = std::min(*const_scale, 1.0);
    sc = f(shrink);
    count = I(static_cast<int64_t>(std::floor(2 * (support / shrink))) + 1);
  } else {
    sc = lets.Bind(jit::Min(ScaleOf(ctx, plan, d), f(1)));
    count = lets.Bind(Cast(DType::kI64, jit::Floor(f(2 * support) / sc)) + I(1));
  }
  Expr x = lets.Bind(coord);
  Expr lo = lets.Bind(Cast(DType::kI64, jit::Floor(x + f(1) - f(support) / sc)));
  auto weight = [&](const Expr& t) {
    Expr j = lo + t;
    Expr dist = (Cast(kCoord, j) - x) * sc;
    Expr w = plan.mode == "linear" ? jit::Max(f(1) - jit::Abs(dist), f(0))
                                   : CubicWeight(dist, plan.cubic_a);
    return plan.exclude_outside ? Select(InBounds(j, len), w, f(0)) : w;
  };
  DimTaps r;
  r.t = Var("t" + std::to_string(d));
  r.count = count;
  r.index = Clamp(lo + r.t, len);
  Var u("u" + std::to_string(d));
  std::optional<int64_t> taps = ConstOf(count);
  if (taps && *taps <= kMaxTableTaps) {
    Buffer table = Buffer::Local("weights" + std::to_string(d), kCoord, {*taps});
    scope.fills.push_back(jit::For(u, count, ForKind::kSerial, Store(table, {u}, weight(u))));
    scope.tables.push_back(table);
    Var v("v" + std::to_string(d));
    r.weight = Load(table, {r.t});
    r.norm = jit::Sum({{v, count}}, Load(table, {v}));
  } else {
    r.weight = weight(r.t);
    r.norm = lets.Bind(jit::Sum({{u, count}}, weight(u)));
  }
  return r;
}

// The interpolation taps of dim d at output index o (`outside` collects tf_crop_and_resize's
// extrapolated positions). `scope` is required for antialias windows.
DimTaps TapsOf(const LowerContext& ctx, const ResizePlan& plan, int d, const Expr& o, Expr& outside,
               WindowScope* scope) {
  DimTaps r;
  Expr len = ctx.InputDim(0, d);
  if (PassThrough(ctx, plan, d)) {
    r.taps.push_back({o, jit::FloatImm(1, kCoord)});
    return r;
  }
  Coordinate c = SourceCoordinate(ctx, plan, d, o);
  if (c.outside) outside = jit::Or(outside, c.outside);
  if (scope && Windowed(ctx, plan, d)) return WindowTaps(ctx, plan, d, c.x, *scope);
  if (plan.mode == "nearest") {
    r.taps.push_back(
        {Clamp(NearestIndex(plan, c.x, ScaleOf(ctx, plan, d)), len), jit::FloatImm(1, kCoord)});
  } else if (plan.mode == "linear") {
    Expr x = jit::Max(jit::Min(c.x, Cast(kCoord, len - I(1))), jit::FloatImm(0, kCoord));
    Expr x0 = jit::Floor(x);
    Expr i0 = Cast(DType::kI64, x0);
    Expr w1 = x - x0;
    r.taps.push_back({Clamp(i0, len), jit::FloatImm(1, kCoord) - w1});
    r.taps.push_back({Clamp(i0 + I(1), len), w1});
  } else {  // cubic
    Expr x0 = jit::Floor(c.x);
    Expr t = c.x - x0;
    Expr i0 = Cast(DType::kI64, x0);
    Expr total = jit::FloatImm(0, kCoord);
    for (int k = -1; k <= 2; ++k) {
      Expr idx = i0 + I(k);
      Expr w = CubicWeight(t - jit::FloatImm(k, kCoord), plan.cubic_a);
      if (plan.exclude_outside) w = Select(InBounds(idx, len), w, jit::FloatImm(0, kCoord));
      total = total + w;
      r.taps.push_back({Clamp(idx, len), w});
    }
    if (plan.exclude_outside) {
      for (Tap& tap : r.taps) tap.weight = tap.weight / total;
    }
  }
  return r;
}

using TapLoad = std::function<Expr(const std::vector<Expr>& index)>;

// The weighted sum of load(index) over every combination of the dims' taps (2^k for linear,
// 4^k for cubic, unrolled; antialias windows reduced over and normalized), in f64; with
// `nearest`, the one tap's value as loaded. A dim of one tap of weight 1 just fixes its index.
Expr TapSum(const std::vector<DimTaps>& taps, const TapLoad& load, bool nearest) {
  const int rank = static_cast<int>(taps.size());
  Expr sum;
  std::vector<Expr> index(rank);
  std::function<void(int, Expr)> combine = [&](int d, Expr weight) {
    if (d == rank) {
      Expr x = load(index);
      if (nearest) {
        sum = x;
        return;
      }
      Expr term = weight ? jit::Mul(Cast(kCoord, x), weight) : Cast(kCoord, x);
      sum = sum ? jit::Add(sum, term) : term;
      return;
    }
    if (taps[d].windowed()) {
      index[d] = taps[d].index;
      combine(d + 1, weight ? jit::Mul(weight, taps[d].weight) : taps[d].weight);
      return;
    }
    for (const Tap& tap : taps[d].taps) {
      index[d] = tap.index;
      bool unit = taps[d].taps.size() == 1;
      combine(d + 1, unit ? weight : (weight ? jit::Mul(weight, tap.weight) : tap.weight));
    }
  };
  combine(0, Expr());
  std::vector<jit::IterVar> window;
  Expr norm;
  for (const DimTaps& t : taps) {
    if (!t.windowed()) continue;
    window.push_back({t.t, t.count});
    norm = norm ? jit::Mul(norm, t.norm) : t.norm;
  }
  return window.empty() ? sum : jit::Div(jit::Sum(window, sum), norm);
}

// The value stored from the interpolated `value`: rounded for integer outputs, cast, and the
// extrapolation value where tf_crop_and_resize is `outside` the input.
Expr OutputValue(const LowerContext& ctx, const ResizePlan& plan, Expr value,
                 const Expr& outside) {
  DType dtype = ctx.output_dtype(0);
  if (plan.mode != "nearest" && !IsFloat(dtype)) value = jit::Round(value);
  value = Cast(dtype, value);
  if (plan.coord == "tf_crop_and_resize") {
    value = Select(outside, Cast(dtype, jit::FloatImm(plan.extrapolation, DType::kF64)), value);
  }
  return value;
}

// The output value at index o.
Expr ResizeValue(const LowerContext& ctx, const ResizePlan& plan, const std::vector<Expr>& o,
                 WindowScope* scope) {
  std::vector<DimTaps> taps;
  Expr outside = jit::IntImm(0, DType::kBool);
  for (int d = 0; d < ctx.input_rank(0); ++d) {
    taps.push_back(TapsOf(ctx, plan, d, o[d], outside, scope));
  }
  TapLoad load = [&](const std::vector<Expr>& index) { return Load(ctx.in(0), index); };
  return OutputValue(ctx, plan, TapSum(taps, load, plan.mode == "nearest"), outside);
}

// One tap of weight 1 at `index`: a dim another pass resamples.
DimTaps FixedTap(const Expr& index) {
  DimTaps r;
  r.taps.push_back({index, jit::FloatImm(1, kCoord)});
  return r;
}

// Whether an antialias resize runs in two passes (SeparableRow): the last dim and some other
// dim resample, and the input row fits a local scratch (a constant length).
bool Separable(const LowerContext& ctx, const ResizePlan& plan) {
  const int last = ctx.input_rank(0) - 1;
  if (last < 1 || PassThrough(ctx, plan, last)) return false;
  const DimExpr& len = ctx.input_shape(0)[last];
  if (!len.is_const() || len.const_value() < 1 ||
      len.const_value() * DTypeSize(kCoord) > jit::kMaxLocalBytes) {
    return false;
  }
  for (int d = 0; d < last; ++d) {
    if (!PassThrough(ctx, plan, d)) return true;
  }
  return false;
}

// The last dim's antialias windows, made once per call instead of once per row: per output
// position, the window's clamped input indices and weights and the weights' sum, the values
// WindowTaps computes. Only for a window and an output row of constant lengths, in tables of
// at most a quarter of kMaxLocalBytes each (they live on the calling thread's stack).
struct ColumnTables {
  Buffer index, weight, norm;  // [out, count], [out, count], [out]
  int64_t count = 0;           // 0: no tables
  Stmt fill;
  Stmt Wrap(const Stmt& body) const {
    if (count == 0) return body;
    Stmt s = jit::Seq({fill, body});
    return jit::Allocate(index, jit::Allocate(weight, jit::Allocate(norm, s)));
  }
};

ColumnTables MakeColumnTables(const LowerContext& ctx, const ResizePlan& plan) {
  ColumnTables c;
  const int last = ctx.input_rank(0) - 1;
  const DimExpr& out = ctx.output_shape(0)[last];
  if (!Windowed(ctx, plan, last) || !out.is_const()) return c;
  Var w("tw");
  Expr outside = jit::IntImm(0, DType::kBool);  // the rows test it (SeparableRow)
  WindowScope scope{Lets("tl")};
  DimTaps taps = TapsOf(ctx, plan, last, w, outside, &scope);
  std::optional<int64_t> count = ConstOf(taps.count);
  const int64_t n = out.const_value();
  if (!count || n < 1 || n * *count * 8 > jit::kMaxLocalBytes / 4) return c;
  c.count = *count;
  c.index = Buffer::Local("col_index", DType::kI64, {n, *count});
  c.weight = Buffer::Local("col_weight", kCoord, {n, *count});
  c.norm = Buffer::Local("col_norm", kCoord, {n});
  Stmt per_tap = jit::Seq({Store(c.index, {w, taps.t}, taps.index),
                           Store(c.weight, {w, taps.t}, taps.weight)});
  Stmt body = jit::Seq(
      {jit::For(taps.t, taps.count, ForKind::kSerial, per_tap), Store(c.norm, {w}, taps.norm)});
  c.fill = jit::For(w, I(n), ForKind::kSerial, scope.Wrap(body));
  return c;
}

// The last dim's taps at output position w, read from `tables`.
DimTaps TableTaps(const ColumnTables& tables, const Expr& w) {
  DimTaps r;
  r.t = Var("tc");
  r.count = I(tables.count);
  r.index = Load(tables.index, {w, r.t});
  r.weight = Load(tables.weight, {w, r.t});
  r.norm = Load(tables.norm, {w});
  return r;
}

// One output row (index `o` over every dim but the last) of an antialias resize, separably:
// the other dims' taps are summed into a row of the input's last-dim length (their windows
// bound once per row), then each output of the row sums the last dim's taps over that row. A
// window over h x w input pixels so costs O(h + w) per output instead of O(h * w); the sums
// are the same, in f64, grouped per dim.
Stmt SeparableRow(const LowerContext& ctx, const ResizePlan& plan, const ColumnTables& tables,
                  const std::vector<Expr>& o) {
  const int last = ctx.input_rank(0) - 1;
  const int64_t in_len = ctx.input_shape(0)[last].const_value();
  WindowScope rows;
  Expr outside = jit::IntImm(0, DType::kBool);
  std::vector<DimTaps> taps;
  for (int d = 0; d < last; ++d) taps.push_back(TapsOf(ctx, plan, d, o[d], outside, &rows));
  Var j("j");
  taps.push_back(FixedTap(j));
  Buffer row = Buffer::Local("row", kCoord, {in_len});
  TapLoad from_input = [&](const std::vector<Expr>& index) { return Load(ctx.in(0), index); };
  Stmt fill = jit::For(j, I(in_len), ForKind::kSerial,
                       Store(row, {j}, TapSum(taps, from_input, /*nearest=*/false)));
  Var w("ow");
  std::vector<DimTaps> columns;
  for (int d = 0; d < last; ++d) columns.push_back(FixedTap(o[d]));
  WindowScope per_output{Lets("c")};
  if (tables.count > 0) {
    Coordinate c = SourceCoordinate(ctx, plan, last, w);
    if (c.outside) outside = jit::Or(outside, c.outside);
    columns.push_back(TableTaps(tables, w));
  } else {
    columns.push_back(TapsOf(ctx, plan, last, w, outside, &per_output));
  }
  TapLoad from_row = [&](const std::vector<Expr>& index) { return Load(row, {index[last]}); };
  std::vector<Expr> out_index = o;
  out_index.push_back(w);
  Expr value = OutputValue(ctx, plan, TapSum(columns, from_row, /*nearest=*/false), outside);
  Stmt store = per_output.Wrap(Store(ctx.out(0), out_index, value));
  Stmt resample = jit::For(w, ctx.OutputDim(0, last), ForKind::kSerial, store);
  return rows.Wrap(jit::Allocate(row, jit::Seq({fill, resample})));
}

// ---- Linear resize of the two innermost dims, from tap tables --------------------------------

// Columns per tap table and rows per parallel work item of TabledLinearBody: the tables (two i64
// indices and two f64 weights per column, 32 KiB) are filled once per plane, row block and column
// chunk, so their cost is at most 1/kRowBlock of the blend's.
constexpr int64_t kColumnChunk = 1024;
constexpr int64_t kRowBlock = 64;

// True when only the two innermost dims are resized, both linearly (no antialias window, no
// tf_crop_and_resize extrapolation): the case of every image model's bilinear upsampling.
bool TabledLinear(const LowerContext& ctx, const ResizePlan& plan) {
  const int rank = ctx.input_rank(0);
  if (plan.mode != "linear" || plan.coord == "tf_crop_and_resize" || rank < 2) return false;
  for (int d = 0; d < rank; ++d) {
    if (Windowed(ctx, plan, d) || (d < rank - 2) != PassThrough(ctx, plan, d)) return false;
  }
  return true;
}

// The tabled form of ResizeValue for TabledLinear plans, as ONNX Runtime's bilinear upsampling
// runs: per work item (plane, block of rows, chunk of columns) a table of the column taps, per
// row its two taps bound once, so the inner loop only loads and blends instead of computing f64
// coordinates, floors and i64 conversions per element (AVX2 has no vector f64 -> i64). The taps,
// weight products and the order of the four terms are ResizeValue's, so results are identical.
Stmt TabledLinearBody(const LowerContext& ctx, const ResizePlan& plan) {
  const int rank = ctx.input_rank(0);
  const DType dtype = ctx.output_dtype(0);
  std::vector<Expr> dims = ctx.OutputDims(0);
  const Expr rows = dims[rank - 2], cols = dims[rank - 1];
  std::vector<Expr> items(dims.begin(), dims.end() - 2);
  items.push_back(CeilDivE(rows, I(kRowBlock)));
  items.push_back(CeilDivE(cols, I(kColumnChunk)));
  return ParallelFlat(items, [&](const std::vector<Expr>& p) {
    Lets item("r");
    Expr row0 = item.Bind(p[rank - 2] * I(kRowBlock));
    Expr col0 = item.Bind(p[rank - 1] * I(kColumnChunk));
    Expr height = item.Bind(jit::Min(I(kRowBlock), rows - row0));
    Expr width = item.Bind(jit::Min(I(kColumnChunk), cols - col0));
    Expr unused = jit::IntImm(0, DType::kBool);  // no tf_crop_and_resize here
    // Column taps of the chunk -> tables.
    Buffer index[2] = {Buffer::Local("x_lo", DType::kI64, {kColumnChunk}),
                       Buffer::Local("x_hi", DType::kI64, {kColumnChunk})};
    Buffer weight[2] = {Buffer::Local("wx_lo", kCoord, {kColumnChunk}),
                        Buffer::Local("wx_hi", kCoord, {kColumnChunk})};
    Var j("j");
    DimTaps xt = TapsOf(ctx, plan, rank - 1, col0 + j, unused, nullptr);
    std::vector<Stmt> fill;
    for (int k = 0; k < 2; ++k) {
      fill.push_back(Store(index[k], {j}, xt.taps[k].index));
      fill.push_back(Store(weight[k], {j}, xt.taps[k].weight));
    }
    // Per row: its two taps; per element: the four terms in ResizeValue's order.
    Var y("y"), x("x");
    Lets row("t");
    DimTaps yt = TapsOf(ctx, plan, rank - 2, row0 + y, unused, nullptr);
    Expr y_index[2], y_weight[2];
    for (int k = 0; k < 2; ++k) {
      y_index[k] = row.Bind(yt.taps[k].index);
      y_weight[k] = row.Bind(yt.taps[k].weight);
    }
    std::vector<Expr> at(p.begin(), p.end() - 2);
    at.resize(rank);
    Expr sum;
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 2; ++b) {
        at[rank - 2] = y_index[a];
        at[rank - 1] = Load(index[b], {x});
        Expr term = jit::Mul(Cast(kCoord, Load(ctx.in(0), at)),
                             jit::Mul(y_weight[a], Load(weight[b], {x})));
        sum = sum ? jit::Add(sum, term) : term;
      }
    }
    if (!IsFloat(dtype)) sum = jit::Round(sum);
    at[rank - 2] = row0 + y;
    at[rank - 1] = col0 + x;
    Stmt blend = jit::For(x, width, ForKind::kSerial, Store(ctx.out(0), at, Cast(dtype, sum)));
    Stmt body = jit::Seq({jit::For(j, width, ForKind::kVectorized, jit::Seq(fill)),
                          jit::For(y, height, ForKind::kSerial, row.Wrap(blend))});
    for (int k = 1; k >= 0; --k) body = jit::Allocate(index[k], jit::Allocate(weight[k], body));
    return item.Wrap(body);
  });
}

Status BuildResize(LowerContext& ctx, const ResizePlan& plan) {
  const int rank = ctx.input_rank(0);
  if (TabledLinear(ctx, plan)) {
    ctx.SetBody(TabledLinearBody(ctx, plan));
    return Status::Ok();
  }
  bool windowed = false;
  for (int d = 0; d < rank; ++d) windowed = windowed || Windowed(ctx, plan, d);
  if (!windowed) {
    ctx.SetCompute(0,
                   [&](const std::vector<Expr>& o) { return ResizeValue(ctx, plan, o, nullptr); });
    return Status::Ok();
  }
  if (Separable(ctx, plan)) {
    std::vector<Expr> rows = ctx.OutputDims(0);
    rows.pop_back();
    ColumnTables tables = MakeColumnTables(ctx, plan);
    ctx.SetBody(tables.Wrap(ParallelFlat(
        rows, [&](const std::vector<Expr>& o) { return SeparableRow(ctx, plan, tables, o); })));
    return Status::Ok();
  }
  // Antialias: per output element, the windows' positions and weight sums are bound once.
  ctx.SetBody(ParallelNest(
      ctx.OutputDims(0),
      [&](const std::vector<Expr>& o) {
        WindowScope scope;
        Expr value = ResizeValue(ctx, plan, o, &scope);
        return scope.Wrap(Store(ctx.out(0), o, value));
      },
      ForKind::kSerial));
  return Status::Ok();
}

// Output dims floor(in * scale) from the scales (input `scales_input`, or `const_scales`) of
// the resized dims `a.axes`; other dims keep their length.
Status StoreScaledShape(ShapeFuncContext& ctx, int scales_input,
                        const std::vector<double>& const_scales, const ResizeAttributes& a) {
  const int rank = ctx.input_rank(0);
  std::vector<Stmt> stores;
  for (int d = 0; d < rank; ++d) {
    const int slot = a.SlotOf(d);
    Expr out = ctx.InputDim(0, d);
    if (slot >= 0) {
      Expr scale = const_scales.empty() ? Cast(DType::kF64, Load(ctx.in(scales_input), {I(slot)}))
                                        : jit::FloatImm(const_scales[slot], DType::kF64);
      out = Cast(DType::kI64, jit::Floor(jit::Mul(Cast(DType::kF64, out), scale)));
    }
    stores.push_back(Store(ctx.out_shape(0), {I(d)}, out));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

// Slot of the scales that give the scale: Resize-10 input 1; 11+ input 2 unless absent or empty.
int ResizeScalesInput(const NodeContext& ctx) {
  int slot = ctx.opset() < 11 ? 1 : 2;
  if (!ctx.has_input(slot)) return -1;
  const DimExpr& len = ctx.input_shape(slot)[0];
  if (len.is_const() && len.const_value() == 0) return -1;
  return slot;
}

ResizeAttributes AllDims(int rank) {
  ResizeAttributes a;
  for (int d = 0; d < rank; ++d) a.axes.push_back(d);
  return a;
}

}  // namespace

Status LowerResize(LowerContext& ctx) {
  ResizePlan plan;
  ASSIGN_OR_RETURN(plan.mode, ctx.GetString("mode", "nearest"));
  if (plan.mode != "nearest" && plan.mode != "linear" && plan.mode != "cubic") {
    return ctx.Error("unknown mode '" + plan.mode + "'");
  }
  ASSIGN_OR_RETURN(plan.attrs, ParseResizeAttributes(ctx.node(), ctx.input_rank(0)));
  if (ctx.opset() < 11) {
    plan.coord = "asymmetric";
    plan.nearest = "simple";
  } else {
    ASSIGN_OR_RETURN(plan.coord, ctx.GetString("coordinate_transformation_mode", "half_pixel"));
    static const char* kModes[] = {"half_pixel",          "half_pixel_symmetric",
                                   "pytorch_half_pixel",  "align_corners",
                                   "asymmetric",          "tf_half_pixel_for_nn",
                                   "tf_crop_and_resize"};
    if (std::find(std::begin(kModes), std::end(kModes), plan.coord) == std::end(kModes)) {
      return ctx.Error("unknown coordinate_transformation_mode '" + plan.coord + "'");
    }
    ASSIGN_OR_RETURN(plan.nearest, ctx.GetString("nearest_mode", "round_prefer_floor"));
    ASSIGN_OR_RETURN(float a, ctx.GetFloat("cubic_coeff_a", -0.75f));
    ASSIGN_OR_RETURN(int64_t exclude, ctx.GetInt("exclude_outside", 0));
    ASSIGN_OR_RETURN(float extrapolation, ctx.GetFloat("extrapolation_value", 0.0f));
    plan.cubic_a = a;
    plan.exclude_outside = exclude != 0;
    plan.extrapolation = extrapolation;
    plan.roi_input = ctx.has_input(1) ? 1 : -1;
    if (plan.coord == "tf_crop_and_resize" && plan.roi_input < 0) {
      return ctx.Error("tf_crop_and_resize needs roi");
    }
  }
  plan.scales_input = ResizeScalesInput(ctx);
  if (plan.scales_input < 0 && !ctx.has_input(3)) return ctx.Error("needs scales or sizes");
  if (plan.scales_input < 0) plan.sizes_input = 3;
  return BuildResize(ctx, plan);
}

Status ResizeShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(ResizeAttributes a, ParseResizeAttributes(ctx.node(), ctx.input_rank(0)));
  int scales = ResizeScalesInput(ctx);
  if (scales >= 0) return StoreScaledShape(ctx, scales, {}, a);
  if (!ctx.has_input(3)) return ctx.Error("needs scales or sizes");
  Expr policy_scale;
  if (a.policy != AspectPolicy::kStretch) policy_scale = PolicyScale(ctx, a, 3);
  std::vector<Stmt> stores;
  for (int d = 0; d < ctx.input_rank(0); ++d) {
    const int slot = a.SlotOf(d);
    Expr out = ctx.InputDim(0, d);
    if (slot >= 0 && policy_scale) {
      // round(scale * in), halves up, as the ONNX reference rounds.
      Expr scaled = jit::Mul(policy_scale, Cast(kCoord, out));
      out = Cast(DType::kI64, jit::Floor(scaled + jit::FloatImm(0.5, kCoord)));
    } else if (slot >= 0) {
      out = Cast(DType::kI64, Load(ctx.in(3), {I(slot)}));
    }
    stores.push_back(Store(ctx.out_shape(0), {I(d)}, out));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

Status LowerUpsample(LowerContext& ctx) {
  ResizePlan plan;
  ASSIGN_OR_RETURN(plan.mode, ctx.GetString("mode", "nearest"));
  if (plan.mode == "bilinear") plan.mode = "linear";
  if (plan.mode != "nearest" && plan.mode != "linear") {
    return ctx.Error("unknown mode '" + plan.mode + "'");
  }
  plan.coord = "asymmetric";
  plan.nearest = "simple";
  plan.attrs = AllDims(ctx.input_rank(0));
  ASSIGN_OR_RETURN(std::optional<std::vector<float>> attr, ctx.GetFloats("scales"));
  if (attr) {
    if (static_cast<int>(attr->size()) != ctx.input_rank(0)) return ctx.Error("scales length");
    plan.const_scales.assign(attr->begin(), attr->end());
  } else if (ctx.has_input(1)) {
    plan.scales_input = 1;
  } else {
    return ctx.Error("needs scales");
  }
  return BuildResize(ctx, plan);
}

Status UpsampleShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(std::optional<std::vector<float>> attr, ctx.GetFloats("scales"));
  ResizeAttributes all = AllDims(ctx.input_rank(0));
  if (attr) {
    return StoreScaledShape(ctx, -1, std::vector<double>(attr->begin(), attr->end()), all);
  }
  if (!ctx.has_input(1)) return ctx.Error("needs scales");
  return StoreScaledShape(ctx, 1, {}, all);
}

}  // namespace kiln::compiler::nn
