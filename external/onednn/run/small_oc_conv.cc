// kiln's small-output-channel convolution: AVX2 + FMA code chosen at run time (the library is
// built for baseline x86-64), parallel over OpenMP's team.
//
// An output layer has 1-4 output channels and C * KH * KW (144..1296) products per output,
// with src in aBcd8b: a pixel's 8 channels of a block are one ymm. So the arithmetic
// vectorizes over those input channels: for K output channels and P output columns of a row
// (K * P = 9..12 accumulators and K weight vectors in registers), the loop over channel
// blocks, kh, kw loads the tap's K weight vectors (packed [cb][kh][kw][k][8]) and each
// column's source vector, K * P FMAs per K + P loads. After the taps, each accumulator's
// 8 lanes are summed pairwise (three hadds for four channels at once) into the output pixel's
// 8 channels, bias and post-ops applied, lanes past K zeroed, and stored: dst is aBcd8b too.
// Columns whose window leaves the image (the padding) take the same loop one column at a time
// over the taps that fall inside; rows, over the rows that do. Nothing is copied.
#include "external/onednn/run/small_oc_conv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using Geometry = SmallOcConv::Geometry;

// A ymm of floats that, unlike __m256, may not alias float: GCC keeps arrays of them in
// registers (an __m256 array stays in memory, stored after every FMA: see small_conv.cc).
typedef float V8 __attribute__((vector_size(32)));

// The accumulators of K channels x P columns of output row y (input row iy0 at kh = 0) over
// the taps kh in [kh0, kh1), kw in [kw0, kw1), for the columns starting at input column ix0
// (at kw = 0; column j at ix0 + j * S).
template <int K, int P, int S>
KILN_AVX2 __attribute__((always_inline)) inline void Sums(const Geometry& g, const float* src,
                                                          const float* w, int64_t iy0, int64_t ix0,
                                                          int64_t kh0, int64_t kh1, int64_t kw0,
                                                          int64_t kw1, V8 (&out)[K][P]) {
  V8 acc[K][P];
  for (int k = 0; k < K; ++k) {
    for (int j = 0; j < P; ++j) acc[k][j] = V8{};
  }
  const int64_t row_floats = g.w * 8, block_floats = g.h * row_floats;
  for (int64_t cb = 0; cb < g.cb; ++cb) {
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      const float* x = src + cb * block_floats + (iy0 + kh) * row_floats + (ix0 + kw0) * 8;
      const float* wk = w + ((cb * g.kh + kh) * g.kw + kw0) * K * 8;
      for (int64_t kw = kw0; kw < kw1; ++kw, x += 8, wk += K * 8) {
        V8 wv[K];
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) wv[k] = _mm256_loadu_ps(wk + k * 8);
#pragma GCC unroll 12
        for (int j = 0; j < P; ++j) {
          const V8 a = _mm256_loadu_ps(x + j * S * 8);
#pragma GCC unroll 4
          for (int k = 0; k < K; ++k) acc[k][j] = _mm256_fmadd_ps(a, wv[k], acc[k][j]);
        }
      }
    }
  }
  for (int k = 0; k < K; ++k) {
    for (int j = 0; j < P; ++j) out[k][j] = acc[k][j];
  }
}

// The lanes of a, b, c, d summed (pairwise, in one fixed order) into lanes 0-3; 4-7 zero.
KILN_AVX2 inline __m256 LaneSums(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // [a0123 b0123 c0123 d0123 | a4567 ...]
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
  return _mm256_insertf128_ps(_mm256_setzero_ps(), s, 0);
}

// Stores columns 0..P-1 of acc (their K channels) plus bias after the post-ops at dst (column
// j at dst + j * 8), the channels past K as zeros.
template <int K, int P>
KILN_AVX2 __attribute__((always_inline)) inline void Store(V8 (&acc)[K][P], __m256 bias,
                                                           __m256 lanes,
                                                           const std::vector<WinogradPostOp>& ops,
                                                           float* dst) {
  const __m256 zero = _mm256_setzero_ps();
  for (int j = 0; j < P; ++j) {
    __m256 y = LaneSums(acc[0][j], K > 1 ? acc[K > 1 ? 1 : 0][j] : zero,
                        K > 2 ? acc[K > 2 ? 2 : 0][j] : zero, K > 3 ? acc[K > 3 ? 3 : 0][j] : zero);
    y = _mm256_add_ps(y, bias);
    if (!ops.empty()) y = ApplyPostOps(y, ops, dst + j * 8);
    _mm256_storeu_ps(dst + j * 8, _mm256_and_ps(y, lanes));
  }
}

// Output column x of row y (input row iy0 at kh = 0, taps kh in [kh0, kh1)) over the taps
// inside the image's width.
template <int K, int S>
KILN_AVX2 void Column(const Geometry& g, const float* src, const float* w, __m256 bias,
                      __m256 lanes, const std::vector<WinogradPostOp>& ops, float* dst, int64_t iy0,
                      int64_t kh0, int64_t kh1, int64_t x) {
  const int64_t ix0 = x * S - g.pl;
  V8 acc[K][1];
  Sums<K, 1, S>(g, src, w, iy0, ix0, kh0, kh1, std::max<int64_t>(0, -ix0),
                std::min(g.kw, g.w - ix0), acc);
  Store<K, 1>(acc, bias, lanes, ops, dst + x * 8);
}

// Columns [xa, xb) of output row y of image `src` into `dst` (that row of the image's
// output). An interior column computes the same in a block of P as alone (the same FMAs in the
// same order): results do not depend on where the range splits.
template <int K, int S>
KILN_AVX2 void Row(const Geometry& g, const float* src, const float* w, const float* bias,
                   const std::vector<WinogradPostOp>& ops, float* dst, int64_t y, int64_t xa,
                   int64_t xb) {
  // Columns per block: K * P accumulators and K weight vectors in registers, the source
  // vector an FMA operand. P = 4 for K = 3 (12 + 3 of 16 ymm) made GCC read the weights from
  // memory in every FMA instead: 29 GMAC/s on fast_style's output layer against 43 for P = 3.
  constexpr int P = K == 3 ? 3 : 12 / K;
  const __m256i valid =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(K), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 lanes = _mm256_castsi256_ps(valid);
  const __m256 bv = bias != nullptr ? _mm256_maskload_ps(bias, valid) : _mm256_setzero_ps();
  const int64_t iy0 = y * g.sh - g.pt;
  const int64_t kh0 = std::max<int64_t>(0, -iy0), kh1 = std::min(g.kh, g.h - iy0);
  const int64_t lo = std::clamp(g.x_lo, xa, xb), hi = std::clamp(g.x_hi, lo, xb);
  int64_t x = xa;
  for (; x < lo; ++x) Column<K, S>(g, src, w, bv, lanes, ops, dst, iy0, kh0, kh1, x);
  for (; x + P <= hi; x += P) {
    V8 acc[K][P];
    Sums<K, P, S>(g, src, w, iy0, x * S - g.pl, kh0, kh1, 0, g.kw, acc);
    Store<K, P>(acc, bv, lanes, ops, dst + x * 8);
  }
  for (; x < xb; ++x) Column<K, S>(g, src, w, bv, lanes, ops, dst, iy0, kh0, kh1, x);
}

using RowFn = void (*)(const Geometry&, const float*, const float*, const float*,
                       const std::vector<WinogradPostOp>&, float*, int64_t, int64_t, int64_t);

// Row's instance for the channel count and width stride.
template <int S>
RowFn RowForStride(int64_t k) {
  switch (k) {
    case 1:
      return Row<1, S>;
    case 2:
      return Row<2, S>;
    case 3:
      return Row<3, S>;
    default:
      return Row<4, S>;
  }
}

// Whether md is f32 in 8-channel blocks: aBcd8b, or aBc8b (1-D, taken as one row).
bool IsBlocked(const memory::desc& md) {
  const size_t rank = md.dims().size();
  if (md.data_type() != memory::data_type::f32 || (rank != 3 && rank != 4)) return false;
  return md == memory::desc(md.dims(), memory::data_type::f32,
                            rank == 4 ? memory::format_tag::aBcd8b : memory::format_tag::aBc8b);
}

// A 1-D (rank 3) dims, window or weight dims as 2-D with one row: `fill` inserted before the
// last entry (from `at` on: 2 for [N, C, W], 0 for a window's strides); 4-D ones unchanged.
std::vector<int64_t> AsRows(std::vector<int64_t> v, size_t rank, size_t at, int64_t fill) {
  if (rank == 3 && v.size() == at + 1) v.insert(v.begin() + at, fill);
  return v;
}

}  // namespace

SmallOcConv::SmallOcConv(const Geometry& g, std::vector<WinogradPostOp> post_ops,
                         const float* weights)
    : g_(g), post_ops_(std::move(post_ops)) {
  const int64_t taps = g.kh * g.kw;
  w_.assign(static_cast<size_t>(g.cb * taps * g.k * 8), 0.0f);
  if (weights == nullptr) return;
  for (int64_t k = 0; k < g.k; ++k) {
    for (int64_t c = 0; c < g.c; ++c) {
      for (int64_t t = 0; t < taps; ++t)
        w_[(((c / 8) * taps + t) * g.k + k) * 8 + c % 8] = weights[(k * g.c + c) * taps + t];
    }
  }
}

std::shared_ptr<const SmallOcConv> SmallOcConv::Make(const KilnConvSpec& spec) {
  const memory::desc& src = spec.src;
  const memory::desc& dst = spec.dst;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return nullptr;
  if (!IsBlocked(src) || !IsBlocked(dst) || src.dims().size() != dst.dims().size()) return nullptr;
  const size_t rank = src.dims().size();  // 3: a 1-D convolution, run as 2-D on one row
  const std::vector<int64_t> weight_dims = AsRows(spec.weight_dims, rank, 2, 1);
  const std::vector<int64_t> strides = AsRows(spec.strides, rank, 0, 1);
  const std::vector<int64_t> pad_l = AsRows(spec.pad_l, rank, 0, 0);
  if (weight_dims.size() != 4 || strides.size() != 2 ||
      AsRows(spec.dilations, rank, 0, 0) != std::vector<int64_t>{0, 0} || pad_l.size() != 2)
    return nullptr;
  const memory::dims in = AsRows(src.dims(), rank, 2, 1), out = AsRows(dst.dims(), rank, 2, 1);
  Geometry g;
  g.n = in[0], g.c = in[1], g.h = in[2], g.w = in[3];
  g.k = out[1], g.oh = out[2], g.ow = out[3], g.kh = weight_dims[2], g.kw = weight_dims[3];
  g.sh = strides[0], g.sw = strides[1], g.pt = pad_l[0], g.pl = pad_l[1];
  auto stride_ok = [](int64_t s) { return s == 1 || s == 2; };
  if (g.k < 1 || g.k > kMaxOutputs || g.c < 1 || out[0] != g.n || weight_dims[0] != g.k ||
      weight_dims[1] != g.c || g.kh < 1 || g.kw < 1 || g.oh < 1 || g.ow < 1 || g.pt < 0 ||
      g.pl < 0 || !stride_ok(g.sh) || !stride_ok(g.sw))
    return nullptr;
  // Any oh, ow is safe: rows and edge columns clamp their taps to the image (an output wholly
  // in the padding gets bias and post-ops alone), interior columns are inside by x_lo, x_hi.
  g.cb = (g.c + 7) / 8;
  // Columns x whose window [x sw - pl, x sw - pl + kw) lies in [0, w).
  g.x_lo = std::min((g.pl + g.sw - 1) / g.sw, g.ow);
  const int64_t last = g.w + g.pl - g.kw;  // the largest x sw inside
  g.x_hi = last < 0 ? g.x_lo : std::clamp(last / g.sw + 1, g.x_lo, g.ow);
  g.threads = std::max(spec.threads, 1);
  return std::shared_ptr<const SmallOcConv>(new SmallOcConv(g, spec.post_ops, spec.weights));
}

void SmallOcConv::Run(const float* src, const float* bias, float* dst) const {
  const Geometry& g = g_;
  const RowFn row = g.sw == 1 ? RowForStride<1>(g.k) : RowForStride<2>(g.k);
  const int64_t rows = g.n * g.oh, image = g.cb * g.h * g.w * 8;
  const int team = std::max(1, std::min(omp_get_max_threads(), g.threads));
  // Items are (image, row, column range): whole rows when there are enough of them for the
  // team, else (a 1-D convolution: one row) ranges of at least 64 columns, 4 per thread.
  const int64_t parts =
      rows >= 4 * team ? 1 : std::max<int64_t>(1, std::min<int64_t>(4 * team, g.ow / 64));
  const int64_t span = (g.ow + parts - 1) / parts, items = rows * parts;
#pragma omp parallel for num_threads(team) schedule(static) if (team > 1 && items > 1)
  for (int64_t i = 0; i < items; ++i) {
    const int64_t r = i / parts, p = i % parts, n = r / g.oh, y = r % g.oh;
    row(g, src + n * image, w_.data(), bias, post_ops_, dst + (n * g.oh + y) * g.ow * 8, y,
        std::min(g.ow, p * span), std::min(g.ow, (p + 1) * span));
  }
}

}  // namespace kiln::onednn::internal
