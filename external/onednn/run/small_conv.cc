// kiln's small-input-channel convolution: AVX2 + FMA code chosen at run time (the library is
// built for baseline x86-64), parallel over OpenMP's team.
//
// A first layer has C * KH * KW (3..243) products per output and 16..64 output channels, so
// its arithmetic vectorizes over output channels: per output row, for each pair of 8-channel
// output blocks and 6 columns (12 accumulators, two weight vectors and one broadcast: 15 of 16
// ymm), the loop over c, kh, kw loads the two weight vectors of the tap (packed [kb][c][kh]
// [kw][8]) and broadcasts the 6 columns' input values: 12 FMAs per 8 loads, so the FMA units
// bound it rather than the loads. Columns whose window leaves the image (the padding) take
// the same loop one column at a time over the taps that fall inside; rows, over the rows that
// do. Nothing is copied: src is read where it lies (abcd, or aBcd8b with C <= 4 in the first
// block), dst written in aBcd8b with bias and post-ops applied as each output leaves registers.
#include "external/onednn/run/small_conv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using Geometry = SmallConv::Geometry;

constexpr int kCols = 6;  // output columns per register block

// acc[b][j] += the taps kh in [kh0, kh1), kw in [kw0, kw1) of output column j (input column
// ix0 + j * S at kw = 0; input row iy0 at kh = 0) for output block b (weights `wb` floats
// after block 0's `w`). S: the width stride; XS: floats between src's columns (1: abcd, 8:
// aBcd8b).
template <int OB, int COLS, int S, int XS>
KILN_AVX2 __attribute__((always_inline)) inline void Sums(const Geometry& g, const float* src,
                                                          const float* w, int64_t wb, int64_t iy0,
                                                          int64_t ix0, int64_t kh0, int64_t kh1,
                                                          int64_t kw0, int64_t kw1,
                                                          __m256 (&out)[OB][COLS]) {
  // Accumulated in a local copy: __m256 may alias any float, so GCC keeps `out` in memory
  // across every load of src and stores each accumulator after each FMA.
  __m256 acc[OB][COLS];
  for (int b = 0; b < OB; ++b) {
    for (int j = 0; j < COLS; ++j) acc[b][j] = out[b][j];
  }
  const int64_t row_floats = g.w * XS;
  for (int64_t c = 0; c < g.c; ++c) {
    const float* plane = src + (XS == 1 ? c * g.plane : c);
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      const float* row = plane + (iy0 + kh) * row_floats + ix0 * XS;
      const float* wk = w + (c * g.kh + kh) * g.kw * 8;
      for (int64_t kw = kw0; kw < kw1; ++kw) {
        __m256 wv[OB];
#pragma GCC unroll 2
        for (int b = 0; b < OB; ++b) wv[b] = _mm256_loadu_ps(wk + kw * 8 + b * wb);
#pragma GCC unroll 6
        for (int j = 0; j < COLS; ++j) {
          const __m256 a = _mm256_broadcast_ss(row + (j * S + kw) * XS);
#pragma GCC unroll 2
          for (int b = 0; b < OB; ++b) acc[b][j] = _mm256_fmadd_ps(a, wv[b], acc[b][j]);
        }
      }
    }
  }
  for (int b = 0; b < OB; ++b) {
    for (int j = 0; j < COLS; ++j) out[b][j] = acc[b][j];
  }
}

// The 2 x kCols block of Sums over all of the kernel's width: the same sums with the 12
// accumulators in named variables (an array of them, even a local one, stays in memory: __m256
// may alias any float, and GCC stored every accumulator after each FMA, 2x slower).
template <int S, int XS>
KILN_AVX2 __attribute__((always_inline)) inline void Sums2x6(const Geometry& g, const float* src,
                                                             const float* w, int64_t wb,
                                                             int64_t iy0, int64_t ix0,
                                                             int64_t kh0, int64_t kh1,
                                                             __m256 (&out)[2][kCols]) {
  static_assert(kCols == 6, "the accumulators below are 2 x 6");
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c04 = c00, c05 = c00;
  __m256 c10 = c00, c11 = c00, c12 = c00, c13 = c00, c14 = c00, c15 = c00;
  const int64_t row_floats = g.w * XS;
  for (int64_t c = 0; c < g.c; ++c) {
    const float* plane = src + (XS == 1 ? c * g.plane : c);
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      const float* x = plane + (iy0 + kh) * row_floats + ix0 * XS;
      const float* wk = w + (c * g.kh + kh) * g.kw * 8;
      for (int64_t kw = 0; kw < g.kw; ++kw, x += XS, wk += 8) {
        const __m256 w0 = _mm256_loadu_ps(wk), w1 = _mm256_loadu_ps(wk + wb);
        __m256 a = _mm256_broadcast_ss(x);
        c00 = _mm256_fmadd_ps(a, w0, c00), c10 = _mm256_fmadd_ps(a, w1, c10);
        a = _mm256_broadcast_ss(x + S * XS);
        c01 = _mm256_fmadd_ps(a, w0, c01), c11 = _mm256_fmadd_ps(a, w1, c11);
        a = _mm256_broadcast_ss(x + 2 * S * XS);
        c02 = _mm256_fmadd_ps(a, w0, c02), c12 = _mm256_fmadd_ps(a, w1, c12);
        a = _mm256_broadcast_ss(x + 3 * S * XS);
        c03 = _mm256_fmadd_ps(a, w0, c03), c13 = _mm256_fmadd_ps(a, w1, c13);
        a = _mm256_broadcast_ss(x + 4 * S * XS);
        c04 = _mm256_fmadd_ps(a, w0, c04), c14 = _mm256_fmadd_ps(a, w1, c14);
        a = _mm256_broadcast_ss(x + 5 * S * XS);
        c05 = _mm256_fmadd_ps(a, w0, c05), c15 = _mm256_fmadd_ps(a, w1, c15);
      }
    }
  }
  out[0][0] = c00, out[0][1] = c01, out[0][2] = c02, out[0][3] = c03, out[0][4] = c04;
  out[0][5] = c05, out[1][0] = c10, out[1][1] = c11, out[1][2] = c12, out[1][3] = c13;
  out[1][4] = c14, out[1][5] = c15;
}

// Stores acc[b][j] + bias after the post-ops at dst (output block kb's column j; block b
// oh * ow * 8 floats further) for the blocks that exist (kb + 1 may be past the last), the
// padded channels of the last block as zeros.
template <int COLS>
KILN_AVX2 __attribute__((always_inline)) inline void Store(
    const Geometry& g, __m256 (&acc)[2][COLS], const float* bias,
    const std::vector<WinogradPostOp>& ops, float* dst, int64_t kb) {
  for (int b = 0; b < 2 && kb + b < g.kb; ++b) {
    const int64_t valid = std::min<int64_t>(8, g.k - (kb + b) * 8);
    const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 bv =
        bias != nullptr ? _mm256_maskload_ps(bias + (kb + b) * 8, lanes) : _mm256_setzero_ps();
    float* out = dst + b * g.oh * g.ow * 8;
    for (int j = 0; j < COLS; ++j) {
      __m256 y = _mm256_add_ps(acc[b][j], bv);
      if (!ops.empty()) y = ApplyPostOps(y, ops, out + j * 8);
      _mm256_storeu_ps(out + j * 8, _mm256_and_ps(y, _mm256_castsi256_ps(lanes)));
    }
  }
}

// Output column x of row y (input row iy0 at kh = 0, taps kh in [kh0, kh1)) for output blocks
// kb and kb + 1 over the taps inside the image's width.
template <int S, int XS>
KILN_AVX2 void Column(const Geometry& g, const float* src, const float* w, const float* bias,
                      const std::vector<WinogradPostOp>& ops, float* dst, int64_t kb,
                      int64_t iy0, int64_t kh0, int64_t kh1, int64_t x) {
  const int64_t ix0 = x * S - g.pl;
  __m256 acc[2][1] = {{_mm256_setzero_ps()}, {_mm256_setzero_ps()}};
  Sums<2, 1, S, XS>(g, src, w, g.c * g.kh * g.kw * 8, iy0, ix0, kh0, kh1,
                    std::max<int64_t>(0, -ix0), std::min(g.kw, g.w - ix0), acc);
  Store<1>(g, acc, bias, ops, dst + x * 8, kb);
}

// Output row y of image `src` for output blocks kb and kb + 1 (weights from `w`; the second
// block's are zeros past the last) into `dst` (block kb's row y).
template <int S, int XS>
KILN_AVX2 void Row(const Geometry& g, const float* src, const float* w, const float* bias,
                   const std::vector<WinogradPostOp>& ops, float* dst, int64_t kb, int64_t y) {
  const int64_t wb = g.c * g.kh * g.kw * 8;
  const int64_t iy0 = y * g.sh - g.pt;
  const int64_t kh0 = std::max<int64_t>(0, -iy0), kh1 = std::min(g.kh, g.h - iy0);
  int64_t x = 0;
  for (; x < g.x_lo; ++x) Column<S, XS>(g, src, w, bias, ops, dst, kb, iy0, kh0, kh1, x);
  for (; x + kCols <= g.x_hi; x += kCols) {
    __m256 acc[2][kCols];
    Sums2x6<S, XS>(g, src, w, wb, iy0, x * S - g.pl, kh0, kh1, acc);
    Store<kCols>(g, acc, bias, ops, dst + x * 8, kb);
  }
  for (; x < g.ow; ++x) Column<S, XS>(g, src, w, bias, ops, dst, kb, iy0, kh0, kh1, x);
}

using RowFn = void (*)(const Geometry&, const float*, const float*, const float*,
                       const std::vector<WinogradPostOp>&, float*, int64_t, int64_t);

// Row's instance for the width stride and src layout.
RowFn RowFor(const Geometry& g) {
  if (g.sw == 1) return g.blocked_src ? Row<1, 8> : Row<1, 1>;
  return g.blocked_src ? Row<2, 8> : Row<2, 1>;
}

bool Is(const memory::desc& md, memory::format_tag tag) {
  return md.data_type() == memory::data_type::f32 && md.dims().size() == 4 &&
         md == memory::desc(md.dims(), memory::data_type::f32, tag);
}

}  // namespace

SmallConv::SmallConv(const Geometry& g, std::vector<WinogradPostOp> post_ops,
                     const float* weights)
    : g_(g), post_ops_(std::move(post_ops)) {
  const int64_t taps = g.c * g.kh * g.kw;
  w_.assign(static_cast<size_t>((g.kb + 1) / 2 * 2 * taps * 8), 0.0f);  // whole block pairs
  if (weights == nullptr) return;
  for (int64_t k = 0; k < g.k; ++k) {
    for (int64_t t = 0; t < taps; ++t) w_[((k / 8) * taps + t) * 8 + k % 8] = weights[k * taps + t];
  }
}

std::shared_ptr<const SmallConv> SmallConv::Make(const KilnConvSpec& spec) {
  const memory::desc& src = spec.src;
  const memory::desc& dst = spec.dst;
  const std::vector<int64_t>& weight_dims = spec.weight_dims;
  const std::vector<int64_t>& strides = spec.strides;
  const std::vector<int64_t>& pad_l = spec.pad_l;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return nullptr;
  const bool plain = Is(src, memory::format_tag::abcd);
  if ((!plain && !Is(src, memory::format_tag::aBcd8b)) || !Is(dst, memory::format_tag::aBcd8b))
    return nullptr;
  if (weight_dims.size() != 4 || strides.size() != 2 ||
      spec.dilations != std::vector<int64_t>{0, 0} || pad_l.size() != 2)
    return nullptr;
  memory::dims in = src.dims(), out = dst.dims();
  Geometry g;
  g.n = in[0], g.c = in[1], g.h = in[2], g.w = in[3];
  g.k = out[1], g.oh = out[2], g.ow = out[3], g.kh = weight_dims[2], g.kw = weight_dims[3];
  g.sh = strides[0], g.sw = strides[1], g.pt = pad_l[0], g.pl = pad_l[1];
  auto stride_ok = [](int64_t s) { return s == 1 || s == 2; };
  if (g.c < 1 || g.c > kMaxChannels || out[0] != g.n || weight_dims[0] != g.k ||
      weight_dims[1] != g.c || g.k < 1 || g.kh < 1 || g.kw < 1 || g.oh < 1 || g.ow < 1 ||
      g.pt < 0 || g.pl < 0 || !stride_ok(g.sh) || !stride_ok(g.sw))
    return nullptr;
  // Any oh, ow is safe: rows and edge columns clamp their taps to the image (an output wholly
  // in the padding gets bias and post-ops alone), interior columns are inside by x_lo, x_hi.
  g.kb = (g.k + 7) / 8;
  g.blocked_src = !plain;
  g.plane = g.h * g.w;
  g.image = plain ? g.c * g.h * g.w : 8 * g.h * g.w;
  // Columns x whose window [x sw - pl, x sw - pl + kw) lies in [0, w).
  g.x_lo = std::min((g.pl + g.sw - 1) / g.sw, g.ow);
  const int64_t last = g.w + g.pl - g.kw;  // the largest x sw inside
  g.x_hi = last < 0 ? g.x_lo : std::clamp(last / g.sw + 1, g.x_lo, g.ow);
  g.threads = std::max(spec.threads, 1);
  return std::shared_ptr<const SmallConv>(new SmallConv(g, spec.post_ops, spec.weights));
}

void SmallConv::Run(const float* src, const float* bias, float* dst) const {
  const Geometry& g = g_;
  const RowFn row = RowFor(g);
  const int64_t pairs = (g.kb + 1) / 2, rows = g.n * g.oh, items = rows * pairs;
  const int64_t taps = g.c * g.kh * g.kw;
  const int team = std::max(1, std::min(omp_get_max_threads(), g.threads));
  // Items are (image, row, block pair), pairs fastest: a row's input window stays in L1
  // while every pair of output blocks reads it.
#pragma omp parallel for num_threads(team) schedule(static) if (team > 1 && items > 1)
  for (int64_t i = 0; i < items; ++i) {
    const int64_t r = i / pairs, kb = 2 * (i % pairs), n = r / g.oh, y = r % g.oh;
    float* out = dst + ((n * g.kb + kb) * g.oh + y) * g.ow * 8;
    row(g, src + n * g.image, w_.data() + kb * taps * 8, bias, post_ops_, out, kb, y);
  }
}

}  // namespace kiln::onednn::internal
