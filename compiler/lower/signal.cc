// Lowerings of the signal and text-feature ops: DFT and STFT (direct O(n^2) transforms, each
// output bin one f64 reduction, angles reduced mod the length so large indices stay exact),
// MelWeightMatrix and TfIdfVectorizer, with the shape functions of their value-dependent forms.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/lower/lower.h"
#include "compiler/ops/attributes.h"
#include "jit/compute.h"

namespace kiln::compiler {
namespace {

using jit::Buffer;
using jit::Expr;
using jit::ForKind;
using jit::IntImm;
using jit::Stmt;
using jit::Var;

constexpr DType kAcc = DType::kF64;
constexpr double kPi = 3.14159265358979323846;

Expr F64(double v) { return jit::FloatImm(v, kAcc); }
Expr ToF64(const Expr& e) { return jit::Cast(kAcc, e); }
Expr ScalarInt(const NodeContext& ctx, int i) {
  std::vector<Expr> at(ctx.input_rank(i), IntImm(0));
  return jit::Cast(DType::kI64, jit::Load(ctx.in(i), at));
}

// One bin of a DFT: sum over n < count of x(n) * e^(sign * 2 pi i k n / length), real (c == 0)
// or imaginary (c == 1) part. x(n) gives (re, im) in f64.
Expr DftBin(const std::function<std::pair<Expr, Expr>(const Expr& n)>& x, const Expr& k,
            const Expr& c, const Expr& count, const Expr& length, double sign) {
  Var n("n");
  Expr angle = F64(sign * 2 * kPi) * ToF64(jit::FloorMod(k * n, length)) / ToF64(length);
  auto [re, im] = x(n);
  Expr cos = jit::Cos(angle), sin = jit::Sin(angle);
  Expr term = jit::Select(jit::Eq(c, IntImm(0)), re * cos - im * sin, re * sin + im * cos);
  return jit::Sum({{n, count}}, term);
}

// DFT along `axis` of [*, n, *, 1 | 2] (real or complex), zero-padded or truncated to
// dft_length; inverse scales by 1 / length.
Status LowerDft(LowerContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int axis,
                   DftAxis(ctx, rank, ctx.has_input(2) ? ctx.InputConstInts(2) : std::nullopt));
  ASSIGN_OR_RETURN(int64_t inverse, ctx.GetInt("inverse", 0));
  const Buffer in = ctx.in(0), out = ctx.out(0);
  Expr n_in = ctx.InputDim(0, axis);
  Expr length = ctx.has_input(1) ? ScalarInt(ctx, 1) : n_in;
  Expr complex = jit::Eq(ctx.InputDim(0, rank - 1), IntImm(2));
  Lets h("p");
  Expr len = h.Hoist(length);
  Expr count = h.Hoist(jit::Min(len, n_in));
  double scale_sign = inverse ? 1.0 : -1.0;
  ctx.SetBody(h.Wrap(jit::ComputeInto(out, [&](const std::vector<Expr>& o) {
    auto x = [&](const Expr& n) {
      std::vector<Expr> at = o;
      at[axis] = n;
      at[rank - 1] = IntImm(0);
      Expr re = ToF64(jit::Load(in, at));
      at[rank - 1] = jit::Select(complex, IntImm(1), IntImm(0));
      Expr im = jit::Select(complex, ToF64(jit::Load(in, at)), F64(0));
      return std::pair{re, im};
    };
    Expr v = DftBin(x, o[axis], o[rank - 1], count, len, scale_sign);
    if (inverse) v = v / ToF64(len);
    return v;
  })));
  return Status::Ok();
}

Status DftShape(ShapeFuncContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int axis,
                   DftAxis(ctx, rank, ctx.has_input(2) ? ctx.InputConstInts(2) : std::nullopt));
  ASSIGN_OR_RETURN(int64_t onesided, ctx.GetInt("onesided", 0));
  if (!ctx.has_input(1)) return ctx.Error("needs dft_length for a run-time shape");
  std::vector<Stmt> stores;
  for (int d = 0; d < rank; ++d) {
    Expr v = DimOf(ctx.in(0), d);
    if (d == axis) {
      Expr len = ScalarInt(ctx, 1);
      v = jit::Select(jit::Lt(len, IntImm(1)), IntImm(-1),
                      onesided ? jit::FloorDiv(len, IntImm(2)) + IntImm(1) : len);
    }
    if (d == rank - 1) v = IntImm(2);
    stores.push_back(jit::Store(ctx.out_shape(0), {IntImm(d)}, v));
  }
  ctx.SetBody(jit::Seq(stores));
  return Status::Ok();
}

// ---- STFT ---------------------------------------------------------------------------------------

// The frame length: the window's length when there is one, else the frame_length input.
Expr FrameLength(const NodeContext& ctx) {
  return ctx.has_input(2) ? ctx.InputDim(2, 0) : ScalarInt(ctx, 3);
}

// out[b, f, k, c] = DFT over n < F of signal[b, f * step + n] * window[n] (window 1 if absent).
Status LowerStft(LowerContext& ctx) {
  const Buffer in = ctx.in(0), out = ctx.out(0);
  Lets h("p");
  Expr step = h.Hoist(ScalarInt(ctx, 1));
  Expr frame = h.Hoist(FrameLength(ctx));
  Expr complex = h.Hoist(jit::Eq(ctx.InputDim(0, 2), IntImm(2)));
  ctx.SetBody(h.Wrap(jit::ComputeInto(out, [&](const std::vector<Expr>& o) {
    auto x = [&](const Expr& n) {
      Expr t = o[1] * step + n;
      Expr re = ToF64(jit::Load(in, {o[0], t, IntImm(0)}));
      Expr im = jit::Select(
          complex, ToF64(jit::Load(in, {o[0], t, jit::Select(complex, IntImm(1), IntImm(0))})),
          F64(0));
      if (ctx.has_input(2)) {
        Expr w = ToF64(jit::Load(ctx.in(2), {n}));
        re = re * w;
        im = im * w;
      }
      return std::pair{re, im};
    };
    return DftBin(x, o[2], o[3], frame, frame, -1.0);
  })));
  return Status::Ok();
}

Status StftShape(ShapeFuncContext& ctx) {
  ASSIGN_OR_RETURN(int64_t onesided, ctx.GetInt("onesided", 1));
  Expr step = ScalarInt(ctx, 1), frame = FrameLength(ctx), t = DimOf(ctx.in(0), 1);
  Expr bad =
      jit::Or(jit::Lt(step, IntImm(1)), jit::Or(jit::Lt(frame, IntImm(1)), jit::Gt(frame, t)));
  Expr frames = jit::Select(bad, IntImm(-1), jit::FloorDiv(t - frame, step) + IntImm(1));
  Expr bins = onesided ? jit::FloorDiv(frame, IntImm(2)) + IntImm(1) : frame;
  const Buffer s = ctx.out_shape(0);
  ctx.SetBody(
      jit::Seq({jit::Store(s, {IntImm(0)}, DimOf(ctx.in(0), 0)), jit::Store(s, {IntImm(1)}, frames),
                jit::Store(s, {IntImm(2)}, bins), jit::Store(s, {IntImm(3)}, IntImm(2))}));
  return Status::Ok();
}

// ---- MelWeightMatrix ----------------------------------------------------------------------------

// The triangular filters of the ONNX reference: num_mel_bins + 2 points evenly spaced on the mel
// scale between the edges, each mapped to the spectrogram bin floor((dft_length + 1) * hz /
// sample_rate); filter i rises from point i to i + 1 and falls to i + 2.
Status LowerMelWeightMatrix(LowerContext& ctx) {
  Lets h("p");
  Expr bins = h.Hoist(ScalarInt(ctx, 0)), length = h.Hoist(ScalarInt(ctx, 1));
  Expr rate = h.Hoist(ToF64(ScalarInt(ctx, 2)));
  auto mel = [](const Expr& hz) {
    return F64(2595) * jit::Log(F64(1) + hz / F64(700)) / F64(std::log(10.0));
  };
  Expr low = h.Hoist(mel(ToF64(jit::Load(ctx.in(3), {}))));
  Expr high = h.Hoist(mel(ToF64(jit::Load(ctx.in(4), {}))));
  Expr step = h.Hoist((high - low) / ToF64(bins + IntImm(2)));
  auto point = [&](const Expr& i) {
    Expr m = ToF64(i) * step + low;
    Expr hz = F64(700) * (jit::Exp(m / F64(2595) * F64(std::log(10.0))) - F64(1));
    return jit::Floor(ToF64(length + IntImm(1)) * hz / rate);
  };
  const Buffer out = ctx.out(0);
  ctx.SetBody(h.Wrap(ParallelNest(
      ctx.OutputDims(0),
      [&](const std::vector<Expr>& o) {
        Lets lets("m");
        Expr j = lets.Bind(ToF64(o[0]));
        Expr lo = lets.Bind(point(o[1])), mid = lets.Bind(point(o[1] + IntImm(1)));
        Expr hi = lets.Bind(point(o[1] + IntImm(2)));
        Expr rise = jit::Select(jit::Eq(mid, lo), F64(1), (j - lo) / (mid - lo));
        Expr fall = (hi - j) / (hi - mid);
        Expr v = jit::Select(jit::And(jit::Ge(j, mid), jit::Lt(j, hi)), fall,
                             jit::Select(jit::And(jit::Ge(j, lo), jit::Le(j, mid)), rise, F64(0)));
        return lets.Wrap(jit::Store(out, o, jit::Cast(out->dtype, v)));
      },
      ForKind::kSerial)));
  return Status::Ok();
}

Status MelWeightMatrixShape(ShapeFuncContext& ctx) {
  Expr bins = ScalarInt(ctx, 0), length = ScalarInt(ctx, 1);
  const Buffer s = ctx.out_shape(0);
  ctx.SetBody(jit::Seq(
      {jit::Store(s, {IntImm(0)},
                  jit::Select(jit::Lt(length, IntImm(1)), IntImm(-1),
                              jit::FloorDiv(length, IntImm(2)) + IntImm(1))),
       jit::Store(s, {IntImm(1)}, jit::Select(jit::Lt(bins, IntImm(1)), IntImm(-1), bins))}));
  return Status::Ok();
}

// ---- TfIdfVectorizer ----------------------------------------------------------------------------

// The n-gram pool of the attributes: gram g has items[g] (its n values) and index[g].
struct NgramPool {
  std::vector<std::vector<int64_t>> items;
  std::vector<int64_t> index;
  std::vector<float> weight;
};

StatusOr<NgramPool> ReadPool(const LowerContext& ctx) {
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> pool, ctx.GetInts("pool_int64s"));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> counts, ctx.GetInts("ngram_counts"));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> indexes, ctx.GetInts("ngram_indexes"));
  ASSIGN_OR_RETURN(std::optional<std::vector<float>> weights, ctx.GetFloats("weights"));
  if (!pool) return ctx.UnsupportedError("needs pool_int64s (string pools are not supported)");
  if (!counts || !indexes) return ctx.Error("needs ngram_counts and ngram_indexes");
  NgramPool p;
  for (size_t level = 0; level < counts->size(); ++level) {
    int64_t begin = (*counts)[level];
    int64_t end =
        level + 1 < counts->size() ? (*counts)[level + 1] : static_cast<int64_t>(pool->size());
    int64_t n = static_cast<int64_t>(level) + 1;
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool->size()) ||
        (end - begin) % n != 0)
      return ctx.Error("ngram_counts do not split pool_int64s into whole n-grams");
    for (int64_t g = begin; g < end; g += n)
      p.items.emplace_back(pool->begin() + g, pool->begin() + g + n);
  }
  if (indexes->size() != p.items.size())
    return ctx.Error("ngram_indexes has " + std::to_string(indexes->size()) + " entries for " +
                     std::to_string(p.items.size()) + " n-grams");
  if (weights && weights->size() != p.items.size())
    return ctx.Error("weights must have one entry per n-gram");
  p.index = *indexes;
  p.weight = weights ? *weights : std::vector<float>(p.items.size(), 1.0f);
  return p;
}

// ORT's counting: each n-gram of the pool with min_gram_length <= n <= max_gram_length is
// counted at every start and every skip distance d in [1, max_skip_count + 1] (items d apart);
// unigrams only once (d = 1). TF: the count; IDF: the weight where the count is not 0; TFIDF:
// count times weight. The pool is compile-time, so the kernel unrolls one count per n-gram.
Status LowerTfIdf(LowerContext& ctx) {
  ASSIGN_OR_RETURN(NgramPool pool, ReadPool(ctx));
  ASSIGN_OR_RETURN(int64_t min_n, ctx.GetInt("min_gram_length", 1));
  ASSIGN_OR_RETURN(int64_t max_n, ctx.GetInt("max_gram_length", 1));
  ASSIGN_OR_RETURN(int64_t max_skip, ctx.GetInt("max_skip_count", 0));
  ASSIGN_OR_RETURN(std::string mode, ctx.GetString("mode", "TF"));
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return ctx.Error("unknown mode '" + mode + "'");
  if (min_n < 1 || max_n < min_n || max_skip < 0) return ctx.Error("bad gram lengths or skip");
  if (pool.items.size() > 4096) return ctx.UnsupportedError("pools over 4096 n-grams");
  const Buffer in = ctx.in(0), out = ctx.out(0);
  const bool batched = ctx.input_rank(0) == 2;
  Expr len = ctx.InputDim(0, batched ? 1 : 0);
  Expr rows = batched ? ctx.InputDim(0, 0) : IntImm(1);
  // Count per output column: sum over the n-grams that map there.
  std::map<int64_t, std::vector<size_t>> by_column;
  for (size_t g = 0; g < pool.items.size(); ++g) {
    int64_t n = static_cast<int64_t>(pool.items[g].size());
    if (n >= min_n && n <= max_n) by_column[pool.index[g]].push_back(g);
  }
  auto at = [&](const Expr& row, const Expr& col) {
    return batched ? std::vector<Expr>{row, col} : std::vector<Expr>{col};
  };
  ctx.SetBody(ParallelFlat({rows}, [&](const std::vector<Expr>& r) {
    std::vector<Stmt> stores;
    Var c("c");
    stores.push_back(jit::For(c, ctx.OutputDim(0, batched ? 1 : 0), ForKind::kSerial,
                              jit::Store(out, at(r[0], c), jit::FloatImm(0, DType::kF32))));
    for (const auto& [column, grams] : by_column) {
      Expr value = jit::FloatImm(0, DType::kF32);
      for (size_t g : grams) {
        const std::vector<int64_t>& item = pool.items[g];
        int64_t n = static_cast<int64_t>(item.size());
        Expr count = IntImm(0);
        for (int64_t d = 1; d <= (n == 1 ? 1 : max_skip + 1); ++d) {
          Var i("i");
          Expr match = jit::IntImm(1, DType::kBool);
          for (int64_t k = 0; k < n; ++k) {
            Expr v = jit::Cast(DType::kI64, jit::Load(in, at(r[0], Expr(i) + IntImm(k * d))));
            match = jit::And(match, jit::Eq(v, IntImm(item[k])));
          }
          Expr starts = jit::Max(len - IntImm((n - 1) * d), IntImm(0));
          count = count + jit::Sum({{i, starts}}, jit::Select(match, IntImm(1), IntImm(0)));
        }
        Expr tf = jit::Cast(DType::kF32, count);
        Expr w = jit::FloatImm(pool.weight[g], DType::kF32);
        Expr zero = jit::FloatImm(0, DType::kF32);
        value = value + (mode == "TF"    ? tf
                         : mode == "IDF" ? jit::Select(jit::Gt(tf, zero), w, zero)
                                         : tf * w);
      }
      stores.push_back(jit::Store(out, at(r[0], IntImm(column)), value));
    }
    return jit::Seq(stores);
  }));
  return Status::Ok();
}

}  // namespace

void AddSignalLowerings(LoweringTable& table) {
  table.MustAdd({"DFT", 17, INT32_MAX, LowerDft, DftShape});
  table.MustAdd({"STFT", 17, INT32_MAX, LowerStft, StftShape});
  table.MustAdd({"MelWeightMatrix", 17, INT32_MAX, LowerMelWeightMatrix, MelWeightMatrixShape});
  table.MustAdd({"TfIdfVectorizer", 9, INT32_MAX, LowerTfIdf});
}

}  // namespace kiln::compiler
