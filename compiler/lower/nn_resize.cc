// Layout and resampling lowerings: DepthToSpace, SpaceToDepth, Resize (nearest, linear, cubic;
// every coordinate transformation mode) and Upsample, with their run-time shape functions.
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
  int roi_input = -1;
  std::vector<double> const_scales;  // when scales come from an attribute (Upsample 7/8)
};

// The f32 scale of dim d: from the scales (constant or loaded) or out/in when sizes were given.
Expr ScaleOf(const LowerContext& ctx, const ResizePlan& plan, int d) {
  if (!plan.const_scales.empty()) return jit::FloatImm(plan.const_scales[d], kCoord);
  if (plan.scales_input >= 0) {
    if (std::optional<std::vector<double>> s = ctx.InputConstDoubles(plan.scales_input)) {
      if (static_cast<int>(s->size()) > d) {
        return jit::FloatImm(static_cast<double>(static_cast<float>((*s)[d])), kCoord);
      }
    }
    return Cast(kCoord, Load(ctx.in(plan.scales_input), {I(d)}));
  }
  return jit::Div(Cast(kCoord, ctx.OutputDim(0, d)), Cast(kCoord, ctx.InputDim(0, d)));
}

// True when dim d maps output index i to input index i exactly (same length, scale 1).
bool PassThrough(const LowerContext& ctx, const ResizePlan& plan, int d) {
  if (plan.coord == "tf_crop_and_resize") return false;
  if (!(ctx.input_shape(0)[d] == ctx.output_shape(0)[d])) return false;
  if (!plan.const_scales.empty()) return plan.const_scales[d] == 1;
  if (plan.scales_input < 0) return true;
  std::optional<std::vector<double>> s = ctx.InputConstDoubles(plan.scales_input);
  return s && static_cast<int>(s->size()) > d && (*s)[d] == 1;
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
  Expr out_len = plan.scales_input >= 0 || !plan.const_scales.empty()
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
    int rank = ctx.input_rank(0);
    Buffer roi = ctx.in(plan.roi_input);
    Expr start = Cast(kCoord, Load(roi, {I(d)}));
    Expr end = Cast(kCoord, Load(roi, {I(d + rank)}));
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

Status BuildResize(LowerContext& ctx, const ResizePlan& plan) {
  const int rank = ctx.input_rank(0);
  DType dtype = ctx.output_dtype(0);
  bool is_float = IsFloat(dtype);
  ctx.SetCompute(0, [&](const std::vector<Expr>& o) {
    std::vector<std::vector<Tap>> taps(rank);
    Expr outside = jit::IntImm(0, DType::kBool);
    for (int d = 0; d < rank; ++d) {
      Expr len = ctx.InputDim(0, d);
      if (PassThrough(ctx, plan, d)) {
        taps[d].push_back({o[d], jit::FloatImm(1, kCoord)});
        continue;
      }
      Coordinate c = SourceCoordinate(ctx, plan, d, o[d]);
      if (c.outside) outside = jit::Or(outside, c.outside);
      if (plan.mode == "nearest") {
        taps[d].push_back(
            {Clamp(NearestIndex(plan, c.x, ScaleOf(ctx, plan, d)), len), jit::FloatImm(1, kCoord)});
      } else if (plan.mode == "linear") {
        Expr x = jit::Max(jit::Min(c.x, Cast(kCoord, len - I(1))), jit::FloatImm(0, kCoord));
        Expr x0 = jit::Floor(x);
        Expr i0 = Cast(DType::kI64, x0);
        Expr w1 = x - x0;
        taps[d].push_back({Clamp(i0, len), jit::FloatImm(1, kCoord) - w1});
        taps[d].push_back({Clamp(i0 + I(1), len), w1});
      } else {  // cubic
        Expr x0 = jit::Floor(c.x);
        Expr t = c.x - x0;
        Expr i0 = Cast(DType::kI64, x0);
        std::vector<Tap> cubic;
        Expr total = jit::FloatImm(0, kCoord);
        for (int k = -1; k <= 2; ++k) {
          Expr idx = i0 + I(k);
          Expr w = CubicWeight(t - jit::FloatImm(k, kCoord), plan.cubic_a);
          if (plan.exclude_outside) w = Select(InBounds(idx, len), w, jit::FloatImm(0, kCoord));
          total = total + w;
          cubic.push_back({Clamp(idx, len), w});
        }
        if (plan.exclude_outside) {
          for (Tap& tap : cubic) tap.weight = tap.weight / total;
        }
        taps[d] = cubic;
      }
    }
    // Sum over every combination of taps (2^k for linear, 4^k for cubic).
    Expr sum;
    std::vector<Expr> index(rank);
    std::function<void(int, Expr)> combine = [&](int d, Expr weight) {
      if (d == rank) {
        Expr x = Load(ctx.in(0), index);
        if (plan.mode == "nearest") {
          sum = x;
          return;
        }
        Expr term = weight ? jit::Mul(Cast(kCoord, x), weight) : Cast(kCoord, x);
        sum = sum ? jit::Add(sum, term) : term;
        return;
      }
      for (const Tap& tap : taps[d]) {
        index[d] = tap.index;
        bool unit = taps[d].size() == 1;
        combine(d + 1, unit ? weight : (weight ? jit::Mul(weight, tap.weight) : tap.weight));
      }
    };
    combine(0, Expr());
    Expr value = sum;
    if (plan.mode != "nearest" && !is_float) value = jit::Round(value);
    value = Cast(dtype, value);
    if (plan.coord == "tf_crop_and_resize") {
      value = Select(outside, Cast(dtype, jit::FloatImm(plan.extrapolation, DType::kF64)), value);
    }
    return value;
  });
  return Status::Ok();
}

Status StoreScaledShape(ShapeFuncContext& ctx, int scales_input,
                        const std::vector<double>& const_scales) {
  const int rank = ctx.input_rank(0);
  std::vector<Stmt> stores;
  for (int d = 0; d < rank; ++d) {
    Expr scale = const_scales.empty() ? Cast(DType::kF64, Load(ctx.in(scales_input), {I(d)}))
                                      : jit::FloatImm(const_scales[d], DType::kF64);
    Expr out =
        Cast(DType::kI64, jit::Floor(jit::Mul(Cast(DType::kF64, ctx.InputDim(0, d)), scale)));
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

}  // namespace

Status LowerResize(LowerContext& ctx) {
  ResizePlan plan;
  ASSIGN_OR_RETURN(plan.mode, ctx.GetString("mode", "nearest"));
  if (plan.mode != "nearest" && plan.mode != "linear" && plan.mode != "cubic") {
    return ctx.Error("unknown mode '" + plan.mode + "'");
  }
  ASSIGN_OR_RETURN(int64_t antialias, ctx.GetInt("antialias", 0));
  if (antialias) return ctx.UnsupportedError("antialias is not supported");
  ASSIGN_OR_RETURN(std::string policy, ctx.GetString("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch") return ctx.UnsupportedError("keep_aspect_ratio_policy " + policy);
  if (ctx.HasAttr("axes")) return ctx.UnsupportedError("the axes attribute is not supported");
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
  return BuildResize(ctx, plan);
}

Status ResizeShape(ShapeFuncContext& ctx) {
  int scales = ResizeScalesInput(ctx);
  if (scales >= 0) return StoreScaledShape(ctx, scales, {});
  if (!ctx.has_input(3)) return ctx.Error("needs scales or sizes");
  std::vector<Stmt> stores;
  for (int d = 0; d < ctx.input_rank(0); ++d) {
    stores.push_back(Store(ctx.out_shape(0), {I(d)}, Cast(DType::kI64, Load(ctx.in(3), {I(d)}))));
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
  if (attr) return StoreScaledShape(ctx, -1, std::vector<double>(attr->begin(), attr->end()));
  if (!ctx.has_input(1)) return ctx.Error("needs scales");
  return StoreScaledShape(ctx, 1, {});
}

}  // namespace kiln::compiler::nn
