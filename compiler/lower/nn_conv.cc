// Sliding-window lowerings: Conv (implicit GEMM, or direct for few channels per group),
// ConvTranspose (the direct kernel for few channels per group; the GEMM per phase is in
// nn_conv_transpose.cc), MaxPool (with Indices), AveragePool, LpPool and the global pools.
#include <cmath>

#include "compiler/lower/nn_internal.h"
#include "jit/compute.h"

namespace kiln::compiler::nn {

using jit::Cast;
using jit::FloorDiv;
using jit::FloorMod;
using jit::Let;
using jit::Load;
using jit::Select;
using jit::Store;

namespace {

// Outputs per row tile of the direct kernels (the innermost spatial dim, vectorized).
constexpr int64_t kRowTile = 64;

// The constant spatial dims of W (Conv, ConvTranspose), if every one is constant.
// The weights' spatial dims when all are constant (they stand in for kernel_shape).
std::optional<std::vector<int64_t>> KernelFromWeights(const LowerContext& ctx) {
  std::vector<int64_t> k;
  const SymbolicShape& w = ctx.input_shape(1);
  for (size_t d = 2; d < w.size(); ++d) {
    if (!w[d].is_const()) return std::nullopt;
    k.push_back(w[d].const_value());
  }
  return k;
}

std::vector<Expr> Spatial(const std::vector<Expr>& dims) {
  return std::vector<Expr>(dims.begin() + 2, dims.end());
}

// Direct sliding-window kernel of ConvTranspose, whose input position is not affine in the output
// position (divisibility by the stride): parallel over (n, c_out, outer output rows, tiles of the
// last output dim); each tile accumulates kRowTile outputs in a local vector while looping over
// the window and the input channels of its group, the last spatial dim innermost and vectorized
// (taps outside the input masked by a select).
struct DirectWindow {
  Buffer x, w, bias, y;
  int spatial = 0;
  DType acc = DType::kF32;
  Expr cin_per_group;  // input channels per group
  Expr cout_per_group;
  std::vector<int64_t> kernel;
  // The input position of output position `o` with kernel tap `k` along dim d, and whether it is
  // a real input position (ConvTranspose also needs divisibility by the stride).
  std::function<Expr(int d, const Expr& o, const Expr& k)> position;
  std::function<Expr(int d, const Expr& o, const Expr& k)> valid;
  bool transpose = true;  // W is [C_in, C_out/group, k...]
};

Stmt DirectWindowLoops(const DirectWindow& p, const std::vector<Expr>& out_dims,
                       const std::vector<Expr>& in_dims) {
  const int s = p.spatial;
  Expr last = out_dims[s - 1];
  std::vector<Expr> extents = {DimOf(p.y, 0), DimOf(p.y, 1)};
  for (int d = 0; d + 1 < s; ++d) extents.push_back(out_dims[d]);
  extents.push_back(CeilDivE(last, I(kRowTile)));
  return ParallelNest(
      extents,
      [&](const std::vector<Expr>& idx) {
        Expr n = idx[0], co = idx[1];
        Var base("base"), len("len"), g("g"), ci("ci"), l("l"), l2("l2"), l3("l3");
        Buffer acc = Buffer::Local("acc", p.acc, {kRowTile});
        std::vector<Var> taps;
        for (int d = 0; d < s; ++d) taps.emplace_back("k" + std::to_string(d));
        Expr cin = g * p.cin_per_group + ci;
        Expr valid_outer = jit::IntImm(1, DType::kBool);
        std::vector<Expr> x_index = {n, cin}, w_index;
        if (p.transpose) {
          w_index = {cin, FloorMod(co, p.cout_per_group)};
        } else {
          w_index = {co, ci};
        }
        for (int d = 0; d < s; ++d) {
          w_index.push_back(taps[d]);
          if (d + 1 < s) {
            Expr o = idx[2 + d];
            valid_outer = jit::And(valid_outer, p.valid(d, o, taps[d]));
            x_index.push_back(Clamp(p.position(d, o, taps[d]), in_dims[d]));
          }
        }
        Expr o_last = base + l2;
        x_index.push_back(Clamp(p.position(s - 1, o_last, taps[s - 1]), in_dims[s - 1]));
        Expr x = Cast(p.acc, Load(p.x, x_index));
        Expr value = Select(p.valid(s - 1, o_last, taps[s - 1]), x, jit::Const(p.acc, 0));
        Var wv("wv", p.acc);
        Stmt inner = jit::For(l2, len, ForKind::kVectorized,
                              Store(acc, {l2}, jit::MulAdd(value, wv, Load(acc, {l2}))));
        inner = Let(wv, Cast(p.acc, Load(p.w, w_index)), inner);
        inner = jit::If(valid_outer, inner);
        for (int d = s - 1; d >= 0; --d) {
          inner = jit::For(taps[d], I(p.kernel[d]), ForKind::kSerial, inner);
        }
        inner = jit::For(ci, p.cin_per_group, ForKind::kSerial, inner);
        Stmt init = jit::For(l, len, ForKind::kVectorized, Store(acc, {l}, jit::Const(p.acc, 0)));
        std::vector<Expr> y_index = {n, co};
        for (int d = 0; d + 1 < s; ++d) y_index.push_back(idx[2 + d]);
        y_index.push_back(base + l3);
        Expr result = Load(acc, {l3});
        if (p.bias) result = jit::Add(result, Cast(p.acc, Load(p.bias, {co})));
        Stmt write =
            jit::For(l3, len, ForKind::kVectorized, Store(p.y, y_index, Cast(p.y->dtype, result)));
        return Let(base, idx[s + 1] * I(kRowTile),
                   Let(len, jit::Min(I(kRowTile), last - base),
                       Let(g, FloorDiv(co, p.cout_per_group),
                           jit::Allocate(acc, jit::Seq({init, inner, write})))));
      },
      ForKind::kSerial);
}

// Row-tiled sliding window for Conv (few channels per group) and the pools, where every tap's
// input position is affine in the output position: parallel over (n, c, outer output rows,
// tiles of the last output dim); per tap, the outputs whose position is inside the input form
// one range [lo, hi) of the tile, so the innermost loop is a plain vectorized stream with no
// bounds checks (padding contributes nothing).
enum class WindowOp { kConv, kMax, kAverage, kLp };

struct RowWindow {
  WindowOp op = WindowOp::kConv;
  Buffer x, w, bias, y;
  int spatial = 0;
  DType acc = DType::kF32;
  Expr cin_per_group = I(1), cout_per_group = I(1);  // kConv
  WindowAttrs win;
  bool count_include_pad = false;  // kAverage
  double p = 2;                    // kLp
};

Stmt RowWindowLoops(const RowWindow& r, const std::vector<Expr>& out_dims,
                    const std::vector<Expr>& in_dims) {
  const int s = r.spatial;
  const WindowAttrs& win = r.win;
  Expr last = out_dims[s - 1];
  std::vector<Expr> extents = {DimOf(r.y, 0), DimOf(r.y, 1)};
  for (int d = 0; d + 1 < s; ++d) extents.push_back(out_dims[d]);
  extents.push_back(CeilDivE(last, I(kRowTile)));
  auto position = [&](int d, const Expr& o, const Expr& k) {
    return o * I(win.strides[d]) - win.pad_begin[d] + k * I(win.dilations[d]);
  };
  return ParallelNest(
      extents,
      [&](const std::vector<Expr>& idx) {
        Expr n = idx[0], c = idx[1];
        Var base("base"), len("len"), g("g"), ci("ci"), l0("l"), l1("l"), l2("l"), l3("l");
        Buffer acc = Buffer::Local("acc", r.acc, {kRowTile});
        Buffer cnt = Buffer::Local("cnt", r.acc, {kRowTile});
        std::vector<Var> taps;
        for (int d = 0; d < s; ++d) taps.emplace_back("k" + std::to_string(d));
        const bool conv = r.op == WindowOp::kConv, average = r.op == WindowOp::kAverage;
        Expr channel = conv ? g * r.cin_per_group + ci : c;
        Expr inside = jit::IntImm(1, DType::kBool), counted = inside;
        std::vector<Expr> x_index = {n, channel}, w_index = {c, ci};
        for (int d = 0; d < s; ++d) {
          w_index.push_back(taps[d]);
          if (d + 1 == s) break;
          Expr q = position(d, idx[2 + d], taps[d]);
          inside = jit::And(inside, InBounds(q, in_dims[d]));
          counted = jit::And(counted, jit::And(jit::Ge(q, -win.pad_begin[d]),
                                               jit::Lt(q, in_dims[d] + win.pad_end[d])));
          x_index.push_back(q);
        }
        // Outputs base + l with lower <= position < upper: l in [lo, hi).
        const int64_t st = win.strides[s - 1];
        Expr tap_offset = taps[s - 1] * I(win.dilations[s - 1]) - win.pad_begin[s - 1];
        auto range = [&](const Expr& lower, const Expr& upper, const Var& l, const Stmt& body) {
          Expr lo = jit::Min(jit::Max(CeilDivE(lower - tap_offset, I(st)) - base, I(0)), len);
          Expr hi = jit::Min(jit::Max(CeilDivE(upper - tap_offset, I(st)) - base, I(0)), len);
          return jit::For(l, lo, jit::Max(hi - lo, I(0)), ForKind::kVectorized, body);
        };
        x_index.push_back((base + l1) * I(st) + tap_offset);
        Expr x = Cast(r.acc, Load(r.x, x_index));
        Expr a = Load(acc, {l1});
        Expr update;
        Var wv("wv", r.acc);
        switch (r.op) {
          case WindowOp::kConv:
            update = jit::MulAdd(x, wv, a);
            break;
          case WindowOp::kMax:
            update = jit::Max(a, x);
            break;
          case WindowOp::kAverage:
            update = jit::Add(a, x);
            break;
          case WindowOp::kLp:
            update = jit::Add(a, r.p == 1   ? jit::Abs(x)
                                 : r.p == 2 ? jit::Mul(x, x)
                                            : jit::Pow(jit::Abs(x), jit::Const(r.acc, r.p)));
            break;
        }
        std::vector<Stmt> per_tap;
        Stmt accumulate = Store(acc, {l1}, update);
        if (average && !r.count_include_pad) {
          accumulate = jit::Seq(
              {accumulate, Store(cnt, {l1}, jit::Add(Load(cnt, {l1}), jit::Const(r.acc, 1)))});
        }
        Stmt stream = range(I(0), in_dims[s - 1], l1, accumulate);
        if (conv) stream = jit::Let(wv, Cast(r.acc, Load(r.w, w_index)), stream);
        per_tap.push_back(jit::If(inside, stream));
        if (average && r.count_include_pad) {
          per_tap.push_back(jit::If(
              counted, range(-win.pad_begin[s - 1], in_dims[s - 1] + win.pad_end[s - 1], l2,
                             Store(cnt, {l2}, jit::Add(Load(cnt, {l2}), jit::Const(r.acc, 1))))));
        }
        Stmt loops = jit::Seq(per_tap);
        for (int d = s - 1; d >= 0; --d) {
          loops = jit::For(taps[d], I(win.kernel[d]), ForKind::kSerial, loops);
        }
        if (conv) loops = jit::For(ci, r.cin_per_group, ForKind::kSerial, loops);
        Expr identity = r.op == WindowOp::kMax ? Lowest(r.acc) : jit::Const(r.acc, 0);
        std::vector<Stmt> init = {
            jit::For(l0, len, ForKind::kVectorized, Store(acc, {l0}, identity))};
        Var l4("l");
        if (average) {
          init.push_back(
              jit::For(l4, len, ForKind::kVectorized, Store(cnt, {l4}, jit::Const(r.acc, 0))));
        }
        std::vector<Expr> y_index = {n, c};
        for (int d = 0; d + 1 < s; ++d) y_index.push_back(idx[2 + d]);
        y_index.push_back(base + l3);
        Expr result = Load(acc, {l3});
        if (conv && r.bias) result = jit::Add(result, Cast(r.acc, Load(r.bias, {c})));
        if (average) result = jit::Div(result, Load(cnt, {l3}));
        if (r.op == WindowOp::kLp && r.p != 1) {
          result = r.p == 2 ? jit::Sqrt(result) : jit::Pow(result, jit::Const(r.acc, 1.0 / r.p));
        }
        Stmt write =
            jit::For(l3, len, ForKind::kVectorized, Store(r.y, y_index, Cast(r.y->dtype, result)));
        init.push_back(loops);
        init.push_back(write);
        Stmt body = jit::Seq(init);
        body = jit::Allocate(acc, average ? jit::Allocate(cnt, body) : body);
        if (conv) body = Let(g, FloorDiv(c, r.cout_per_group), body);
        return Let(base, idx[s + 1] * I(kRowTile),
                   Let(len, jit::Min(I(kRowTile), last - base), body));
      },
      ForKind::kSerial);
}

// Conv as a GEMM per (image, group): C[co, p] = sum_{ci, taps} W[co, ci, taps] * X[ci, p + taps],
// the im2col panel built in the pack step (never materialized whole).
Status ConvAsGemm(LowerContext& ctx, const WindowAttrs& win, int64_t group) {
  const int s = ctx.input_rank(0) - 2, rank = s + 2;
  Buffer X = ctx.in(0), W = ctx.in(1), Y = ctx.out(0);
  Buffer bias = ctx.has_input(2) ? ctx.in(2) : Buffer();
  DType out_type = ctx.output_dtype(0);
  std::vector<Expr> in_dims = Spatial(ctx.InputDims(0)), out_dims = Spatial(ctx.OutputDims(0));
  Expr cin_g = ctx.InputDim(1, 1), cout_g = FloorDiv(ctx.OutputDim(0, 1), I(group));
  int64_t taps = 1;
  for (int64_t k : win.kernel) taps *= k;
  GemmSpec spec;
  spec.acc = AccType(out_type);
  spec.batch = ctx.OutputDim(0, 0) * I(group);
  spec.m = cout_g;
  spec.n = I(1);
  for (const Expr& d : out_dims) spec.n = spec.n * d;
  spec.k = cin_g * I(taps);
  Var img("img"), grp("grp");
  spec.bind_batch = [=](const Expr& b, Stmt body) {
    return Let(img, FloorDiv(b, I(group)), Let(grp, FloorMod(b, I(group)), std::move(body)));
  };
  spec.a = [=](const Expr&, const Expr& i, const Expr& k) {
    std::vector<Expr> index(rank, I(0));
    index[0] = grp * cout_g + i;
    index[rank - 1] = k;  // W is contiguous: [C_out, K] with K = C_in/group * taps
    return Load(W, index);
  };
  bool pointwise = true;
  for (int d = 0; d < s; ++d) {
    pointwise = pointwise && win.kernel[d] == 1 && win.strides[d] == 1 &&
                ConstOf(win.pad_begin[d]) == 0 && ConstOf(win.pad_end[d]) == 0;
  }
  Expr n_total = spec.n;
  DType acc = spec.acc;
  if (pointwise) {
    // 1x1: the panel is a contiguous slice of X's [C_in, spatial] matrix.
    spec.pack = PackFrom(
        [=](const Expr&, const Expr& k, const Expr& j) {
          std::vector<Expr> index(rank, I(0));
          index[0] = img;
          index[1] = grp * cin_g + k;
          index[rank - 1] = j;
          return Load(X, index);
        },
        n_total, false, acc);
  } else {
    std::vector<int64_t> kernel = win.kernel, strides = win.strides, dil = win.dilations;
    std::vector<Expr> pad = win.pad_begin;
    spec.pack = [=](const PackArgs& p) {
      // Column coordinates (output position * stride - pad) once per panel; taps per k.
      Buffer coords = Buffer::Local("coords", DType::kI64, {s, p.cols});
      Var jj("jj"), kk("kk"), jj2("jj");
      std::vector<Stmt> setup;
      Expr rest = jit::Min(p.j0 + jj, n_total - I(1));
      std::vector<Expr> o(s);
      for (int d = s - 1; d >= 0; --d) {
        o[d] = d == 0 ? rest : FloorMod(rest, out_dims[d]);
        rest = FloorDiv(rest, out_dims[d]);
      }
      for (int d = 0; d < s; ++d) {
        setup.push_back(Store(coords, {I(d), jj}, o[d] * I(strides[d]) - pad[d]));
      }
      Stmt fill = jit::For(jj, I(p.cols), ForKind::kVectorized, jit::Seq(setup));
      // k -> (channel, tap_0, ..., tap_{s-1}), the last tap fastest.
      Var kg("kg");
      std::vector<Var> tap_vars;
      std::vector<std::pair<Var, Expr>> lets;
      Expr krest = kg;
      for (int d = s - 1; d >= 0; --d) {
        tap_vars.insert(tap_vars.begin(), Var("t" + std::to_string(d)));
        lets.push_back({tap_vars.front(), FloorMod(krest, I(kernel[d])) * I(dil[d])});
        krest = FloorDiv(krest, I(kernel[d]));
      }
      Var ci("ci");
      lets.push_back({ci, krest});
      Expr inside = jit::Lt(p.j0 + jj2, n_total);
      std::vector<Expr> x_index = {img, grp * cin_g + ci};
      for (int d = 0; d < s; ++d) {
        Expr pos = Load(coords, {I(d), jj2}) + tap_vars[d];
        inside = jit::And(inside, InBounds(pos, in_dims[d]));
        x_index.push_back(Clamp(pos, in_dims[d]));
      }
      Stmt col = jit::For(jj2, I(p.cols), ForKind::kVectorized,
                          Store(p.pack, {kk, jj2},
                                Select(inside, Cast(acc, Load(X, x_index)), jit::Const(acc, 0))));
      for (auto it = lets.begin(); it != lets.end(); ++it) col = Let(it->first, it->second, col);
      col = Let(kg, p.k0 + kk, col);
      return jit::Allocate(coords, jit::Seq({fill, jit::For(kk, p.klen, ForKind::kSerial, col)}));
    };
  }
  spec.store = [=](const Expr&, const Expr& i, const Expr& j, const Expr& v) {
    Expr co = grp * cout_g + i;
    Expr value = bias ? jit::Add(v, Cast(acc, Load(bias, {co}))) : v;
    std::vector<Expr> index(rank, I(0));
    index[0] = img;
    index[1] = co;
    index[rank - 1] = j;  // flat spatial position
    return Store(Y, index, Cast(out_type, value));
  };
  ChooseTile(spec, ConstOf(spec.m), ConstOf(spec.n));
  ctx.SetBody(GemmLoops(spec));
  return Status::Ok();
}

}  // namespace

Status LowerConv(LowerContext& ctx) {
  const int s = ctx.input_rank(0) - 2;
  ASSIGN_OR_RETURN(ConvAttributes conv, ParseConvAttributes(ctx.node(), s, KernelFromWeights(ctx)));
  const int64_t group = conv.group;
  std::vector<Expr> in_dims = Spatial(ctx.InputDims(0)), out_dims = Spatial(ctx.OutputDims(0));
  WindowAttrs win = ResolvePads(conv, in_dims, out_dims);
  std::optional<int64_t> cout = ConstOf(ctx.OutputDim(0, 1));
  // Few output channels per group (depthwise) waste most of a GEMM tile: go direct.
  if (!cout || *cout / group >= 4) return ConvAsGemm(ctx, win, group);
  RowWindow r;
  r.op = WindowOp::kConv;
  r.x = ctx.in(0);
  r.w = ctx.in(1);
  if (ctx.has_input(2)) r.bias = ctx.in(2);
  r.y = ctx.out(0);
  r.spatial = s;
  r.acc = AccType(ctx.output_dtype(0));
  r.cin_per_group = ctx.InputDim(1, 1);
  r.cout_per_group = I(*cout / group);
  r.win = win;
  ctx.SetBody(RowWindowLoops(r, out_dims, in_dims));
  return Status::Ok();
}

// Input channels per group from which a ConvTranspose with fewer than 4 output channels per
// group runs as a GEMM: its K (input channels x landing taps) then fills the 1-3 row tiles' FMA
// chains, where the direct loops would spend a division per tap.
constexpr int64_t kGemmMinInputChannels = 16;

Status LowerConvTranspose(LowerContext& ctx) {
  const int s = ctx.input_rank(0) - 2;
  ASSIGN_OR_RETURN(ConvAttributes conv, ParseConvAttributes(ctx.node(), s, KernelFromWeights(ctx)));
  const int64_t group = conv.group;
  std::vector<Expr> in_dims = Spatial(ctx.InputDims(0)), out_dims = Spatial(ctx.OutputDims(0));
  WindowAttrs win = ResolvePads(conv, in_dims, in_dims);
  const bool explicit_shape = !conv.output_shape.empty();
  for (int d = 0; d < s; ++d) {
    if (!explicit_shape && !win.same()) continue;  // pad_begin: the pads attribute, or 0 (VALID)
    // The output size is fixed: the pads follow, split as the ONNX spec does with floor division
    // (a negative total, from an output_shape past the natural size, extends the end).
    Expr total = I(win.strides[d]) * (in_dims[d] - I(1)) + I(conv.output_padding[d]) +
                 I(win.extent(d)) - out_dims[d];
    win.pad_begin[d] =
        win.auto_pad == AutoPad::kSameUpper ? FloorDiv(total, I(2)) : total - FloorDiv(total, I(2));
  }
  // Few output channels per group (depthwise) waste most of a GEMM tile: go direct, unless
  // many input channels feed each one. The direct loops test every tap of every input channel
  // for every output (a stride-s tap lands on 1 output in s): Conv-TasNet's decoder (128 -> 1
  // channels, kernel 16, stride 8, 2000 -> 16000) ran 30x slower there than in a 1-row GEMM.
  std::optional<int64_t> cout_g = ConstOf(ctx.InputDim(1, 1));
  std::optional<int64_t> cin = ConstOf(ctx.InputDim(0, 1));
  const bool wide_input = cin && *cin / group >= kGemmMinInputChannels;
  if (!cout_g || *cout_g >= 4 || wide_input) {
    bool upsample = !explicit_shape && !win.same();
    for (int d = 0; d < s; ++d) {
      upsample = upsample && win.kernel[d] == win.strides[d] && win.dilations[d] == 1 &&
                 conv.output_padding[d] == 0 && ConstOf(win.pad_begin[d]) == 0 &&
                 ConstOf(win.pad_end[d]) == 0;
    }
    return LowerConvTransposeGemm(ctx, win, group, upsample);
  }
  DirectWindow p;
  p.x = ctx.in(0);
  p.w = ctx.in(1);
  if (ctx.has_input(2)) p.bias = ctx.in(2);
  p.y = ctx.out(0);
  p.spatial = s;
  p.acc = AccType(ctx.output_dtype(0));
  p.cin_per_group = FloorDiv(ctx.InputDim(0, 1), I(group));
  p.cout_per_group = ctx.InputDim(1, 1);
  p.kernel = win.kernel;
  p.transpose = true;
  // Output o receives input i when o = i * stride - pad + k * dilation.
  auto numerator = [&](int d, const Expr& o, const Expr& k) {
    return o + win.pad_begin[d] - k * I(win.dilations[d]);
  };
  p.position = [&](int d, const Expr& o, const Expr& k) {
    return FloorDiv(numerator(d, o, k), I(win.strides[d]));
  };
  p.valid = [&](int d, const Expr& o, const Expr& k) {
    Expr q = numerator(d, o, k);
    Expr ok = InBounds(FloorDiv(q, I(win.strides[d])), in_dims[d]);
    if (win.strides[d] == 1) return ok;
    return jit::And(ok, jit::Eq(FloorMod(q, I(win.strides[d])), I(0)));
  };
  ctx.SetBody(DirectWindowLoops(p, out_dims, in_dims));
  return Status::Ok();
}

// ---- Pooling ---------------------------------------------------------------------------------

namespace {

enum class PoolKind { kMax, kAverage, kLp };

Status LowerPool(LowerContext& ctx, PoolKind kind) {
  const int s = ctx.input_rank(0) - 2;
  if (s < 1) return ctx.Error("X must have rank >= 3");
  std::vector<Expr> in_dims = Spatial(ctx.InputDims(0)), out_dims = Spatial(ctx.OutputDims(0));
  ASSIGN_OR_RETURN(PoolAttributes pool, ParsePoolAttributes(ctx.node(), s));
  WindowAttrs win = ResolvePads(pool, in_dims, out_dims);
  const bool count_include_pad = pool.count_include_pad;
  const int64_t storage_order = pool.storage_order;
  double p = static_cast<double>(pool.p);
  Buffer X = ctx.in(0), Y = ctx.out(0);
  DType dtype = ctx.input_dtype(0), acc = AccType(dtype);
  bool indices = kind == PoolKind::kMax && ctx.has_output(1);
  if (!indices) {
    RowWindow r;
    r.op = kind == PoolKind::kMax       ? WindowOp::kMax
           : kind == PoolKind::kAverage ? WindowOp::kAverage
                                        : WindowOp::kLp;
    r.x = X;
    r.y = Y;
    r.spatial = s;
    r.acc = acc;
    r.win = win;
    r.count_include_pad = count_include_pad;
    r.p = p;
    ctx.SetBody(RowWindowLoops(r, out_dims, in_dims));
    return Status::Ok();
  }
  ctx.SetBody(ParallelNest(ctx.OutputDims(0), [&](const std::vector<Expr>& idx) {
    std::vector<jit::IterVar> window;
    std::vector<Expr> src = {idx[0], idx[1]}, pos;
    Expr inside = jit::IntImm(1, DType::kBool), counted = inside;
    for (int d = 0; d < s; ++d) {
      Var k("k" + std::to_string(d));
      window.push_back({k, I(win.kernel[d])});
      Expr q = idx[2 + d] * I(win.strides[d]) - win.pad_begin[d] + k * I(win.dilations[d]);
      pos.push_back(q);
      inside = jit::And(inside, InBounds(q, in_dims[d]));
      counted = jit::And(counted, jit::And(jit::Ge(q, -win.pad_begin[d]),
                                           jit::Lt(q, in_dims[d] + win.pad_end[d])));
      src.push_back(Clamp(q, in_dims[d]));
    }
    Expr x = Cast(acc, Load(X, src));
    std::vector<Stmt> stores;
    if (kind == PoolKind::kMax) {
      Expr v = Select(inside, x, Lowest(acc));
      stores.push_back(Store(Y, idx, Cast(dtype, jit::ReduceMax(window, v))));
      if (indices) {
        // The window position of the first maximum -> the input element's flat index.
        Var arg("arg");
        Expr rest = arg;
        std::vector<Expr> q(s);
        for (int d = s - 1; d >= 0; --d) {
          Expr k = FloorMod(rest, I(win.kernel[d]));
          rest = FloorDiv(rest, I(win.kernel[d]));
          q[d] = idx[2 + d] * I(win.strides[d]) - win.pad_begin[d] + k * I(win.dilations[d]);
        }
        Expr flat = idx[0] * DimOf(X, 1) + idx[1];
        Expr spatial_flat = I(0);
        if (storage_order) {
          for (int d = s - 1; d >= 0; --d) spatial_flat = spatial_flat * in_dims[d] + q[d];
        } else {
          for (int d = 0; d < s; ++d) spatial_flat = spatial_flat * in_dims[d] + q[d];
        }
        Expr spatial_size = I(1);
        for (int d = 0; d < s; ++d) spatial_size = spatial_size * in_dims[d];
        stores.push_back(Let(arg, jit::Reduce(jit::ReduceOp::kArgMax, window, v),
                             Store(ctx.out(1), idx, flat * spatial_size + spatial_flat)));
      }
    } else if (kind == PoolKind::kAverage) {
      Expr sum = jit::Sum(window, Select(inside, x, jit::Const(acc, 0)));
      Expr n = jit::Sum(window, Select(count_include_pad ? counted : inside, jit::Const(acc, 1),
                                       jit::Const(acc, 0)));
      stores.push_back(Store(Y, idx, Cast(dtype, jit::Div(sum, n))));
    } else {
      Expr term = p == 1   ? jit::Abs(x)
                  : p == 2 ? jit::Mul(x, x)
                           : jit::Pow(jit::Abs(x), jit::Const(acc, p));
      Expr sum = jit::Sum(window, Select(inside, term, jit::Const(acc, 0)));
      Expr r = p == 1 ? sum : p == 2 ? jit::Sqrt(sum) : jit::Pow(sum, jit::Const(acc, 1.0 / p));
      stores.push_back(Store(Y, idx, Cast(dtype, r)));
    }
    return jit::Seq(stores);
  }));
  return Status::Ok();
}

}  // namespace

Status LowerMaxPool(LowerContext& ctx) { return LowerPool(ctx, PoolKind::kMax); }
Status LowerAveragePool(LowerContext& ctx) { return LowerPool(ctx, PoolKind::kAverage); }
Status LowerLpPool(LowerContext& ctx) { return LowerPool(ctx, PoolKind::kLp); }

// Global pools: one reduction over every spatial position per (n, c).
Status LowerGlobalPool(LowerContext& ctx) {
  const std::string& op = ctx.node().op_type;
  const int rank = ctx.input_rank(0);
  if (rank < 3) return ctx.Error("X must have rank >= 3");
  ASSIGN_OR_RETURN(int64_t p_int, ctx.GetInt("p", 2));
  double p = static_cast<double>(p_int);
  Buffer X = ctx.in(0), Y = ctx.out(0);
  DType dtype = ctx.input_dtype(0), acc = AccType(dtype);
  ctx.SetBody(ParallelNest(
      {ctx.InputDim(0, 0), ctx.InputDim(0, 1)},
      [&](const std::vector<Expr>& idx) {
        std::vector<jit::IterVar> axes;
        std::vector<Expr> src = {idx[0], idx[1]}, dst = {idx[0], idx[1]};
        Expr count = I(1);
        for (int d = 2; d < rank; ++d) {
          Var v("r" + std::to_string(d));
          axes.push_back({v, ctx.InputDim(0, d)});
          src.push_back(v);
          dst.push_back(I(0));
          count = count * ctx.InputDim(0, d);
        }
        Expr x = Cast(acc, Load(X, src));
        Expr r;
        if (op == "GlobalMaxPool") {
          r = jit::ReduceMax(axes, x);
        } else if (op == "GlobalAveragePool") {
          r = jit::Div(jit::Sum(axes, x), Cast(acc, count));
        } else {
          Expr term = p == 1   ? jit::Abs(x)
                      : p == 2 ? jit::Mul(x, x)
                               : jit::Pow(jit::Abs(x), jit::Const(acc, p));
          Expr sum = jit::Sum(axes, term);
          r = p == 1 ? sum : p == 2 ? jit::Sqrt(sum) : jit::Pow(sum, jit::Const(acc, 1.0 / p));
        }
        return Store(Y, dst, Cast(dtype, r));
      },
      ForKind::kSerial));
  return Status::Ok();
}

}  // namespace kiln::compiler::nn
