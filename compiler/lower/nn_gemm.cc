// The tiled GEMM loop builder and the matrix-product lowerings on it: MatMul, Gemm, Einsum.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "compiler/lower/gemm.h"
#include "compiler/lower/nn_internal.h"
#include "jit/compute.h"

namespace kiln::compiler {
namespace {

// f32 lanes of the compiling host's widest vector registers.
int64_t HostF32Lanes() {
#if defined(__x86_64__) || defined(__i386__)
  static const int64_t lanes = __builtin_cpu_supports("avx512f") ? 16 : 8;
  return lanes;
#else
  return 4;
#endif
}

}  // namespace

int64_t GemmPanelCols() {
  int64_t lanes = HostF32Lanes();
  return (lanes >= 16 ? 4 : 2) * lanes;
}

namespace nn {

using jit::Cast;
using jit::FloorDiv;
using jit::FloorMod;
using jit::Let;
using jit::Load;
using jit::Min;
using jit::Store;

namespace {

// Row tiles per parallel task: the packed B panel is reused across this many tiles.
constexpr int64_t kGroupTiles = 16;
// Bytes of packed B per chunk of K (local scratch on the task's stack).
constexpr int64_t kPackBytes = 128 * 1024;

}  // namespace

void ChooseTile(GemmSpec& spec, std::optional<int64_t> m, std::optional<int64_t> n) {
  int64_t f32_lanes = HostF32Lanes();
  int64_t lanes = DTypeSize(spec.acc) >= 8 ? f32_lanes / 2 : f32_lanes;
  spec.cols = (f32_lanes >= 16 ? 4 : 2) * lanes;
  spec.rows = 6;
  if (n && *n < spec.cols) spec.cols = std::max<int64_t>(lanes, (*n + lanes - 1) / lanes * lanes);
  if (m && *m < spec.rows) spec.rows = std::max<int64_t>(1, *m);
}

std::function<Stmt(const PackArgs&)> PackFrom(
    std::function<Expr(const Expr& b, const Expr& k, const Expr& j)> element, Expr n,
    bool k_contiguous, DType acc) {
  return [element, n, k_contiguous, acc](const PackArgs& p) {
    Var kk("kk"), jj("jj");
    Expr j = p.j0 + jj;
    // Columns past n read a valid column (clamped) and store 0.
    Expr value = jit::Select(jit::Lt(j, n), Cast(acc, element(p.b, p.k0 + kk, Min(j, n - I(1)))),
                             jit::Const(acc, 0));
    Stmt store = Store(p.pack, {kk, jj}, value);
    if (k_contiguous) {
      return jit::For(jj, I(p.cols), ForKind::kSerial,
                      jit::For(kk, p.klen, ForKind::kVectorized, store));
    }
    return jit::For(kk, p.klen, ForKind::kSerial,
                    jit::For(jj, I(p.cols), ForKind::kVectorized, store));
  };
}

namespace {

// What one tile of GemmLoops reads: the task's batch, first row and column, the K chunk, the
// chunk's packed B and the task's partial sums, and the tile's width (the spec's cols, or fewer
// whole vectors for the last panel: see GemmLoops).
struct TileContext {
  const GemmSpec& s;
  int64_t cols;
  Expr b, r0, j0, c, k0, klen;
  Buffer pack, part;
  Expr direct;  // true when the tile stores its outputs itself (last K chunk, full panel)
};

// Independent FMA chains a tile needs to keep both FMA pipes busy: an FMA's result is an input
// of the next one of its chain 4 cycles later (Zen 3, Skylake-X), and 2 issue per cycle.
constexpr int64_t kMinChains = 8;

// Accumulator sets a tile of `r` rows splits K over (k mod sets): a full 6 x 2-vector tile has
// 12 chains, but a 1-row tile (M = 1: a recurrent step, a decoder's token) has 2, one FMA per
// 2 cycles per chain pair, a quarter of the pipes; the 2-row tail of M = 50 has 4. Splitting K
// gives them 8 chains, and with 3 rows 12 accumulators (+ 2 B vectors + the broadcast, within
// AVX2's 16 registers).
int64_t KSets(const GemmSpec& s, int64_t r, int64_t cols) {
  int64_t lanes = HostF32Lanes() / (DTypeSize(s.acc) >= 8 ? 2 : 1);
  int64_t chains = r * std::max<int64_t>(1, cols / lanes);
  return std::min<int64_t>(4, std::max<int64_t>(1, (kMinChains + chains - 1) / chains));
}

// One `r` x cols tile whose first row is row `base` of the task's group, over one K chunk:
// acc from the partial sums (or 0), FMAs, back. Each call makes its own variables and scratch.
// With KSets > 1 the accumulator holds `sets` stacked r x cols sets: step k adds into set
// k mod sets, and the sets are summed into the first before the save.
Stmt Tile(const TileContext& t, int64_t r, const Expr& base) {
  const GemmSpec& s = t.s;
  const int64_t cols = t.cols, sets = KSets(s, r, cols);
  Buffer acc = Buffer::Local("acc", s.acc, {sets * r, cols});
  Var i0("i0"), ii("ii"), jz("jj");
  ForKind row_kind = ForKind::kUnrolled;
  Stmt zero = jit::For(
      ii, I(sets * r), row_kind,
      jit::For(jz, I(cols), ForKind::kVectorized, Store(acc, {ii, jz}, jit::Const(s.acc, 0))));
  Var ii2("ii"), jj2("jj");
  Stmt reload = jit::For(ii2, I(r), row_kind,
                         jit::For(jj2, I(cols), ForKind::kVectorized,
                                  Store(acc, {ii2, jj2}, Load(t.part, {base + ii2, jj2}))));
  if (sets > 1) {
    Var ii7("ii"), jj7("jj");
    reload = jit::Seq({reload, jit::For(ii7, I((sets - 1) * r), row_kind,
                                        jit::For(jj7, I(cols), ForKind::kVectorized,
                                                 Store(acc, {I(r) + ii7, jj7},
                                                       jit::Const(s.acc, 0))))});
  }
  // Step k (of the chunk) into set `set`: r rows of a broadcast A element times B's row k.
  auto step = [&](const Expr& k, const Expr& set) {
    Var ii3("ii"), jj3("jj"), a_ik("a_ik", s.acc);
    Expr a_value = Cast(s.acc, s.a(t.b, Min(i0 + ii3, s.m - I(1)), t.k0 + k));
    Expr b_kj =
        s.packed_b ? s.packed_b(FloorDiv(t.j0, I(s.cols)), t.k0 + k, jj3) : Load(t.pack, {k, jj3});
    Expr row = set * I(r) + ii3;
    Expr fma = jit::MulAdd(a_ik, b_kj, Load(acc, {row, jj3}));
    return jit::For(ii3, I(r), row_kind,
                    Let(a_ik, a_value,
                        jit::For(jj3, I(cols), ForKind::kVectorized, Store(acc, {row, jj3}, fma))));
  };
  Var kk("kk");
  Stmt accumulate = jit::For(kk, t.klen, ForKind::kSerial, step(kk, I(0)));
  if (sets > 1) {
    // `sets` steps per iteration (one per set), then the chunk's last klen mod sets steps into
    // set 0, then the sets' sum into set 0.
    Var kq("kq"), u("u"), kr("kr"), whole("whole");
    Stmt main = jit::For(kq, FloorDiv(t.klen, I(sets)), ForKind::kSerial,
                         jit::For(u, I(sets), ForKind::kUnrolled, step(kq * I(sets) + u, u)));
    Stmt rest = jit::For(kr, t.klen - whole, ForKind::kSerial, step(whole + kr, I(0)));
    Var ii8("ii"), jj8("jj");
    Expr sum = Load(acc, {ii8, jj8});
    for (int64_t set = 1; set < sets; ++set) sum = jit::Add(sum, Load(acc, {I(set * r) + ii8, jj8}));
    Stmt combine = jit::For(ii8, I(r), row_kind,
                            jit::For(jj8, I(cols), ForKind::kVectorized, Store(acc, {ii8, jj8}, sum)));
    accumulate = Let(whole, FloorDiv(t.klen, I(sets)) * I(sets), jit::Seq({main, rest, combine}));
  }
  Var ii4("ii"), jj4("jj");
  Stmt save = jit::For(ii4, I(r), row_kind,
                       jit::For(jj4, I(cols), ForKind::kVectorized,
                                Store(t.part, {base + ii4, jj4}, Load(acc, {ii4, jj4}))));
  // After the last K chunk of a full panel the tile runs the epilogue on its own rows, while
  // they are in L1, instead of a second pass over the group. It reads them back from the
  // partial sums rather than from `acc`: the registers then have one consumer, the `save`
  // above, as when every tile only saved. With `If(direct, epilogue from acc, save)` instead
  // (eec8f25), the 6 x 16 accumulators (scalars after full unrolling and SROA) fed stores in two
  // blocks, and LLVM's SLP vectorizer, which rebuilds the 8-lane vectors from those scalars,
  // grouped them across vector boundaries for some shapes (columns 5..12 of a row; N = 8000 or
  // 4000, not 8192): the K loop got xmm pieces, blends and stack spills, 2.4x the CPU time.
  // The read-back costs one L1 load per 8 outputs (the object code keeps it: 12 vector loads a
  // tile, against ~3,000 FMAs at K = 256). The tile's constant-width loops are now emitted as
  // vector operations (jit/codegen_vector.cc), so SLP no longer decides their lanes, and
  // tests/compiler/lower/gemm_codegen_test fails if any FMA of the kernel is not full width.
  Var ii6("ii"), jj6("jj");
  Stmt store = jit::For(ii6, I(r), row_kind,
                        jit::For(jj6, I(cols), ForKind::kVectorized,
                                 s.store(t.b, i0 + ii6, t.j0 + jj6,
                                         Load(t.part, {base + ii6, jj6}))));
  return Let(i0, t.r0 + base,
             jit::Allocate(acc, jit::Seq({jit::If(jit::Eq(t.c, I(0)), zero, reload), accumulate,
                                          save, jit::If(t.direct, store)})));
}

// The group's `rows_g` rows as full tiles, then the rows left over (fewer than a tile) as one
// tile of exactly that many rows: a 6-row tile over the 1 row left of M = 49 did 6x the FMAs
// of that row. A tile of few rows splits K over sets of accumulators (KSets) so that its FMA
// chains still fill the pipes.
Stmt TileRows(const TileContext& t, const Expr& rows_g) {
  const int64_t rows = t.s.rows;
  Var tt("tt"), full("full"), tail("tail");
  Stmt body = jit::For(tt, full, ForKind::kSerial, Tile(t, rows, tt * I(rows)));
  Stmt tails;  // if tail == 1 ... else if tail == rows - 1
  for (int64_t r = rows - 1; r >= 1; --r) {
    tails = jit::If(jit::Eq(tail, I(r)), Tile(t, r, full * I(rows)), tails);
  }
  if (rows > 1) body = jit::Seq({body, tails});
  return Let(full, FloorDiv(rows_g, I(rows)), Let(tail, rows_g - full * I(rows), body));
}

}  // namespace

Stmt GemmLoops(const GemmSpec& s) {
  const int64_t rows = s.rows, cols = s.cols, group = rows * kGroupTiles;
  // With a constant n whose last panel needs fewer whole vectors than a panel has (N 49 or 50:
  // three panels of 16 and one of 1 or 2 columns, as in swin_t's and vit_b_32's attention), the
  // last panel runs tiles only that many vectors wide instead of a full panel's FMAs on padding
  // (49 of 64 computed columns useful, 49 of 56 with a one-vector tail).
  const int64_t lanes = HostF32Lanes() / (DTypeSize(s.acc) >= 8 ? 2 : 1);
  const std::optional<int64_t> n_const = ConstOf(s.n);
  const int64_t tail = n_const ? *n_const % cols : 0;
  const int64_t narrow = tail > 0 ? (tail + lanes - 1) / lanes * lanes : cols;
  const int64_t kc = std::max<int64_t>(16, kPackBytes / (cols * DTypeSize(s.acc)));
  Buffer pack = Buffer::Local("pack", s.acc, {kc, cols});
  Buffer part = Buffer::Local("part", s.acc, {group, cols});
  Var t("t"), b("b"), rem("rem"), j0("j0"), r0("r0"), rows_g("rows_g"), ncols("ncols");
  Var c("c"), k0("k0"), klen("klen");
  Expr col_tiles = CeilDivE(s.n, I(cols));
  Expr row_groups = CeilDivE(s.m, I(group));
  Expr per_batch = col_tiles * row_groups;
  Expr chunks = jit::Max(CeilDivE(s.k, I(kc)), I(1));  // K = 0 still zeroes the output
  // A panel whose tiles store their outputs: as wide as its tiles.
  Expr full_panel = jit::Eq(ncols, I(cols));
  if (narrow < cols) full_panel = jit::Or(full_panel, jit::Eq(ncols, I(narrow)));
  Expr direct = jit::And(full_panel, jit::Eq(c, chunks - I(1)));
  Stmt tiles_loop =
      TileRows(TileContext{s, cols, b, r0, j0, c, k0, klen, pack, part, direct}, rows_g);
  if (narrow < cols) {
    tiles_loop = jit::If(
        jit::Eq(ncols, I(tail)),
        TileRows(TileContext{s, narrow, b, r0, j0, c, k0, klen, pack, part, direct}, rows_g),
        tiles_loop);
  }
  Stmt chunk =
      Let(k0, c * I(kc),
          Let(klen, Min(I(kc), s.k - k0),
              s.packed_b ? tiles_loop
                         : jit::Seq({s.pack(PackArgs{b, k0, klen, j0, pack, cols}), tiles_loop})));
  // A partial panel's epilogue, over the group's rows from the partial sums (the tiles of a
  // full panel stored theirs).
  Var ii5("ii"), jj5("jj");
  Stmt write = jit::If(jit::Not(full_panel),
                       jit::For(ii5, rows_g, ForKind::kSerial,
                                jit::For(jj5, ncols, ForKind::kVectorized,
                                         s.store(b, r0 + ii5, j0 + jj5, Load(part, {ii5, jj5})))));
  Stmt body = jit::Seq({jit::For(c, chunks, ForKind::kSerial, chunk), write});
  Stmt task = jit::Allocate(part, s.packed_b ? body : jit::Allocate(pack, body));
  task = Let(rows_g, Min(I(group), s.m - r0), Let(ncols, Min(I(cols), s.n - j0), task));
  // The larger operand is streamed once and the smaller one re-read from cache: with m > n, a
  // thread's contiguous run of tasks sweeps every column panel of one row group (A's rows stay
  // in L1 / L2 while all of B does too), else every row group of one column panel. Row groups
  // fastest re-read the 1.2 MB A of swin_t's first stage (M 3136, K 96, N 288) from L3 once per
  // column panel, 18 times.
  Var panels_fastest("panels_fastest", DType::kBool), slow("slow"), fast("fast");
  Expr fast_count = jit::Select(panels_fastest, col_tiles, row_groups);
  task = Let(r0, jit::Select(panels_fastest, slow, fast) * I(group),
             Let(j0, jit::Select(panels_fastest, fast, slow) * I(cols), task));
  task = Let(rem, FloorMod(t, per_batch),
             Let(panels_fastest, jit::Lt(s.n, s.m),
                 Let(slow, FloorDiv(rem, fast_count), Let(fast, FloorMod(rem, fast_count), task))));
  if (s.bind_batch) task = s.bind_batch(b, task);
  task = Let(b, FloorDiv(t, per_batch), task);
  return jit::For(t, s.batch * per_batch, ForKind::kParallel, task);
}

namespace {

// Flat row-major index of `index` over `dims`.
Expr Flatten(const std::vector<Expr>& index, const std::vector<Expr>& dims) {
  Expr flat = I(0);
  for (size_t d = 0; d < index.size(); ++d) flat = flat * dims[d] + index[d];
  return flat;
}

// Index list of `rank` zeros with the last entries replaced by `tail`. Buffers are contiguous,
// so indexing a leading dim past its size addresses the flattened tensor (row r of the
// [prod(leading), last] view is {0, ..., r, j}). For loads only: see StoreIndex.
std::vector<Expr> Flat(int rank, std::vector<Expr> tail) {
  std::vector<Expr> index(rank - tail.size(), I(0));
  index.insert(index.end(), tail.begin(), tail.end());
  return index;
}

// The real coordinates of element `flat` of a row-major tensor of dims `dims`.
std::vector<Expr> Unflatten(const Expr& flat, const std::vector<Expr>& dims) {
  std::vector<Expr> index(dims.size());
  Expr rest = flat;
  for (size_t d = dims.size(); d-- > 1;) {
    index[d] = FloorMod(rest, dims[d]);
    rest = FloorDiv(rest, dims[d]);
  }
  if (!dims.empty()) index[0] = rest;
  return index;
}

// Y's index for `flat` over Y's first `flat_dims` dims, followed by `tail`. Stores name elements
// by their real coordinates, never by overflowing a leading dim as Flat does: a fused epilogue
// (compiler/lower/fusion.cc) loads its other operands at the index the kernel stores to, and a
// broadcast operand ([1, S, S] added to [B*H, S, S]) would otherwise be read out of bounds.
// The division this costs is per stored row (hoisted out of the vectorized column loop).
std::vector<Expr> StoreIndex(const std::vector<Expr>& y_dims, size_t flat_dims, const Expr& flat,
                             std::vector<Expr> tail) {
  std::vector<Expr> index =
      Unflatten(flat, std::vector<Expr>(y_dims.begin(), y_dims.begin() + flat_dims));
  index.insert(index.end(), tail.begin(), tail.end());
  return index;
}

// Gemm's epilogue: Y[i, j] = alpha * acc + beta * C (C, when `has_c`, broadcast to Y's last
// two dims; Y of rank `rank`, its rows flattened).
std::function<Stmt(const Expr&, const Expr&, const Expr&, const Expr&)> StoreWithC(
    LowerContext& ctx, DType acc, float alpha, bool has_c, float beta, int rank) {
  Buffer Y = ctx.out(0), C = has_c ? ctx.in(2) : Buffer();
  DType out_type = ctx.output_dtype(0);
  std::vector<jit::BroadcastDim> hints =
      has_c ? BroadcastHints(ctx.input_shape(2), ctx.output_shape(0))
            : std::vector<jit::BroadcastDim>();
  std::vector<Expr> y_dims = ctx.OutputDims(0);
  return [=](const Expr&, const Expr& i, const Expr& j, const Expr& v) {
    Expr value = alpha == 1.0f ? v : jit::Mul(v, jit::Const(acc, alpha));
    if (has_c) {
      Expr c = Cast(acc, jit::BroadcastLoad(C, {i, j}, hints));
      value = jit::Add(value, beta == 1.0f ? c : jit::Mul(c, jit::Const(acc, beta)));
    }
    return Store(Y, StoreIndex(y_dims, rank - 1, i, {j}), Cast(out_type, value));
  };
}

}  // namespace

Status LowerMatMul(LowerContext& ctx) {
  const int ra = ctx.input_rank(0), rb = ctx.input_rank(1), ro = ctx.output_rank(0);
  const bool a_vec = ra == 1, b_vec = rb == 1;
  Buffer A = ctx.in(0), B = ctx.in(1), Y = ctx.out(0);
  DType out_type = ctx.output_dtype(0);
  GemmSpec s;
  s.acc = AccType(out_type);
  s.m = a_vec ? I(1) : ctx.InputDim(0, ra - 2);
  s.k = ctx.InputDim(0, ra - 1);
  s.n = b_vec ? I(1) : ctx.InputDim(1, rb - 1);
  Expr n = s.n, k = s.k;
  if (rb <= 2 && ConstOf(s.n) == 1 && ra >= 2) {
    // Matrix-vector: one vectorized dot product per row (a GEMM tile would be mostly padding).
    Expr rows = s.m;
    for (int d = 0; d + 2 < ra; ++d) rows = rows * ctx.InputDim(0, d);
    DType acc = s.acc;
    Var r("r"), kk("k");
    Expr dot = jit::Sum(
        {{kk, k}},
        jit::Mul(Cast(acc, Load(A, Flat(ra, {r, kk}))),
                 Cast(acc, Load(B, b_vec ? std::vector<Expr>{kk} : std::vector<Expr>{kk, I(0)}))));
    std::vector<Expr> y_dims = ctx.OutputDims(0);
    std::vector<Expr> out_index =
        b_vec ? StoreIndex(y_dims, ro, r, {}) : StoreIndex(y_dims, ro - 1, r, {I(0)});
    ctx.SetBody(jit::For(r, rows, ForKind::kParallel, Store(Y, out_index, Cast(out_type, dot))));
    return Status::Ok();
  }
  if (rb <= 2) {
    // B has no batch dims: A's batch dims fold into its rows.
    for (int d = 0; d + 2 < ra; ++d) s.m = s.m * ctx.InputDim(0, d);
    s.batch = I(1);
    s.a = [A, ra](const Expr&, const Expr& i, const Expr& kk) {
      return ra == 1 ? Load(A, {kk}) : Load(A, Flat(ra, {i, kk}));
    };
    s.pack = PackFrom(
        [B, b_vec](const Expr&, const Expr& kk, const Expr& j) {
          return b_vec ? Load(B, {kk}) : Load(B, {kk, j});
        },
        n, false, s.acc);
    std::vector<Expr> y_dims = ctx.OutputDims(0);
    s.store = [Y, ro, b_vec, out_type, y_dims](const Expr&, const Expr& i, const Expr& j,
                                               const Expr& v) {
      // Rows are A's batch dims and m flattened: Y's leading dims (all of them with a vector B).
      std::vector<Expr> index = b_vec             ? StoreIndex(y_dims, ro, i, {})
                                : ro == 1         ? std::vector<Expr>{j}
                                                  : StoreIndex(y_dims, ro - 1, i, {j});
      return Store(Y, index, Cast(out_type, v));
    };
  } else {
    const int obr = ro - (a_vec ? 0 : 1) - 1;  // b_vec is impossible here
    std::vector<Expr> out_batch;
    for (int d = 0; d < obr; ++d) out_batch.push_back(ctx.OutputDim(0, d));
    s.batch = I(1);
    for (const Expr& d : out_batch) s.batch = s.batch * d;
    // Flat batch index of an operand from the output's batch index (size-1 dims broadcast).
    auto operand_batch = [&ctx, out_batch, obr](int input, int batch_rank, const Expr& b) {
      std::vector<Expr> out_index(obr);
      Expr rest = b;
      for (int d = obr - 1; d >= 0; --d) {
        out_index[d] = FloorMod(rest, out_batch[d]);
        rest = FloorDiv(rest, out_batch[d]);
      }
      std::vector<Expr> index, dims;
      for (int d = 0; d < batch_rank; ++d) {
        Expr dim = ctx.InputDim(input, d);
        Expr o = out_index[obr - batch_rank + d];
        const DimExpr& sym = ctx.input_shape(input)[d];
        if (sym.is_const() && sym.const_value() == 1) {
          o = I(0);
        } else if (!(sym == ctx.output_shape(0)[obr - batch_rank + d])) {
          o = jit::Select(jit::Eq(dim, I(1)), I(0), o);
        }
        index.push_back(o);
        dims.push_back(dim);
      }
      return Flatten(index, dims);
    };
    Var a_row0("a_row0"), b_k0("b_k0");
    Expr m = s.m;
    s.a = [A, ra, a_row0](const Expr&, const Expr& i, const Expr& kk) {
      return ra == 1 ? Load(A, {kk}) : Load(A, Flat(ra, {a_row0 + i, kk}));
    };
    s.pack = PackFrom(
        [B, rb, b_k0](const Expr&, const Expr& kk, const Expr& j) {
          return Load(B, Flat(rb, {b_k0 + kk, j}));
        },
        n, false, s.acc);
    s.store = [Y, a_vec, out_batch, out_type](const Expr& b, const Expr& i, const Expr& j,
                                              const Expr& v) {
      std::vector<Expr> tail = a_vec ? std::vector<Expr>{j} : std::vector<Expr>{i, j};
      return Store(Y, StoreIndex(out_batch, out_batch.size(), b, tail), Cast(out_type, v));
    };
    s.bind_batch = [=](const Expr& b, Stmt body) {
      Expr a_off = ra >= 3 ? operand_batch(0, ra - 2, b) * m : I(0);
      return Let(a_row0, a_off, Let(b_k0, operand_batch(1, rb - 2, b) * k, std::move(body)));
    };
  }
  ChooseTile(s, ConstOf(s.m), ConstOf(s.n));
  ctx.SetBody(GemmLoops(s));
  return Status::Ok();
}

Status LowerGemm(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int64_t trans_a, ctx.GetInt("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, ctx.GetInt("transB", 0));
  ASSIGN_OR_RETURN(float alpha, ctx.GetFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(float beta, ctx.GetFloat("beta", 1.0f));
  Buffer A = ctx.in(0), B = ctx.in(1);
  DType out_type = ctx.output_dtype(0);
  GemmSpec s;
  s.acc = AccType(out_type);
  s.batch = I(1);
  s.m = ctx.OutputDim(0, 0);
  s.n = ctx.OutputDim(0, 1);
  s.k = ctx.InputDim(0, trans_a ? 0 : 1);
  s.a = [A, trans_a](const Expr&, const Expr& i, const Expr& kk) {
    return trans_a ? Load(A, {kk, i}) : Load(A, {i, kk});
  };
  s.pack = PackFrom(
      [B, trans_b](const Expr&, const Expr& kk, const Expr& j) {
        return trans_b ? Load(B, {j, kk}) : Load(B, {kk, j});
      },
      s.n, trans_b != 0, s.acc);
  s.store = StoreWithC(ctx, s.acc, alpha, ctx.has_input(2) && beta != 0, beta, 2);
  ChooseTile(s, ConstOf(s.m), ConstOf(s.n));
  ctx.SetBody(GemmLoops(s));
  return Status::Ok();
}

// kiln::PackedMatMul(A [..., K], Bp [P, K, cols], C?) with attribute n: Y[..., j] =
// sum_k A[..., k] * Bp[j / cols, k, j % cols] (+ C broadcast to Y, 2-D A only). The weights were
// packed at compile time (compiler/passes/pack_weights) in the panels this GEMM's tiles read,
// so a call streams each panel contiguously and packs nothing.
Status LowerPackedMatMul(LowerContext& ctx) {
  const int ra = ctx.input_rank(0), ro = ctx.output_rank(0);
  if (ra < 2 || ctx.input_rank(1) != 3)
    return InvalidArgument("PackedMatMul needs A of rank >= 2 and packed B of rank 3");
  std::optional<int64_t> cols = ConstOf(ctx.InputDim(1, 2));
  if (!cols) return InvalidArgument("PackedMatMul: the panel width must be static");
  Buffer A = ctx.in(0), Bp = ctx.in(1);
  DType out_type = ctx.output_dtype(0);
  GemmSpec s;
  s.acc = AccType(out_type);
  s.batch = I(1);
  s.m = ctx.InputDim(0, ra - 2);
  for (int d = 0; d + 2 < ra; ++d) s.m = s.m * ctx.InputDim(0, d);
  s.k = ctx.InputDim(0, ra - 1);
  s.n = ctx.OutputDim(0, ro - 1);
  s.a = [A, ra](const Expr&, const Expr& i, const Expr& kk) { return Load(A, Flat(ra, {i, kk})); };
  s.packed_b = [Bp](const Expr& panel, const Expr& kk, const Expr& jj) {
    return Load(Bp, {panel, kk, jj});
  };
  if (ctx.has_input(2) && ra != 2) return InvalidArgument("PackedMatMul: C needs a 2-D A");
  s.store = StoreWithC(ctx, s.acc, 1.0f, ctx.has_input(2), 1.0f, ro);
  ChooseTile(s, ConstOf(s.m), std::nullopt);
  s.cols = *cols;
  ctx.SetBody(GemmLoops(s));
  return Status::Ok();
}

// ---- Einsum ----------------------------------------------------------------------------------

namespace {

struct EinsumPlan {
  std::vector<std::vector<char>> terms;  // per operand: one label per dim (ellipsis expanded)
  std::vector<char> out;                 // output labels
};

// The equation (parsed once, compiler/ops/attributes.h) with one label per operand dim:
// ellipsis dims get labels '0'..'9' right-aligned across operands (numpy broadcasting).
StatusOr<EinsumPlan> PlanEinsum(const LowerContext& ctx) {
  ASSIGN_OR_RETURN(EinsumEquation eq, ParseEinsumEquation(ctx.node()));
  int ell_rank = 0;
  std::vector<int> ells;
  for (size_t t = 0; t < eq.inputs.size(); ++t) {
    std::optional<int> ell = eq.inputs[t].EllipsisRank(ctx.input_rank(static_cast<int>(t)));
    if (!ell)
      return ctx.Error("equation '" + eq.text + "': operand " + std::to_string(t) +
                       " does not match its rank");
    if (*ell > 10) return ctx.UnsupportedError("more than 10 ellipsis dims");
    ell_rank = std::max(ell_rank, *ell);
    ells.push_back(*ell);
  }
  auto expand = [ell_rank](const EinsumEquation::Term& term, int ell) {
    std::vector<char> labels;
    for (size_t c = 0; c <= term.labels.size(); ++c) {
      if (static_cast<int>(c) == term.ellipsis_at) {
        for (int e = 0; e < ell; ++e) labels.push_back(static_cast<char>('0' + e + ell_rank - ell));
      }
      if (c < term.labels.size()) labels.push_back(term.labels[c]);
    }
    return labels;
  };
  EinsumPlan plan;
  for (size_t t = 0; t < eq.inputs.size(); ++t) plan.terms.push_back(expand(eq.inputs[t], ells[t]));
  plan.out = expand(eq.output, ell_rank);
  return plan;
}

}  // namespace

namespace {

// Two operands whose labels split into batch (both + output), M (A + output), N (B + output) and
// K (A + B) with at most one M, N and K label, no repeated label within an operand and dims that
// agree symbolically: a batched GEMM ("bij,bjk->bik", "BFNH,BTNH->BNFT", "ij,kj->ik").
bool EinsumAsGemm(LowerContext& ctx, const EinsumPlan& plan) {
  if (plan.terms.size() != 2) return false;
  const std::vector<char>&ta = plan.terms[0], &tb = plan.terms[1], &to = plan.out;
  auto has = [](const std::vector<char>& t, char l) { return std::count(t.begin(), t.end(), l); };
  std::map<char, DimExpr> dim;
  for (int t = 0; t < 2; ++t) {
    for (size_t d = 0; d < plan.terms[t].size(); ++d) {
      char l = plan.terms[t][d];
      const DimExpr& e = ctx.input_shape(t)[d];
      if (has(plan.terms[t], l) != 1) return false;
      auto it = dim.find(l);
      if (it != dim.end() && !(it->second == e)) return false;  // broadcasting: direct form
      dim.emplace(l, e);
    }
  }
  std::vector<char> batch, m, n, k;
  for (char l : to) {
    if (has(to, l) != 1) return false;
    bool a = has(ta, l), b = has(tb, l);
    (a && b ? batch : a ? m : b ? n : k).push_back(l);
    if (!a && !b) return false;
  }
  for (char l : ta) {
    if (!has(to, l)) {
      if (!has(tb, l)) return false;  // summed within A alone: direct form
      k.push_back(l);
    }
  }
  for (char l : tb)
    if (!has(to, l) && !has(ta, l)) return false;
  if (m.size() > 1 || n.size() > 1 || k.size() > 1) return false;
  DType out_type = ctx.output_dtype(0);
  auto extent = [&](const std::vector<char>& ls) {
    Expr e = I(1);
    for (char l : ls) {
      const DimExpr& d = dim.at(l);
      // A dim of the operands: as a constant, or read from the first operand holding it.
      if (d.is_const()) {
        e = e * I(d.const_value());
      } else {
        for (int t = 0; t < 2; ++t) {
          auto it = std::find(plan.terms[t].begin(), plan.terms[t].end(), l);
          if (it != plan.terms[t].end()) {
            e = e * DimOf(ctx.in(t), static_cast<int>(it - plan.terms[t].begin()));
            break;
          }
        }
      }
    }
    return e;
  };
  std::map<char, Var> batch_vars;
  for (char l : batch) batch_vars.emplace(l, Var(std::string("b_") + l));
  std::vector<Expr> batch_dims;
  for (char l : batch) batch_dims.push_back(extent({l}));
  auto index = [&](const std::vector<char>& term, const Expr& i, const Expr& j, const Expr& kk) {
    std::vector<Expr> idx;
    for (char l : term) {
      if (batch_vars.count(l)) {
        idx.push_back(batch_vars.at(l));
      } else if (!m.empty() && l == m[0]) {
        idx.push_back(i);
      } else if (!n.empty() && l == n[0]) {
        idx.push_back(j);
      } else {
        idx.push_back(kk);
      }
    }
    return idx;
  };
  Buffer A = ctx.in(0), B = ctx.in(1), Y = ctx.out(0);
  GemmSpec s;
  s.acc = AccType(out_type);
  s.batch = extent(batch);
  s.m = extent(m);
  s.n = extent(n);
  s.k = extent(k);
  s.a = [=](const Expr&, const Expr& i, const Expr& kk) {
    return Load(A, index(ta, i, Expr(), kk));
  };
  bool k_last = !k.empty() && !tb.empty() && tb.back() == k[0];
  s.pack = PackFrom(
      [=](const Expr&, const Expr& kk, const Expr& j) { return Load(B, index(tb, Expr(), j, kk)); },
      s.n, k_last, s.acc);
  s.store = [=](const Expr&, const Expr& i, const Expr& j, const Expr& v) {
    return Store(Y, index(to, i, j, Expr()), Cast(out_type, v));
  };
  s.bind_batch = [=](const Expr& b, Stmt body) {
    Expr rest = b;
    for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
      body = Let(batch_vars.at(batch[d]), d == 0 ? rest : FloorMod(rest, batch_dims[d]), body);
      rest = FloorDiv(rest, batch_dims[d]);
    }
    return body;
  };
  ChooseTile(s, ConstOf(s.m), ConstOf(s.n));
  ctx.SetBody(GemmLoops(s));
  return true;
}

}  // namespace

// Matmul-like equations run on the tiled GEMM; anything else (diagonals, single-operand sums and
// transposes, broadcasting ellipses, three or more operands) on the direct form: every output
// element is a sum, over the labels not in the output, of the product of the operands.
Status LowerEinsum(LowerContext& ctx) {
  ASSIGN_OR_RETURN(EinsumPlan plan, PlanEinsum(ctx));
  if (EinsumAsGemm(ctx, plan)) return Status::Ok();
  DType out_type = ctx.output_dtype(0);
  DType acc = AccType(out_type);
  // Extent of each label: the largest of its dims (size-1 ellipsis dims broadcast).
  std::map<char, Expr> extent;
  for (size_t t = 0; t < plan.terms.size(); ++t) {
    for (size_t d = 0; d < plan.terms[t].size(); ++d) {
      Expr dim = ctx.InputDim(static_cast<int>(t), static_cast<int>(d));
      char l = plan.terms[t][d];
      extent[l] = extent.count(l) ? jit::Max(extent[l], dim) : dim;
    }
  }
  std::set<char> in_out(plan.out.begin(), plan.out.end());
  std::vector<char> summed;
  for (auto& [l, e] : extent)
    if (!in_out.count(l)) summed.push_back(l);
  ctx.SetCompute(0, [&](const std::vector<Expr>& index) {
    std::map<char, Expr> value_of;
    for (size_t d = 0; d < plan.out.size(); ++d) value_of[plan.out[d]] = index[d];
    std::vector<jit::IterVar> axes;
    for (char l : summed) {
      Var v(std::string("s_") + (std::isalpha(static_cast<unsigned char>(l)) ? l : 'e'));
      axes.push_back({v, extent[l]});
      value_of[l] = v;
    }
    Expr product;
    for (size_t t = 0; t < plan.terms.size(); ++t) {
      std::vector<Expr> idx;
      for (size_t d = 0; d < plan.terms[t].size(); ++d) {
        char l = plan.terms[t][d];
        Expr i = value_of[l];
        if (l >= '0' && l <= '9') {  // ellipsis dims may broadcast
          Expr dim = ctx.InputDim(static_cast<int>(t), static_cast<int>(d));
          if (!(ConstOf(dim) && !(*ConstOf(dim) == 1))) {
            i = jit::Select(jit::Eq(dim, I(1)), I(0), i);
          }
        }
        idx.push_back(i);
      }
      Expr x = Cast(acc, Load(ctx.in(static_cast<int>(t)), idx));
      product = product ? jit::Mul(product, x) : x;
    }
    return axes.empty() ? product : jit::Sum(axes, product);
  });
  return Status::Ok();
}

}  // namespace nn
}  // namespace kiln::compiler
