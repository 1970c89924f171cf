// kiln::RecurrentSequence: every step of an LSTM / GRU / RNN layer in one kernel. A step of an
// expanded Loop ran ~10 kernels and ~60 VM instructions around a product of a few microseconds;
// here the VM calls one kernel per layer, both directions included.
#include "compiler/lower/nn_internal.h"

namespace kiln::compiler::nn {

using jit::Cast;
using jit::FloorDiv;
using jit::FloorMod;
using jit::Let;
using jit::Load;
using jit::Store;

namespace {

enum class Cell { kLstm = 0, kGru = 1, kRnn = 2 };

// What the step builders read: the node's buffers, sizes and attributes.
struct Layer {
  Cell cell = Cell::kLstm;
  int64_t hidden = 0, gates = 1, panels = 0, width = 0;
  int64_t dirs = 1;
  bool reverse_only = false;
  bool has_clip = false;
  float clip = 0;
  DType acc = DType::kF32, out = DType::kF32;
  Buffer xw, rp, h0, c0, rbh, y, yh, yc;
  Expr seq, batch;
};

// Clip (ONNX: applied to every gate's pre-activation) of an accumulator-typed value.
Expr Clipped(const Layer& L, Expr x) {
  if (!L.has_clip) return x;
  return jit::Max(jit::Min(x, jit::Const(L.acc, L.clip)), jit::Const(L.acc, -L.clip));
}

// The gates and state update of units j0 .. j0 + lanes - 1 of row b at step t, from the
// recurrent products in acc [gates, width] (lane l is unit j0 + l). Writes Y[t, d, b, j] and
// (LSTM) Y_c in place; Y_h (the previous h) is only read.
Stmt Epilogue(const Layer& L, const Buffer& acc, const Expr& d, const Expr& b, const Expr& t,
              const Expr& j0, int64_t lanes) {
  Var l("l"), j("j");
  auto pre = [&](int64_t g) {
    Expr x = Cast(L.acc, Load(L.xw, {t, b, (d * I(L.gates) + I(g)) * I(L.hidden) + j}));
    return jit::Add(Load(acc, {I(g), l}), x);
  };
  auto store_y = [&](Expr h) { return Store(L.y, {t, d, b, j}, Cast(L.out, h)); };
  Expr prev = Cast(L.acc, Load(L.yh, {d, b, j}));
  Stmt body;
  if (L.cell == Cell::kLstm) {  // gate order i, o, f, c
    Var c("c", L.acc);
    Expr i = jit::Sigmoid(Clipped(L, pre(0))), o = jit::Sigmoid(Clipped(L, pre(1)));
    Expr f = jit::Sigmoid(Clipped(L, pre(2))), cand = jit::Tanh(Clipped(L, pre(3)));
    Expr c_old = Cast(L.acc, Load(L.yc, {d, b, j}));
    body = Let(c, jit::Add(jit::Mul(f, c_old), jit::Mul(i, cand)),
               jit::Seq({Store(L.yc, {d, b, j}, Cast(L.out, c)),
                         store_y(jit::Mul(o, jit::Tanh(c)))}));
  } else if (L.cell == Cell::kGru) {  // z, r, h; linear_before_reset: r * (h R_h^T + Rb_h)
    Expr z = jit::Sigmoid(Clipped(L, pre(0))), r = jit::Sigmoid(Clipped(L, pre(1)));
    Expr rec = Load(acc, {I(2), l});
    if (L.rbh) rec = jit::Add(rec, Cast(L.acc, Load(L.rbh, {d, j})));
    Expr x = Cast(L.acc, Load(L.xw, {t, b, (d * I(3) + I(2)) * I(L.hidden) + j}));
    Var cand("cand", L.acc);
    body = Let(cand, jit::Tanh(Clipped(L, jit::Add(x, jit::Mul(r, rec)))),
               store_y(jit::Add(cand, jit::Mul(z, jit::Sub(prev, cand)))));
  } else {
    body = store_y(jit::Tanh(Clipped(L, pre(0))));
  }
  return jit::For(l, I(lanes), ForKind::kVectorized, Let(j, j0 + l, body));
}

// One panel of `width` units starting at unit p * width, `lanes` of them real: the recurrent
// products of all gates for row b accumulated over h (previous state Y_h[d, b, :]) against the
// panel's packed weights, gates x width accumulators kept in registers, then the epilogue.
Stmt Panel(const Layer& L, const Expr& d, const Expr& b, const Expr& t, const Expr& p,
           int64_t lanes) {
  Buffer acc = Buffer::Local("acc", L.acc, {L.gates, L.width});
  Var g0("g"), l0("l"), k("k"), g("g"), l("l"), a("a", L.acc);
  Stmt zero = jit::For(g0, I(L.gates), ForKind::kUnrolled,
                       jit::For(l0, I(L.width), ForKind::kVectorized,
                                Store(acc, {g0, l0}, jit::Const(L.acc, 0))));
  Expr w = Cast(L.acc, Load(L.rp, {d, p, k, g, l}));
  Stmt accumulate = jit::For(
      k, I(L.hidden), ForKind::kSerial,
      Let(a, Cast(L.acc, Load(L.yh, {d, b, k})),
          jit::For(g, I(L.gates), ForKind::kUnrolled,
                   jit::For(l, I(L.width), ForKind::kVectorized,
                            Store(acc, {g, l}, jit::MulAdd(a, w, Load(acc, {g, l})))))));
  return jit::Allocate(acc, jit::Seq({zero, accumulate,
                                      Epilogue(L, acc, d, b, t, p * I(L.width), lanes)}));
}

// Row b of direction d, every step: the state starts as H0 / C0 (zeros when absent); each step
// writes Y[t] panel by panel from Y_h, then copies Y[t] into Y_h for the next step (the panels
// read all of the previous h, so it cannot be overwritten while they run).
Stmt Sequence(const Layer& L, const Expr& d, const Expr& b) {
  Var s("s"), t("t"), p("p");
  auto init = [&](const Buffer& dst, const Buffer& src) {
    Var j("j");
    Expr v = src ? Load(src, {d, b, j}) : jit::Const(L.out, 0);
    return jit::For(j, I(L.hidden), ForKind::kVectorized, Store(dst, {d, b, j}, v));
  };
  std::vector<Stmt> start = {init(L.yh, L.h0)};
  if (L.cell == Cell::kLstm) start.push_back(init(L.yc, L.c0));
  const int64_t full = L.hidden / L.width, tail = L.hidden - full * L.width;
  std::vector<Stmt> step = {jit::For(p, I(full), ForKind::kSerial, Panel(L, d, b, t, p, L.width))};
  if (tail > 0) step.push_back(Panel(L, d, b, t, I(full), tail));
  Var j2("j");
  step.push_back(jit::For(j2, I(L.hidden), ForKind::kVectorized,
                          Store(L.yh, {d, b, j2}, Load(L.y, {t, d, b, j2}))));
  Expr last = L.seq - I(1);
  Expr time = L.reverse_only ? last - s
              : L.dirs == 2  ? jit::Select(jit::Eq(d, I(1)), last - s, Expr(s))
                             : Expr(s);
  start.push_back(jit::For(s, L.seq, ForKind::kSerial, Let(t, time, jit::Seq(step))));
  return jit::Seq(start);
}

}  // namespace

// kiln::RecurrentSequence (compiler/ops/nn.cc states its inputs and outputs). Parallel over
// (direction, batch row): a bidirectional layer runs its directions on two threads, with no
// synchronization between steps.
Status LowerRecurrentSequence(LowerContext& ctx) {
  Layer L;
  ASSIGN_OR_RETURN(int64_t kind, ctx.GetInt("kind", -1));
  ASSIGN_OR_RETURN(L.hidden, ctx.GetInt("hidden_size", -1));
  ASSIGN_OR_RETURN(L.dirs, ctx.GetInt("directions", 1));
  ASSIGN_OR_RETURN(int64_t reverse, ctx.GetInt("reverse", 0));
  if (kind < 0 || kind > 2) return ctx.Error("attribute kind must be 0, 1 or 2");
  L.cell = static_cast<Cell>(kind);
  L.reverse_only = reverse != 0 && L.dirs == 1;
  if (const Attribute* clip = ctx.node().FindAttribute("clip")) {
    if (clip->type() != Attribute::Type::kFloat) return ctx.Error("attribute clip must be a float");
    L.has_clip = true;
    L.clip = clip->f();
  }
  L.gates = L.cell == Cell::kLstm ? 4 : L.cell == Cell::kGru ? 3 : 1;
  std::optional<int64_t> panels = ConstOf(ctx.InputDim(1, 1)), width = ConstOf(ctx.InputDim(1, 4));
  if (!panels || !width) return ctx.Error("the packed weights must have a static shape");
  L.panels = *panels;
  L.width = *width;
  L.out = ctx.output_dtype(0);
  L.acc = AccType(L.out);
  L.xw = ctx.in(0);
  L.rp = ctx.in(1);
  if (ctx.has_input(2)) L.h0 = ctx.in(2);
  if (ctx.has_input(3)) L.c0 = ctx.in(3);
  if (ctx.has_input(4)) L.rbh = ctx.in(4);
  L.y = ctx.out(0);
  L.yh = ctx.out(1);
  if (L.cell == Cell::kLstm) L.yc = ctx.out(2);
  L.seq = ctx.InputDim(0, 0);
  L.batch = ctx.InputDim(0, 1);
  Var task("task"), d("d"), b("b");
  ctx.SetBody(jit::For(task, I(L.dirs) * L.batch, ForKind::kParallel,
                       Let(d, FloorDiv(task, L.batch),
                           Let(b, FloorMod(task, L.batch), Sequence(L, d, b)))));
  return Status::Ok();
}

}  // namespace kiln::compiler::nn
