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

// Multiply-adds per step (hidden x gates x hidden) from which one sequence is split over a team.
// A step then costs ~1.5 us on one Zen 3 core (more with the epilogue), against a barrier of
// ~0.2-0.5 us between two cores when neither is descheduled: below it the barrier eats the gain.
// LSTM from hidden 128, GRU from 148, RNN from 256.
constexpr int64_t kTeamMinWork = int64_t{1} << 16;

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

// Where a step reads the previous h of (d, b, unit k): Y_h, or Y at the previous step.
using HRead = std::function<Expr(const Expr& d, const Expr& b, const Expr& k)>;

HRead FromYh(const Layer& L) {
  return [&L](const Expr& d, const Expr& b, const Expr& k) { return Load(L.yh, {d, b, k}); };
}

// Clip (ONNX: applied to every gate's pre-activation) of an accumulator-typed value.
Expr Clipped(const Layer& L, Expr x) {
  if (!L.has_clip) return x;
  return jit::Max(jit::Min(x, jit::Const(L.acc, L.clip)), jit::Const(L.acc, -L.clip));
}

// The gates and state update of units j0 .. j0 + lanes - 1 of row b at step t, from the
// recurrent products in acc [gates, width] (lane l is unit j0 + l). Writes Y[t, d, b, j] and
// (LSTM) Y_c in place; the previous h (`prev`) is only read.
Stmt Epilogue(const Layer& L, const Buffer& acc, const Expr& d, const Expr& b, const Expr& t,
              const Expr& j0, int64_t lanes, const HRead& prev_h) {
  Var l("l"), j("j");
  auto pre = [&](int64_t g) {
    Expr x = Cast(L.acc, Load(L.xw, {t, b, (d * I(L.gates) + I(g)) * I(L.hidden) + j}));
    return jit::Add(Load(acc, {I(g), l}), x);
  };
  auto store_y = [&](Expr h) { return Store(L.y, {t, d, b, j}, Cast(L.out, h)); };
  Expr prev = Cast(L.acc, prev_h(d, b, j));
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
// products of all gates for row b accumulated over the previous h (`prev_h`) against the
// panel's packed weights, gates x width accumulators kept in registers, then the epilogue.
Stmt Panel(const Layer& L, const Expr& d, const Expr& b, const Expr& t, const Expr& p,
           int64_t lanes, const HRead& prev_h) {
  Buffer acc = Buffer::Local("acc", L.acc, {L.gates, L.width});
  Var g0("g"), l0("l"), k("k"), g("g"), l("l"), a("a", L.acc);
  Stmt zero = jit::For(g0, I(L.gates), ForKind::kUnrolled,
                       jit::For(l0, I(L.width), ForKind::kVectorized,
                                Store(acc, {g0, l0}, jit::Const(L.acc, 0))));
  Expr w = Cast(L.acc, Load(L.rp, {d, p, k, g, l}));
  Stmt accumulate = jit::For(
      k, I(L.hidden), ForKind::kSerial,
      Let(a, Cast(L.acc, prev_h(d, b, k)),
          jit::For(g, I(L.gates), ForKind::kUnrolled,
                   jit::For(l, I(L.width), ForKind::kVectorized,
                            Store(acc, {g, l}, jit::MulAdd(a, w, Load(acc, {g, l})))))));
  return jit::Allocate(acc, jit::Seq({zero, accumulate,
                                      Epilogue(L, acc, d, b, t, p * I(L.width), lanes, prev_h)}));
}

// The time step s of direction d reads and writes: reverse directions run from the end.
Expr Time(const Layer& L, const Expr& d, const Expr& s) {
  Expr last = L.seq - I(1);
  if (L.reverse_only) return last - s;
  if (L.dirs == 2) return jit::Select(jit::Eq(d, I(1)), last - s, s);
  return s;
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
  std::vector<Stmt> step = {
      jit::For(p, I(full), ForKind::kSerial, Panel(L, d, b, t, p, L.width, FromYh(L)))};
  if (tail > 0) step.push_back(Panel(L, d, b, t, I(full), tail, FromYh(L)));
  Var j2("j");
  step.push_back(jit::For(j2, I(L.hidden), ForKind::kVectorized,
                          Store(L.yh, {d, b, j2}, Load(L.y, {t, d, b, j2}))));
  start.push_back(jit::For(s, L.seq, ForKind::kSerial, Let(t, Time(L, d, s), jit::Seq(step))));
  return jit::Seq(start);
}

// ---- One sequence on a team of threads ------------------------------------------------------

// A step's units of work are (direction, row, panel); thread `tid` of n owns units
// [tid * U / n, (tid + 1) * U / n) for the whole run, so the units of a row's h and c (LSTM)
// stay with one thread. Step s reads the previous h from Y at the previous step (Y_h before the
// first), never from a buffer the step overwrites, so one barrier per step suffices: it
// separates step s - 1's writes of Y from step s's reads.
struct TeamSplit {
  const Layer& L;
  int64_t full, tail, panels;  // panels = full + (tail > 0)
  Expr units, lo, hi;

  // `unit(d, b, p)` for every unit the thread owns.
  Stmt Each(const std::function<Stmt(const Expr& d, const Expr& b, const Expr& p)>& unit) const {
    Var u("u"), d("d"), b("b"), p("p");
    Expr per_dir = L.batch * I(panels);
    return jit::For(u, lo, hi - lo, ForKind::kSerial,
                    Let(d, FloorDiv(u, per_dir),
                        Let(b, FloorDiv(FloorMod(u, per_dir), I(panels)),
                            Let(p, FloorMod(u, I(panels)), unit(d, b, p)))));
  }

  // The lanes of panel p that are units (all but in a partial last panel).
  Expr Lanes(const Expr& p) const { return jit::Min(I(L.width), I(L.hidden) - p * I(L.width)); }

  // Step s of every unit the thread owns, the previous h read through `prev_h`.
  Stmt Step(const Expr& s, const HRead& prev_h) const {
    return Each([&](const Expr& d, const Expr& b, const Expr& p) {
      Var t("t");
      Stmt whole = Panel(L, d, b, t, p, L.width, prev_h);
      if (tail > 0) {
        whole = jit::If(jit::Lt(p, I(full)), whole, Panel(L, d, b, t, I(full), tail, prev_h));
      }
      return Let(t, Time(L, d, s), whole);
    });
  }
};

// Thread `tid`'s part of every step (the body of the team loop).
Stmt TeamSequence(const Layer& L, const Expr& tid) {
  const int64_t full = L.hidden / L.width, tail = L.hidden - full * L.width;
  const int64_t panels = full + (tail > 0 ? 1 : 0);
  Var n("n"), lo("lo"), hi("hi");
  Expr units = I(L.dirs) * L.batch * I(panels);
  TeamSplit split{L, full, tail, panels, units, lo, hi};
  auto lanes_of = [&](const Expr& p, const std::function<Stmt(const Expr& j)>& f) {
    Var l("l"), j("j");
    return jit::For(l, split.Lanes(p), ForKind::kVectorized, Let(j, p * I(L.width) + l, f(j)));
  };
  std::vector<Stmt> body;
  // The state of the thread's own units starts as H0 / C0 (zeros when absent).
  auto init = [&](const Buffer& dst, const Buffer& src) {
    return split.Each([&](const Expr& d, const Expr& b, const Expr& p) {
      return lanes_of(p, [&](const Expr& j) {
        Expr v = src ? Load(src, {d, b, j}) : jit::Const(L.out, 0);
        return Store(dst, {d, b, j}, v);
      });
    });
  };
  body.push_back(init(L.yh, L.h0));
  if (L.cell == Cell::kLstm) body.push_back(init(L.yc, L.c0));
  // Step s waits for every unit of step s - 1 (for step 0, of the initial state), then runs the
  // thread's panels; once a barrier reports the run's deadline passed, the rest is skipped.
  Var s("s"), go("go", DType::kBool), done("done", DType::kBool);
  HRead from_y = [&L, &s](const Expr& d, const Expr& b, const Expr& k) {
    return Load(L.y, {Time(L, d, s - I(1)), d, b, k});
  };
  Stmt step = jit::If(jit::Eq(s, I(0)), split.Step(s, FromYh(L)), split.Step(s, from_y));
  body.push_back(
      jit::For(s, L.seq, ForKind::kSerial, Let(go, jit::TeamBarrier(), jit::If(go, step))));
  // Y_h := h of the last step, each thread its own units, after every thread is past step 0
  // (which reads Y_h).
  Stmt copy = split.Each([&](const Expr& d, const Expr& b, const Expr& p) {
    return lanes_of(p, [&](const Expr& j) {
      return Store(L.yh, {d, b, j}, Load(L.y, {Time(L, d, L.seq - I(1)), d, b, j}));
    });
  });
  body.push_back(jit::If(jit::Gt(L.seq, I(0)), Let(done, jit::TeamBarrier(), jit::If(done, copy))));
  return Let(n, jit::TeamSize(),
             Let(lo, FloorDiv(tid * units, Expr(n)),
                 Let(hi, FloorDiv((tid + I(1)) * units, Expr(n)), jit::Seq(body))));
}

}  // namespace

// kiln::RecurrentSequence (compiler/ops/nn.cc states its inputs and outputs). Parallel over
// (direction, batch row): a bidirectional layer runs its directions on two threads, with no
// synchronization between steps. A single sequence whose steps are large enough runs on a team
// that splits every step's panels, with one barrier per step (TeamSequence).
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
  Expr tasks = I(L.dirs) * L.batch;
  Stmt per_task = jit::For(task, tasks, ForKind::kParallel,
                           Let(d, FloorDiv(task, L.batch),
                               Let(b, FloorMod(task, L.batch), Sequence(L, d, b))));
  if (L.hidden * L.gates * L.hidden < kTeamMinWork || L.panels < 2) {
    ctx.SetBody(per_task);
    return Status::Ok();
  }
  // One sequence (a unidirectional layer at batch 1) would run on one thread: split each
  // step's panels over a team instead, up to one panel per thread.
  Var tid("tid");
  ctx.SetBody(jit::If(jit::Eq(tasks, I(1)),
                      jit::For(tid, I(L.panels), ForKind::kTeam, TeamSequence(L, tid)), per_task));
  return Status::Ok();
}

}  // namespace kiln::compiler::nn
