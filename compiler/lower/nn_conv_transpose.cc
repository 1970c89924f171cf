// ConvTranspose as a GEMM per output phase. Along a dim of stride s, the outputs o with one
// residue p = o mod s receive a fixed subset of the kernel taps (those t with
// (o + pad - t * dilation) divisible by s), and for them the input index is affine in o / s.
// So each phase is an ordinary convolution with a strided slice of the weights: the GEMM
// multiplies only by taps that land (a zero-inserted input would waste s^d of the work).
#include <numeric>
#include <optional>

#include "compiler/lower/nn_internal.h"

namespace kiln::compiler::nn {

namespace {

// How one spatial dim's taps split over its stride's phases.
struct PhaseDim {
  int64_t stride = 1, dilation = 1, kernel = 1;
  int64_t step = 1;  // stride / gcd(dilation, stride): taps landing in one phase lie this far apart
  int64_t taps = 1;  // ceil(kernel / step): the most taps one phase receives
  int64_t shift = 1;  // dilation / gcd(dilation, stride): input positions back per such tap
};

PhaseDim MakePhaseDim(int64_t stride, int64_t dilation, int64_t kernel) {
  PhaseDim p;
  p.stride = stride;
  p.dilation = dilation;
  p.kernel = kernel;
  int64_t g = std::gcd(dilation, stride);
  p.step = stride / g;
  p.taps = (kernel + p.step - 1) / p.step;
  p.shift = dilation / g;
  return p;
}

// The first tap of phase `p` (residue of the output position): the smallest t < step with
// t * dilation = p + pad (mod stride), or `kernel` (no tap lands) when there is none.
Expr FirstTap(const PhaseDim& d, const Expr& p, const Expr& pad) {
  Expr residue = jit::FloorMod(p + pad, I(d.stride));
  Expr first = I(d.kernel);
  for (int64_t t = d.step - 1; t >= 0; --t) {
    Expr lands = jit::Eq(jit::FloorMod(I(t * d.dilation) - residue, I(d.stride)), I(0));
    first = jit::Select(lands, I(t), first);
  }
  return first;
}

// kernel = stride, no pads: output position o * stride + t along each dim is input o times tap
// t, so one GEMM per input row serves every phase. Its rows are (output channel, phase) with the
// phase fastest, which is the weights' own layout ([Cin, Cout/g, k...] read per input channel:
// A(i, k) is W[k][i] flattened), and its columns are the input row's positions, packed as a
// plain copy. Against a GEMM per phase this packs each input row once instead of once per
// phase, and the tiles are `phases` times taller for the same N. The sums are the per-phase
// GEMM's (one tap per phase: k runs over the input channels in the same order and chunks).
Status LowerConvTransposeUpsample(LowerContext& ctx, const WindowAttrs& win, int64_t group) {
  const int s = ctx.input_rank(0) - 2;
  Buffer X = ctx.in(0), W = ctx.in(1), Y = ctx.out(0);
  Buffer bias = ctx.has_input(2) ? ctx.in(2) : Buffer();
  DType out_type = ctx.output_dtype(0), acc = AccType(out_type);
  std::vector<Expr> in_dims;
  int64_t phases = 1;
  for (int d = 0; d < s; ++d) {
    in_dims.push_back(ctx.InputDim(0, 2 + d));
    phases *= win.strides[d];
  }
  Expr cin_g = jit::FloorDiv(ctx.InputDim(0, 1), I(group)), cout_g = ctx.InputDim(1, 1);
  Expr rows = I(1);
  for (int d = 0; d + 1 < s; ++d) rows = rows * in_dims[d];
  GemmSpec spec;
  spec.acc = acc;
  spec.batch = ctx.OutputDim(0, 0) * I(group) * rows;
  spec.m = cout_g * I(phases);
  spec.n = in_dims[s - 1];
  spec.k = cin_g;
  // Per task: image, group and the input row (all spatial dims but the last).
  Var img("img"), grp("grp");
  std::vector<Var> row;
  for (int d = 0; d + 1 < s; ++d) row.emplace_back("r" + std::to_string(d));
  spec.bind_batch = [=](const Expr& b, Stmt body) {
    std::vector<std::pair<Var, Expr>> lets;
    Expr rest = b;
    for (int d = s - 2; d >= 0; --d) {
      lets.push_back({row[d], jit::FloorMod(rest, in_dims[d])});
      rest = jit::FloorDiv(rest, in_dims[d]);
    }
    lets.push_back({grp, jit::FloorMod(rest, I(group))});
    lets.push_back({img, jit::FloorDiv(rest, I(group))});
    for (auto it = lets.rbegin(); it != lets.rend(); ++it)
      body = jit::Let(it->first, it->second, body);
    return body;
  };
  spec.a = [=](const Expr&, const Expr& i, const Expr& k) {
    // W[ci] flattened over (output channel, taps): a leading index past its size addresses the
    // contiguous tensor, as the matrix products' loads do.
    std::vector<Expr> index(2 + s, I(0));
    index[0] = grp * cin_g + k;
    index.back() = i;
    return jit::Cast(acc, jit::Load(W, index));
  };
  spec.pack = PackFrom(
      [=](const Expr&, const Expr& k, const Expr& j) {
        std::vector<Expr> index = {img, grp * cin_g + k};
        for (int d = 0; d + 1 < s; ++d) index.push_back(row[d]);
        index.push_back(j);
        return jit::Load(X, index);
      },
      spec.n, false, acc);
  spec.store = [=](const Expr&, const Expr& i, const Expr& j, const Expr& v) {
    Expr co = grp * cout_g + jit::FloorDiv(i, I(phases));
    std::vector<Expr> index(2 + s);
    index[0] = img;
    index[1] = co;
    Expr phase = jit::FloorMod(i, I(phases));
    for (int d = s - 1; d >= 0; --d) {
      Expr t = jit::FloorMod(phase, I(win.strides[d]));
      phase = jit::FloorDiv(phase, I(win.strides[d]));
      Expr at = d + 1 == s ? j : Expr(row[d]);
      index[2 + d] = at * I(win.strides[d]) + t;
    }
    Expr value = bias ? jit::Add(v, jit::Cast(acc, jit::Load(bias, {co}))) : v;
    return jit::Store(Y, index, jit::Cast(out_type, value));
  };
  ChooseTile(spec, ConstOf(spec.m), ConstOf(spec.n));
  ctx.SetBody(GemmLoops(spec));
  return Status::Ok();
}

}  // namespace

// The GEMM's batch runs over (image, group, phase, output rows of the phase's grid but the
// last dim); per batch C[co, j] = sum_{ci, phase taps} W[ci, co, taps] * X[ci, rows, base + j
// - u * shift], stored at output position p + stride * j (the last dim), masked past the end.
// When the grid's rows are short (under kFlatBelow positions; the kernel checks at run time
// unless the length is a constant), the
// batch runs over (image, group, phase) only and j over the phase's whole grid, row-major: a
// GEMM per row of 4 or 8 columns filled a quarter or half of each 16-column tile and packed a
// panel per row (DCGAN's 4x4 -> 8x8 layer of 512 -> 256 channels ran at 3 GMAC/s).
constexpr int64_t kFlatBelow = 32;

Status LowerConvTransposeGemm(LowerContext& ctx, const WindowAttrs& win, int64_t group,
                              bool upsample) {
  if (upsample) return LowerConvTransposeUpsample(ctx, win, group);
  const int s = ctx.input_rank(0) - 2;
  Buffer X = ctx.in(0), W = ctx.in(1), Y = ctx.out(0);
  Buffer bias = ctx.has_input(2) ? ctx.in(2) : Buffer();
  DType out_type = ctx.output_dtype(0), acc = AccType(out_type);
  std::vector<Expr> in_dims, out_dims, grid;  // grid: outputs per phase (rounded up)
  std::vector<PhaseDim> dims;
  int64_t phases = 1, taps = 1;
  for (int d = 0; d < s; ++d) {
    in_dims.push_back(ctx.InputDim(0, 2 + d));
    out_dims.push_back(ctx.OutputDim(0, 2 + d));
    dims.push_back(MakePhaseDim(win.strides[d], win.dilations[d], win.kernel[d]));
    grid.push_back(CeilDivE(out_dims[d], I(win.strides[d])));
    phases *= dims[d].stride;
    taps *= dims[d].taps;
  }
  Expr cin_g = jit::FloorDiv(ctx.InputDim(0, 1), I(group)), cout_g = ctx.InputDim(1, 1);
  // The kernel's loops, with the grid flattened or per row.
  auto loops = [&](bool flat) -> Stmt {
    Expr rows = I(1);
    for (int d = 0; d + 1 < s; ++d) rows = rows * grid[d];
    GemmSpec spec;
    spec.acc = acc;
    spec.batch = ctx.OutputDim(0, 0) * I(group * phases) * (flat ? I(1) : rows);
    spec.m = cout_g;
    spec.n = flat ? rows * grid[s - 1] : grid[s - 1];
    spec.k = cin_g * I(taps);
    // Column j's position in the phase's grid along dim d (flat: every dim; else the last, the
    // others bound per task).
    auto grid_pos = [=](const Expr& j, int d) -> Expr {
      if (!flat) return j;
      Expr rest = j;
      for (int e = s - 1; e > d; --e) rest = jit::FloorDiv(rest, grid[e]);
      return d == 0 ? rest : jit::FloorMod(rest, grid[d]);
    };

    // Per task: image, group, and per dim the phase p, its first tap t0, the input index of
    // grid position 0 with tap t0 (base) and, but for the last dim, the output position o.
    Var img("img"), grp("grp");
    std::vector<Var> phase, first, base, pos;
    for (int d = 0; d < s; ++d) {
      std::string n = std::to_string(d);
      phase.emplace_back("p" + n);
      first.emplace_back("t0_" + n);
      base.emplace_back("base" + n);
      pos.emplace_back("o" + n);
    }
    spec.bind_batch = [=](const Expr& b, Stmt body) {
      std::vector<std::pair<Var, Expr>> lets;
      Expr rest = b;
      std::vector<Expr> row(s);
      for (int d = s - 2; d >= 0 && !flat; --d) {
        row[d] = jit::FloorMod(rest, grid[d]);
        rest = jit::FloorDiv(rest, grid[d]);
      }
      for (int d = s - 1; d >= 0; --d) {
        lets.push_back({phase[d], jit::FloorMod(rest, I(dims[d].stride))});
        rest = jit::FloorDiv(rest, I(dims[d].stride));
      }
      lets.push_back({grp, jit::FloorMod(rest, I(group))});
      lets.push_back({img, jit::FloorDiv(rest, I(group))});
      for (int d = 0; d < s; ++d) {
        lets.push_back({first[d], FirstTap(dims[d], phase[d], win.pad_begin[d])});
        Expr at = jit::FloorDiv(phase[d] + win.pad_begin[d] - first[d] * I(dims[d].dilation),
                                I(dims[d].stride));
        if (d + 1 < s && !flat) {
          lets.push_back({pos[d], phase[d] + I(dims[d].stride) * row[d]});
          at = at + row[d];
        }
        lets.push_back({base[d], at});
      }
      for (auto it = lets.rbegin(); it != lets.rend(); ++it)
        body = jit::Let(it->first, it->second, body);
      return body;
    };
    // k -> (input channel, phase tap u per dim, the last fastest); tap t = t0 + u * step lands
    // when t < kernel (t0 = kernel when none does).
    auto split_k = [=](const Expr& k, std::vector<Expr>* u, std::vector<Expr>* t, Expr* ok) {
      Expr rest = jit::FloorMod(k, I(taps));
      u->assign(s, I(0));
      t->assign(s, I(0));
      *ok = jit::IntImm(1, DType::kBool);
      for (int d = s - 1; d >= 0; --d) {
        (*u)[d] = jit::FloorMod(rest, I(dims[d].taps));
        rest = jit::FloorDiv(rest, I(dims[d].taps));
        (*t)[d] = first[d] + (*u)[d] * I(dims[d].step);
        *ok = jit::And(*ok, jit::Lt((*t)[d], I(dims[d].kernel)));
      }
      return jit::FloorDiv(k, I(taps));
    };
    spec.a = [=](const Expr&, const Expr& i, const Expr& k) {
      std::vector<Expr> u, t;
      Expr ok;
      Expr ci = split_k(k, &u, &t, &ok);
      std::vector<Expr> index = {grp * cin_g + ci, i};
      for (int d = 0; d < s; ++d) index.push_back(jit::Min(t[d], I(dims[d].kernel - 1)));
      return jit::Select(ok, jit::Cast(acc, jit::Load(W, index)), jit::Const(acc, 0));
    };
    spec.pack = PackFrom(
        [=](const Expr&, const Expr& k, const Expr& j) {
          std::vector<Expr> u, t;
          Expr ok;
          Expr ci = split_k(k, &u, &t, &ok);
          std::vector<Expr> index = {img, grp * cin_g + ci};
          for (int d = 0; d < s; ++d) {
            Expr q =
                base[d] - u[d] * I(dims[d].shift) + (d + 1 == s || flat ? grid_pos(j, d) : I(0));
            ok = jit::And(ok, InBounds(q, in_dims[d]));
            index.push_back(Clamp(q, in_dims[d]));
          }
          return jit::Select(ok, jit::Cast(acc, jit::Load(X, index)), jit::Const(acc, 0));
        },
        spec.n, false, acc);
    spec.store = [=](const Expr&, const Expr& i, const Expr& j, const Expr& v) {
      Expr co = grp * cout_g + i;
      Expr last = phase[s - 1] + I(dims[s - 1].stride) * grid_pos(j, s - 1);
      Expr inside = jit::Lt(last, out_dims[s - 1]);
      std::vector<Expr> index = {img, co};
      for (int d = 0; d + 1 < s; ++d) {
        Expr o = flat ? phase[d] + I(dims[d].stride) * grid_pos(j, d) : Expr(pos[d]);
        inside = jit::And(inside, jit::Lt(o, out_dims[d]));
        index.push_back(o);
      }
      index.push_back(last);
      Expr value = bias ? jit::Add(v, jit::Cast(acc, jit::Load(bias, {co}))) : v;
      return jit::If(inside, jit::Store(Y, index, jit::Cast(out_type, value)));
    };
    ChooseTile(spec, ConstOf(spec.m), ConstOf(spec.n));
    return GemmLoops(spec);
  };
  // Shapes are known at run time only (the kernel serves every shape): both loop nests, chosen
  // by the grid's row length, unless it is a constant or there is a single spatial dim.
  std::optional<int64_t> last = ConstOf(grid[s - 1]);
  if (s == 1 || last) {
    ctx.SetBody(loops(s > 1 && *last < kFlatBelow));
  } else {
    ctx.SetBody(jit::If(jit::Lt(grid[s - 1], I(kFlatBelow)), loops(true), loops(false)));
  }
  return Status::Ok();
}

}  // namespace kiln::compiler::nn
