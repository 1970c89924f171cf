// Lowerings of the elementwise family: unary math and activations, broadcasting binary and
// variadic ops, comparisons and logic, Where, Cast/CastLike, Clip, Identity/Dropout, and the
// Softmax family (row kernels: max, sum of exp, scale).
#include <cfloat>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/lower/loops.h"
#include "compiler/lower/lower.h"
#include "jit/compute.h"

namespace kiln::compiler {
namespace {

using jit::BroadcastDim;
using jit::Expr;
using jit::ForKind;
using jit::IterVar;
using jit::ReduceOp;
using jit::Stmt;
using jit::Var;

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;

// ---- Building blocks -------------------------------------------------------------------------

// out(0)[i] = f(inputs `slots` broadcast to i), cast to out(0)'s dtype. Inputs whose innermost
// dim is only known at run time get one loop nest per case (BroadcastNest), so each nest's inner
// loop vectorizes (as jit::Elementwise does).
Stmt BroadcastCompute(const LowerContext& ctx, const std::vector<int>& slots, const ElementFn& f) {
  const jit::Buffer out = ctx.out(0);
  std::vector<jit::Buffer> inputs;
  std::vector<std::vector<BroadcastDim>> hints;
  for (int slot : slots) {
    inputs.push_back(ctx.in(slot));
    hints.push_back(BroadcastHints(ctx.input_shape(slot), ctx.output_shape(0)));
  }
  return BroadcastNest(
      ctx.OutputDims(0), inputs, std::move(hints),
      [&](const std::vector<Expr>& index, const std::vector<std::vector<BroadcastDim>>& h) {
        Lets lets;
        std::vector<Expr> values;
        for (size_t k = 0; k < inputs.size(); ++k)
          values.push_back(lets.Bind(jit::Widen(jit::BroadcastLoad(inputs[k], index, h[k]))));
        return lets.Wrap(Store(out, index, jit::Cast(out->dtype, f(lets, values))));
      });
}

// Output 0 = f(inputs `slots` broadcast): the unfused kernel, and f recorded for fusion (so f
// must own everything it captures).
void SetElementwise(LowerContext& ctx, std::vector<int> slots, ElementFn f) {
  ctx.SetBody(BroadcastCompute(ctx, slots, f));
  ctx.SetElementFn(std::move(slots), std::move(f));
}

std::vector<int> PresentInputs(const NodeContext& ctx) {
  std::vector<int> slots;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) slots.push_back(i);
  }
  return slots;
}

Expr C(const Expr& like, double v) { return jit::ConstLike(like, v); }

// The float type an integer-valued formula computes in (f64 keeps every i32 exact).
Expr ToFloat(const Expr& x) { return IsFloat(x.dtype()) ? x : jit::Cast(DType::kF64, x); }

// log(1 + u) without losing u's digits near 0 (Kahan: the rounding of 1 + u is divided out).
Expr Log1p(Lets& lets, const Expr& u) {
  Expr w = lets.Bind(u + 1.0);
  return Select(jit::Eq(w, C(w, 1)), u,
                Select(jit::Gt(w, C(w, 2)), jit::Log(w), jit::Log(w) * (u / (w - 1.0))));
}

// atan in f64 (Cephes atan: range reduction to |x| <= 0.66, then a rational approximation).
Expr Atan64(Lets& lets, const Expr& x_in) {
  Expr x = lets.Bind(jit::Cast(DType::kF64, x_in));
  Expr a = lets.Bind(jit::Abs(x));
  Expr big = lets.Bind(jit::Gt(a, C(a, 2.41421356237309504880)));  // tan(3 pi / 8)
  Expr mid = lets.Bind(jit::Gt(a, C(a, 0.66)));
  Expr r = lets.Bind(Select(big, C(a, -1) / a, Select(mid, (a - 1.0) / (a + 1.0), a)));
  const double kMoreBits = 6.123233995736765886130e-17;
  Expr y0 = Select(big, C(a, kPi / 2), Select(mid, C(a, kPi / 4), C(a, 0)));
  Expr more = Select(big, C(a, kMoreBits), Select(mid, C(a, 0.5 * kMoreBits), C(a, 0)));
  Expr z = lets.Bind(r * r);
  Expr p = C(z, -8.750608600031904122785e-1);
  for (double c : {-1.615753718733365076637e1, -7.500855792314704667340e1,
                   -1.228866684490136173410e2, -6.485021904942025371773e1}) {
    p = p * z + c;
  }
  Expr q = z + 2.485846490142306297962e1;
  for (double c : {1.650270098316988542046e2, 4.328810604912902668951e2, 4.853903996359136964868e2,
                   1.945506571482613964425e2}) {
    q = q * z + c;
  }
  Expr t = r * (z * p / q) + r + more;
  Expr y = lets.Bind(y0 + t);
  return Select(jit::Lt(x, C(x, 0)), -y, y);
}

// sinh in f64: Taylor series near 0 (where e^x - e^-x cancels), the exponentials elsewhere.
Expr Sinh64(Lets& lets, const Expr& x_in) {
  Expr x = lets.Bind(jit::Cast(DType::kF64, x_in));
  Expr x2 = lets.Bind(x * x);
  Expr series = C(x, 1.0 / 6227020800.0);  // 1/13!
  for (double c : {1.0 / 39916800.0, 1.0 / 362880.0, 1.0 / 5040.0, 1.0 / 120.0, 1.0 / 6.0, 1.0}) {
    series = series * x2 + c;
  }
  Expr e = lets.Bind(jit::Exp(x));
  return Select(jit::Lt(jit::Abs(x), C(x, 0.5)), x * series, (e - 1.0 / e) * 0.5);
}

using UnaryFn = std::function<Expr(Lets&, Expr)>;

// The per-element function of a unary op, with its attributes read (errors name the node).
StatusOr<UnaryFn> UnaryFunction(const LowerContext& ctx) {
  const std::string& op = ctx.node().op_type;
  auto attr = [&](const char* name, float def) { return ctx.GetFloat(name, def); };
  if (op == "Abs") return UnaryFn([](Lets&, Expr x) { return jit::Abs(x); });
  if (op == "Neg") return UnaryFn([](Lets&, Expr x) { return jit::Neg(x); });
  if (op == "Relu") return UnaryFn([](Lets&, Expr x) { return jit::Max(x, C(x, 0)); });
  if (op == "Sign") {
    return UnaryFn([](Lets&, Expr x) {
      Expr s = Select(jit::Gt(x, C(x, 0)), C(x, 1), Select(jit::Lt(x, C(x, 0)), C(x, -1), C(x, 0)));
      return IsFloat(x.dtype()) ? Select(jit::IsNan(x), x, s) : s;
    });
  }
  if (op == "Sigmoid") return UnaryFn([](Lets&, Expr x) { return jit::Sigmoid(x); });
  if (op == "Tanh") return UnaryFn([](Lets&, Expr x) { return jit::Tanh(x); });
  if (op == "Softplus") {
    // log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): never overflows.
    return UnaryFn(
        [](Lets& l, Expr x) { return jit::Max(x, C(x, 0)) + Log1p(l, jit::Exp(-jit::Abs(x))); });
  }
  if (op == "Softsign") {
    return UnaryFn([](Lets&, Expr x) { return x / (jit::Abs(x) + 1.0); });
  }
  if (op == "Erf") {
    return UnaryFn([](Lets&, Expr x) { return jit::Erf(ToFloat(x)); });
  }
  if (op == "Sqrt") return UnaryFn([](Lets&, Expr x) { return jit::Sqrt(x); });
  if (op == "Reciprocal") return UnaryFn([](Lets&, Expr x) { return C(x, 1) / x; });
  if (op == "Exp") return UnaryFn([](Lets&, Expr x) { return jit::Exp(x); });
  if (op == "Log") return UnaryFn([](Lets&, Expr x) { return jit::Log(x); });
  if (op == "Floor") return UnaryFn([](Lets&, Expr x) { return jit::Floor(x); });
  if (op == "Ceil") return UnaryFn([](Lets&, Expr x) { return jit::Ceil(x); });
  if (op == "Round") return UnaryFn([](Lets&, Expr x) { return jit::Round(x); });
  if (op == "Sin") return UnaryFn([](Lets&, Expr x) { return jit::Sin(x); });
  if (op == "Cos") return UnaryFn([](Lets&, Expr x) { return jit::Cos(x); });
  // The rest of the trigonometric family has no kernel IR op: f64 formulas, rounded once to the
  // output type at the store.
  if (op == "Tan") {
    return UnaryFn([](Lets& l, Expr x) {
      Expr d = l.Bind(jit::Cast(DType::kF64, x));
      return jit::Sin(d) / jit::Cos(d);
    });
  }
  if (op == "Atan") return UnaryFn([](Lets& l, Expr x) { return Atan64(l, x); });
  if (op == "Asin") {
    return UnaryFn([](Lets& l, Expr x) {
      Expr d = l.Bind(jit::Cast(DType::kF64, x));
      return Atan64(l, d / jit::Sqrt((1.0 - d) * (d + 1.0)));
    });
  }
  if (op == "Acos") {
    return UnaryFn([](Lets& l, Expr x) {
      Expr d = l.Bind(jit::Cast(DType::kF64, x));
      return Atan64(l, jit::Sqrt((1.0 - d) / (d + 1.0))) * 2.0;
    });
  }
  if (op == "Sinh") return UnaryFn([](Lets& l, Expr x) { return Sinh64(l, x); });
  if (op == "Cosh") {
    return UnaryFn([](Lets& l, Expr x) {
      Expr e = l.Bind(jit::Exp(jit::Cast(DType::kF64, x)));
      return (e + 1.0 / e) * 0.5;
    });
  }
  if (op == "Asinh") {
    // sign(x) * log1p(a + a^2 / (1 + sqrt(1 + a^2))); log(2a) once a^2 would overflow.
    return UnaryFn([](Lets& l, Expr x) {
      Expr d = l.Bind(jit::Cast(DType::kF64, x));
      Expr a = l.Bind(jit::Abs(d));
      Expr a2 = l.Bind(a * a);
      Expr small = Log1p(l, a + a2 / (jit::Sqrt(a2 + 1.0) + 1.0));
      Expr y = l.Bind(Select(jit::Gt(a, C(a, 1e8)), jit::Log(a) + kLn2, small));
      return Select(jit::Lt(d, C(d, 0)), -y, y);
    });
  }
  if (op == "Acosh") {
    // log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1); log(2x) for large x.
    return UnaryFn([](Lets& l, Expr x) {
      Expr d = l.Bind(jit::Cast(DType::kF64, x));
      Expr t = l.Bind(d - 1.0);
      Expr y = Log1p(l, t + jit::Sqrt(t * (t + 2.0)));
      return Select(jit::Gt(d, C(d, 1e8)), jit::Log(d) + kLn2, y);
    });
  }
  if (op == "Atanh") {
    return UnaryFn([](Lets& l, Expr x) {
      Expr d = l.Bind(jit::Cast(DType::kF64, x));
      return Log1p(l, d * 2.0 / (1.0 - d)) * 0.5;
    });
  }
  if (op == "LeakyRelu") {
    ASSIGN_OR_RETURN(float alpha, attr("alpha", 0.01f));
    return UnaryFn(
        [alpha](Lets&, Expr x) { return Select(jit::Lt(x, C(x, 0)), x * C(x, alpha), x); });
  }
  if (op == "Elu") {
    ASSIGN_OR_RETURN(float alpha, attr("alpha", 1.0f));
    return UnaryFn([alpha](Lets&, Expr x) {
      return Select(jit::Lt(x, C(x, 0)), (jit::Exp(x) - 1.0) * C(x, alpha), x);
    });
  }
  if (op == "Selu") {
    // Selu-1 had rounder defaults; Selu-6 states them to float precision.
    bool v1 = ctx.opset() < 6;
    ASSIGN_OR_RETURN(float alpha, attr("alpha", v1 ? 1.6732f : 1.67326319217681884765625f));
    ASSIGN_OR_RETURN(float gamma, attr("gamma", v1 ? 1.0507f : 1.05070102214813232421875f));
    return UnaryFn([alpha, gamma](Lets&, Expr x) {
      Expr neg = (jit::Exp(x) * C(x, alpha) - C(x, alpha)) * C(x, gamma);
      return Select(jit::Le(x, C(x, 0)), neg, x * C(x, gamma));
    });
  }
  if (op == "Celu") {
    ASSIGN_OR_RETURN(float alpha, attr("alpha", 1.0f));
    if (alpha == 0) return ctx.Error("alpha must not be 0");
    return UnaryFn([alpha](Lets&, Expr x) {
      Expr neg = (jit::Exp(x / C(x, alpha)) - 1.0) * C(x, alpha);
      return jit::Max(x, C(x, 0)) + jit::Min(neg, C(x, 0));
    });
  }
  if (op == "HardSigmoid" || op == "HardSwish") {
    bool swish = op == "HardSwish";
    double alpha = 1.0 / 6, beta = 0.5;  // HardSwish: fixed, exactly 1/6 at every precision
    if (!swish) {
      ASSIGN_OR_RETURN(alpha, attr("alpha", 0.2f));
      ASSIGN_OR_RETURN(beta, attr("beta", 0.5f));
    }
    return UnaryFn([alpha, beta, swish](Lets&, Expr x) {
      Expr h = jit::Max(C(x, 0), jit::Min(C(x, 1), x * C(x, alpha) + C(x, beta)));
      return swish ? x * h : h;
    });
  }
  if (op == "ThresholdedRelu") {
    ASSIGN_OR_RETURN(float alpha, attr("alpha", 1.0f));
    return UnaryFn([alpha](Lets&, Expr x) { return Select(jit::Gt(x, C(x, alpha)), x, C(x, 0)); });
  }
  if (op == "Shrink") {
    ASSIGN_OR_RETURN(float bias, attr("bias", 0.0f));
    ASSIGN_OR_RETURN(float lambd, attr("lambd", 0.5f));
    // Integer inputs compare and shift in f64 (the attributes are floats).
    return UnaryFn([bias, lambd](Lets&, Expr x) {
      Expr f = ToFloat(x);
      return Select(jit::Lt(f, C(f, -lambd)), f + C(f, bias),
                    Select(jit::Gt(f, C(f, lambd)), f - C(f, bias), C(f, 0)));
    });
  }
  if (op == "Not" || op == "BitwiseNot") return UnaryFn([](Lets&, Expr x) { return jit::Not(x); });
  if (op == "IsNaN") return UnaryFn([](Lets&, Expr x) { return jit::IsNan(x); });
  if (op == "IsInf") {
    ASSIGN_OR_RETURN(int64_t neg, ctx.GetInt("detect_negative", 1));
    ASSIGN_OR_RETURN(int64_t pos, ctx.GetInt("detect_positive", 1));
    return UnaryFn([neg, pos](Lets&, Expr x) {
      Expr sign_ok = neg && pos ? jit::IntImm(1, DType::kBool)
                     : neg      ? jit::Lt(x, C(x, 0))
                     : pos      ? jit::Gt(x, C(x, 0))
                                : jit::IntImm(0, DType::kBool);
      return jit::And(jit::IsInf(x), sign_ok);
    });
  }
  return ctx.UnsupportedError("no unary lowering for " + op);
}

// ---- Lowerings -------------------------------------------------------------------------------

Status LowerUnary(LowerContext& ctx) {
  ASSIGN_OR_RETURN(UnaryFn f, UnaryFunction(ctx));
  SetElementwise(ctx, {0}, [f](Lets& l, const std::vector<Expr>& v) { return f(l, v[0]); });
  return Status::Ok();
}

// Pow(base, exponent): the result has the base's dtype. Float bases compute in the wider of the
// two float types; integer bases compute in f64 and truncate (as ONNX Runtime does).
Expr PowValue(const Expr& base, const Expr& exponent) {
  DType t = base.dtype() == DType::kF64 || exponent.dtype() == DType::kF64 || !IsFloat(base.dtype())
                ? DType::kF64
                : DType::kF32;
  return jit::Pow(jit::Cast(t, base), jit::Cast(t, exponent));
}

// BitShift on unsigned x by y, as a product or quotient by 2^y in u64 (2^y is exact in f64 and
// u64 for y < 64): the product wraps modulo 2^64 and narrowing it back to x's width drops the
// bits shifted out, as << does; the unsigned quotient is >>. Shifts by the width or more
// (undefined in C, so in ONNX Runtime) give 0 here.
Expr ShiftValue(const Expr& x, const Expr& y, bool left) {
  Expr wide = jit::Cast(DType::kU64, x), n = jit::Cast(DType::kU64, y);
  Expr p =
      jit::Cast(DType::kU64, jit::Pow(jit::FloatImm(2.0, DType::kF64), jit::Cast(DType::kF64, n)));
  Expr width = jit::IntImm(8 * static_cast<int64_t>(DTypeSize(x.dtype())), DType::kU64);
  Expr shifted = left ? wide * p : jit::Div(wide, p);
  return jit::Select(jit::Lt(n, width), jit::Cast(x.dtype(), shifted), jit::Const(x.dtype(), 0));
}

Status LowerBinary(LowerContext& ctx) {
  const std::string& op = ctx.node().op_type;
  std::function<Expr(Expr, Expr)> f;
  if (op == "Add") {
    f = [](Expr a, Expr b) { return jit::Add(a, b); };
  } else if (op == "Sub") {
    f = [](Expr a, Expr b) { return jit::Sub(a, b); };
  } else if (op == "Mul") {
    f = [](Expr a, Expr b) { return jit::Mul(a, b); };
  } else if (op == "Div") {
    f = [](Expr a, Expr b) { return jit::Div(a, b); };  // integers truncate toward zero
  } else if (op == "Mod") {
    ASSIGN_OR_RETURN(int64_t fmod, ctx.GetInt("fmod", 0));
    // fmod=1: C fmod / remainder (sign of the dividend); fmod=0: sign of the divisor.
    if (fmod) {
      f = [](Expr a, Expr b) { return jit::Mod(a, b); };
    } else {
      f = [](Expr a, Expr b) { return jit::FloorMod(a, b); };
    }
  } else if (op == "Pow") {
    std::optional<std::vector<double>> e = ctx.InputConstDoubles(1);
    if (IsFloat(ctx.input_dtype(0)) && e && e->size() == 1 && (*e)[0] == 2) {
      f = [](Expr x, Expr) { return x * x; };  // a layer norm's variance: no pow call
    } else {
      f = PowValue;
    }
  } else if (op == "And") {
    f = [](Expr a, Expr b) { return jit::And(a, b); };
  } else if (op == "Or") {
    f = [](Expr a, Expr b) { return jit::Or(a, b); };
  } else if (op == "Xor") {
    f = [](Expr a, Expr b) { return jit::Ne(a, b); };
  } else if (op == "BitShift") {
    ASSIGN_OR_RETURN(std::string direction, ctx.GetString("direction", ""));
    if (direction != "LEFT" && direction != "RIGHT")
      return ctx.Error("direction is '" + direction + "'; ONNX allows 'LEFT' and 'RIGHT'");
    f = [left = direction == "LEFT"](Expr a, Expr b) { return ShiftValue(a, b, left); };
  } else if (op == "BitwiseAnd") {
    f = [](Expr a, Expr b) { return jit::And(a, b); };
  } else if (op == "BitwiseOr") {
    f = [](Expr a, Expr b) { return jit::Or(a, b); };
  } else if (op == "BitwiseXor") {
    f = [](Expr a, Expr b) { return jit::And(jit::Or(a, b), jit::Not(jit::And(a, b))); };
  } else if (op == "Equal") {
    f = [](Expr a, Expr b) { return jit::Eq(a, b); };
  } else if (op == "Less") {
    f = [](Expr a, Expr b) { return jit::Lt(a, b); };
  } else if (op == "LessOrEqual") {
    f = [](Expr a, Expr b) { return jit::Le(a, b); };
  } else if (op == "Greater") {
    f = [](Expr a, Expr b) { return jit::Gt(a, b); };
  } else if (op == "GreaterOrEqual") {
    f = [](Expr a, Expr b) { return jit::Ge(a, b); };
  } else if (op == "PRelu") {
    f = [](Expr x, Expr slope) { return Select(jit::Lt(x, C(x, 0)), x * slope, x); };
  } else {
    return ctx.UnsupportedError("no binary lowering for " + op);
  }
  SetElementwise(ctx, {0, 1}, [f](Lets&, const std::vector<Expr>& v) { return f(v[0], v[1]); });
  return Status::Ok();
}

Status LowerVariadic(LowerContext& ctx) {
  std::string op = ctx.node().op_type;
  std::vector<int> slots = PresentInputs(ctx);
  if (slots.empty()) return ctx.Error("needs at least one input");
  SetElementwise(ctx, slots, [op](Lets&, const std::vector<Expr>& v) {
    Expr acc = v[0];
    for (size_t k = 1; k < v.size(); ++k) {
      acc = op == "Min" ? jit::Min(acc, v[k]) : op == "Max" ? jit::Max(acc, v[k]) : acc + v[k];
    }
    if (op == "Mean") acc = acc / jit::IntConstLike(acc, static_cast<int64_t>(v.size()));
    return acc;
  });
  return Status::Ok();
}

Status LowerWhere(LowerContext& ctx) {
  SetElementwise(ctx, {0, 1, 2},
                 [](Lets&, const std::vector<Expr>& v) { return Select(v[0], v[1], v[2]); });
  return Status::Ok();
}

// Cast and CastLike: the kernel IR's casts (float -> int saturates, NaN -> 0; any -> bool is
// x != 0; narrowing floats round to nearest even). A cast to the input's own type is a view.
Status LowerCast(LowerContext& ctx) {
  if (ctx.output_dtype(0) == ctx.input_dtype(0)) {
    ctx.SetView(0);
    return Status::Ok();
  }
  SetElementwise(ctx, {0}, [](Lets&, const std::vector<Expr>& v) { return v[0]; });
  return Status::Ok();
}

// A compile-time scalar bound of Clip, or null when it is only known at run time.
Expr ConstClipBound(const LowerContext& ctx, int slot, DType t) {
  if (IsInteger(t)) {
    std::optional<std::vector<int64_t>> v = ctx.InputConstInts(slot);
    if (v && v->size() == 1) return jit::IntImm((*v)[0], t);
  } else if (std::optional<std::vector<double>> v = ctx.InputConstDoubles(slot);
             v && v->size() == 1) {
    return jit::Widen(jit::Const(t, (*v)[0]));
  }
  return Expr();
}

// Clip: min/max attributes before opset 11, optional scalar inputs from 11 (constants folded
// in, run-time ones read as broadcast inputs of the element function).
Status LowerClip(LowerContext& ctx) {
  DType t = ctx.input_dtype(0);
  Expr lo, hi;
  int lo_at = -1, hi_at = -1;  // position in the element values of a run-time bound
  std::vector<int> slots = {0};
  if (ctx.opset() < 11) {
    ASSIGN_OR_RETURN(float min, ctx.GetFloat("min", -FLT_MAX));
    ASSIGN_OR_RETURN(float max, ctx.GetFloat("max", FLT_MAX));
    lo = jit::Widen(jit::Const(t, min));
    hi = jit::Widen(jit::Const(t, max));
  } else {
    for (int slot : {1, 2}) {
      if (!ctx.has_input(slot)) continue;
      Expr bound = ConstClipBound(ctx, slot, t);
      if (!bound) {
        (slot == 1 ? lo_at : hi_at) = static_cast<int>(slots.size());
        slots.push_back(slot);
      }
      (slot == 1 ? lo : hi) = bound;
    }
  }
  SetElementwise(ctx, slots, [lo, hi, lo_at, hi_at](Lets&, const std::vector<Expr>& v) {
    Expr x = v[0];
    Expr min = lo_at >= 0 ? v[lo_at] : lo;
    Expr max = hi_at >= 0 ? v[hi_at] : hi;
    if (min) x = jit::Max(x, min);
    if (max) x = jit::Min(x, max);  // min > max gives max everywhere, as ONNX defines
    return x;
  });
  return Status::Ok();
}

Status LowerIdentity(LowerContext& ctx) {
  ctx.SetView(0);
  return Status::Ok();
}

// Dropout at inference is the identity. Training mode (opset 12's third input) needs random
// numbers, which kiln does not generate: a constant true with a nonzero ratio is Unsupported,
// and so is a training_mode only known at run time (taking it as false would silently give
// wrong results when it is true).
Status LowerDropout(LowerContext& ctx) {
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    std::optional<std::vector<int64_t>> training = ctx.InputConstInts(2);
    std::optional<std::vector<double>> ratio = std::vector<double>{0.5};
    if (ctx.has_input(1)) ratio = ctx.InputConstDoubles(1);
    bool zero_ratio = ratio && ratio->size() == 1 && (*ratio)[0] == 0;
    // With a zero ratio training mode is the identity too, whatever training_mode is.
    if (!training && !zero_ratio) {
      return ctx.UnsupportedError(
          "training_mode must be a compile-time constant (kiln runs Dropout for inference only)");
    }
    if (training && !training->empty() && (*training)[0] != 0 && !zero_ratio) {
      return ctx.UnsupportedError("training_mode=true needs random dropout");
    }
  }
  if (!ctx.has_output(1)) {
    ctx.SetView(0);
    return Status::Ok();
  }
  jit::Buffer out = ctx.out(0), mask = ctx.out(1);
  ctx.SetBody(ParallelNest(ctx.OutputDims(0), [&](const std::vector<Expr>& index) {
    return jit::Seq({Store(out, index, jit::Load(ctx.in(0), index)),
                     Store(mask, index, jit::Const(mask->dtype, 1))});
  }));
  return Status::Ok();
}

// Softmax / LogSoftmax along an axis that is not the last one (opset 13): walking the axis for
// one position at a time would stride through memory, so a tile of positions along the last dim
// is normalized together (local max and sum per position), streaming contiguous rows of the
// input at each step of the axis. (Other positions x tiles) run in parallel.
Stmt SoftmaxTiled(const LowerContext& ctx, int axis, bool log) {
  constexpr int64_t kTile = 256;
  const jit::Buffer in = ctx.in(0), out = ctx.out(0);
  int rank = ctx.input_rank(0);
  std::vector<Expr> dims = ctx.InputDims(0);
  Expr n = dims[rank - 1];
  std::vector<Expr> loop_dims;
  for (int d = 0; d < rank - 1; ++d) {
    if (d != axis) loop_dims.push_back(dims[d]);
  }
  loop_dims.push_back(jit::FloorDiv(n + (kTile - 1), jit::IntImm(kTile)));
  DType t = jit::Widen(jit::Load(in, std::vector<Expr>(rank, jit::IntImm(0)))).dtype();
  return ParallelFlat(loop_dims, [&](const std::vector<Expr>& o) {
    Var base("base"), len("len");
    auto index = [&](const Expr& k, const Expr& l) {
      std::vector<Expr> idx;
      size_t j = 0;
      for (int d = 0; d < rank; ++d) {
        idx.push_back(d == axis ? k : d == rank - 1 ? base + l : o[j++]);
      }
      return idx;
    };
    jit::Buffer mx = jit::Buffer::Local("mx", t, {kTile});
    jit::Buffer sm = jit::Buffer::Local("sm", t, {kTile});
    // for k along the axis: for l in the tile (vectorized): body(k, l).
    auto sweep = [&](const char* name, const std::function<Stmt(const Var&, const Var&)>& body) {
      Var k(std::string("k_") + name), l(std::string("l_") + name);
      return For(k, dims[axis], ForKind::kSerial, For(l, len, ForKind::kVectorized, body(k, l)));
    };
    auto each = [&](const char* name, const std::function<Stmt(const Var&)>& body) {
      Var l(std::string("l_") + name);
      return For(l, len, ForKind::kVectorized, body(l));
    };
    auto x = [&](const Var& k, const Var& l) { return jit::Widen(jit::Load(in, index(k, l))); };
    Stmt body = jit::Seq({
        each("init",
             [&](const Var& l) {
               return jit::Seq(
                   {Store(mx, {l}, jit::FloatImm(-INFINITY, t)), Store(sm, {l}, jit::Const(t, 0))});
             }),
        sweep("max",
              [&](const Var& k, const Var& l) {
                return Store(mx, {l}, jit::Max(jit::Load(mx, {l}), x(k, l)));
              }),
        sweep("sum",
              [&](const Var& k, const Var& l) {
                return Store(sm, {l}, jit::Load(sm, {l}) + jit::Exp(x(k, l) - jit::Load(mx, {l})));
              }),
        each("scale",
             [&](const Var& l) {
               Expr s = jit::Load(sm, {l});
               return Store(sm, {l}, log ? jit::Log(s) : C(s, 1) / s);
             }),
        sweep("store",
              [&](const Var& k, const Var& l) {
                Expr shifted = x(k, l) - jit::Load(mx, {l});
                Expr v =
                    log ? shifted - jit::Load(sm, {l}) : jit::Exp(shifted) * jit::Load(sm, {l});
                return Store(out, index(k, l), jit::Cast(out->dtype, v));
              }),
    });
    return Let(base, o.back() * kTile,
               Let(len, jit::Min(jit::IntImm(kTile), n - base), Allocate(mx, Allocate(sm, body))));
  });
}

// Softmax, LogSoftmax, Hardmax. Opset 13 normalizes along `axis`; before, the input is a 2-D
// matrix split at `axis` and each row (all trailing dims together) is normalized. Per row: the
// max, the sum of exp(x - max), then the scaled store, each a vectorizable inner loop; rows run
// in parallel.
Status LowerSoftmax(LowerContext& ctx) {
  const std::string& op = ctx.node().op_type;
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", ctx.opset() < 13 ? 1 : -1));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  int end = ctx.opset() < 13 ? rank : axis + 1;  // reduced dims: [axis, end)
  if (end < rank && op != "Hardmax") {
    ctx.SetBody(SoftmaxTiled(ctx, axis, op == "LogSoftmax"));
    return Status::Ok();
  }
  const jit::Buffer in = ctx.in(0), out = ctx.out(0);
  std::vector<Expr> dims = ctx.InputDims(0);
  std::vector<Expr> kept_dims;
  for (int d = 0; d < rank; ++d) {
    if (d < axis || d >= end) kept_dims.push_back(dims[d]);
  }
  ctx.SetBody(ParallelFlat(kept_dims, [&](const std::vector<Expr>& kept) {
    // Index of x with the reduced dims taken from `vars`.
    auto index = [&](const std::vector<Var>& vars) {
      std::vector<Expr> idx;
      size_t k = 0;
      for (int d = 0; d < rank; ++d) {
        idx.push_back(d < axis || d >= end ? kept[k++] : Expr(vars[d - axis]));
      }
      return idx;
    };
    auto iters = [&](const char* prefix, std::vector<Var>* vars) {
      std::vector<IterVar> it;
      for (int d = axis; d < end; ++d) {
        vars->emplace_back(prefix + std::to_string(d));
        it.push_back({vars->back(), dims[d]});
      }
      return it;
    };
    // The store loop over the reduced dims, innermost vectorized.
    auto store_loop = [&](const std::function<Expr(const std::vector<Var>&)>& value) {
      std::vector<Var> vars;
      for (int d = axis; d < end; ++d) vars.emplace_back("k" + std::to_string(d));
      Stmt s = Store(out, index(vars), jit::Cast(out->dtype, value(vars)));
      for (int d = end - 1; d >= axis; --d) {
        s = For(vars[d - axis], dims[d], d == end - 1 ? ForKind::kVectorized : ForKind::kSerial, s);
      }
      return s;
    };
    auto x = [&](const std::vector<Var>& vars) { return jit::Widen(jit::Load(in, index(vars))); };
    if (op == "Hardmax") {
      std::vector<Var> rv;
      std::vector<IterVar> it = iters("r", &rv);
      Var best("best");
      return Let(best, jit::Reduce(ReduceOp::kArgMax, it, x(rv)),
                 store_loop([&](const std::vector<Var>& vars) {
                   Expr pos = vars[0];
                   for (int d = axis + 1; d < end; ++d) pos = pos * dims[d] + vars[d - axis];
                   return Select(jit::Eq(pos, best), jit::Const(out->dtype, 1),
                                 jit::Const(out->dtype, 0));
                 }));
    }
    std::vector<Var> mv, sv;
    std::vector<IterVar> mit = iters("m", &mv), sit = iters("s", &sv);
    DType acc = jit::Widen(jit::Load(in, index(mv))).dtype();
    Var m("max", acc), s("sum", acc), scale("scale", acc);
    Expr exp_sum = jit::Reduce(ReduceOp::kSum, sit, jit::Exp(x(sv) - m));
    Stmt body;  // everything after the row max
    if (op == "Softmax" && out->dtype == acc) {
      // exp once per element: store exp(x - max) (exact in the output's dtype), sum what was
      // stored, then scale it in place. The row is in L1 for the last two passes; exp dominates.
      body =
          jit::Seq({store_loop([&](const std::vector<Var>& vars) { return jit::Exp(x(vars) - m); }),
                    Let(s, jit::Reduce(ReduceOp::kSum, sit, jit::Load(out, index(sv))),
                        Let(scale, C(m, 1) / s, store_loop([&](const std::vector<Var>& vars) {
                              return jit::Load(out, index(vars)) * scale;
                            })))});
    } else if (op == "Softmax") {
      // A narrower output would round the stored exp: recompute it from the input instead.
      body = Let(s, exp_sum, Let(scale, C(m, 1) / s, store_loop([&](const std::vector<Var>& vars) {
                                   return jit::Exp(x(vars) - m) * scale;
                                 })));
    } else {
      // (x - max) - log(sum): subtracting the max first keeps large inputs exact.
      body = Let(s, exp_sum, Let(scale, jit::Log(s), store_loop([&](const std::vector<Var>& vars) {
                                   return (x(vars) - m) - scale;
                                 })));
    }
    return Let(m, jit::ReduceMax(mit, x(mv)), body);
  }));
  return Status::Ok();
}

// ---- Shape functions -------------------------------------------------------------------------

// Numpy broadcast of every present input, aligned from the right; -1 where two dims differ and
// neither is 1 (the program then fails at the allocation, naming the node).
Status BroadcastShape(ShapeFuncContext& ctx) {
  int rank = ctx.output_rank(0);
  std::vector<Stmt> stores;
  for (int d = 0; d < rank; ++d) {
    Expr dim = jit::IntImm(1);
    std::vector<std::pair<Var, Expr>> lets;
    for (int slot : PresentInputs(ctx)) {
      int a = d - (rank - ctx.input_rank(slot));
      if (a < 0) continue;
      Expr x = ctx.InputDim(slot, a);
      Var next("d" + std::to_string(d) + "_" + std::to_string(slot));
      Expr one = jit::IntImm(1);
      lets.emplace_back(next, Select(jit::Eq(x, one), dim,
                                     Select(jit::Eq(dim, one), x,
                                            Select(jit::Eq(dim, x), dim, jit::IntImm(-1)))));
      dim = next;
    }
    Stmt s = Store(ctx.out_shape(0), {jit::IntImm(d)}, dim);
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) s = Let(it->first, it->second, s);
    stores.push_back(s);
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

// Every output has input 0's shape.
Status SameShape(ShapeFuncContext& ctx) {
  std::vector<Stmt> stores;
  for (int o = 0; o < ctx.num_outputs(); ++o) {
    if (!ctx.has_output(o)) continue;
    for (int d = 0; d < ctx.input_rank(0); ++d) {
      stores.push_back(Store(ctx.out_shape(o), {jit::IntImm(d)}, ctx.InputDim(0, d)));
    }
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

}  // namespace

void AddElementwiseLowerings(LoweringTable& table) {
  constexpr int kMax = INT32_MAX;
  struct Entry {
    const char* op;
    int since;
  };
  const Entry kUnary[] = {
      {"Abs", 1},        {"Neg", 1},
      {"Relu", 1},       {"Sign", 9},
      {"Sigmoid", 1},    {"Tanh", 1},
      {"Softplus", 1},   {"Softsign", 1},
      {"Erf", 9},        {"Sqrt", 1},
      {"Reciprocal", 1}, {"Exp", 1},
      {"Log", 1},        {"Floor", 1},
      {"Ceil", 1},       {"Round", 11},
      {"Sin", 7},        {"Cos", 7},
      {"Tan", 7},        {"Asin", 7},
      {"Acos", 7},       {"Atan", 7},
      {"Sinh", 9},       {"Cosh", 9},
      {"Asinh", 9},      {"Acosh", 9},
      {"Atanh", 9},      {"LeakyRelu", 1},
      {"Elu", 1},        {"Selu", 1},
      {"Celu", 12},      {"HardSigmoid", 1},
      {"HardSwish", 14}, {"ThresholdedRelu", 10},
      {"Shrink", 9},     {"Not", 1},
      {"IsNaN", 9},      {"IsInf", 10},
      {"BitwiseNot", 18},
  };
  for (const Entry& e : kUnary) table.MustAdd({e.op, e.since, kMax, LowerUnary, SameShape});
  const Entry kBinary[] = {{"Add", 7},          {"Sub", 7},
                           {"Mul", 7},          {"Div", 7},
                           {"Mod", 10},         {"Pow", 7},
                           {"And", 7},          {"Or", 7},
                           {"Xor", 7},          {"Equal", 7},
                           {"Less", 7},         {"Greater", 7},
                           {"LessOrEqual", 12}, {"GreaterOrEqual", 12},
                           {"BitwiseAnd", 18},  {"BitwiseOr", 18},
                           {"BitwiseXor", 18},  {"BitShift", 11}};
  for (const Entry& e : kBinary) table.MustAdd({e.op, e.since, kMax, LowerBinary, BroadcastShape});
  table.MustAdd({"PRelu", 7, kMax, LowerBinary, SameShape});
  for (const char* op : {"Min", "Max", "Sum", "Mean"}) {
    table.MustAdd({op, 6, kMax, LowerVariadic, BroadcastShape});
  }
  table.MustAdd({"Where", 9, kMax, LowerWhere, BroadcastShape});
  table.MustAdd({"Cast", 6, kMax, LowerCast, SameShape});
  table.MustAdd({"CastLike", 15, kMax, LowerCast, SameShape});
  table.MustAdd({"Clip", 6, kMax, LowerClip, SameShape});
  table.MustAdd({"Identity", 1, kMax, LowerIdentity, SameShape});
  table.MustAdd({"Dropout", 7, kMax, LowerDropout, SameShape});
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    table.MustAdd({op, 1, kMax, LowerSoftmax, SameShape});
  }
}

}  // namespace kiln::compiler
