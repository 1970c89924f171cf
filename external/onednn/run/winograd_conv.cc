// kiln's Winograd 3x3 convolution on aBcd8b: AVX2 + FMA code chosen at run time (the library
// is built for baseline x86-64), parallel over OpenMP's team.
//
// Per block of `block` tiles: (1) the input transform V = B^T d B of each tile and 8-channel
// block (vector adds, 8 channels per AVX2 register) into V[position][cb][tile][8]; (2) for each
// of the alpha^2 positions, a GEMM [tiles x C] x [C x K] with a 6x16 register-blocked kernel
// (6 tiles x 16 output channels, 12 accumulators) into M[position][kb8][tile][8]; (3) the
// output transform A^T M A, bias and post-ops, stored into dst. Weights are transformed once,
// in double, into U[position][kb16][c][16]. One parallel region per run: each thread takes
// blocks of its own, or (when U outweighs the data: ChooseBlocking) the team transforms a
// shared block and each thread runs (2) and (3) for its own slice of K. Either way every
// output is one thread's sum in one order: results do not depend on the team size.
//
// Numerics (winograd_conv_test prints them; inputs in [-1, 1), weights in [-0.3, 0.3), the
// zoo's channel counts 3..512, outputs up to ~27): the transforms' coefficients grow with the
// tile (F(2x2): B^T and A^T entries 0 / +-1, G's 1/2; F(4x4): B^T's up to 5/2, A^T's up to 8),
// and so does the error. F(2x2)'s largest error against float64 is 1.3e-7 .. 8.7e-7 of the
// output's scale, no larger than oneDNN's direct convolution (whose is 1e-6 .. 2e-6); F(4x4)'s
// is 4e-7 .. 4.2e-6 (1.25e-5 with Lavin's points), ~2x oneDNN's: 20x inside the zoo's
// 1e-4 x scale for one layer, but summed over a deep network's layers no longer (resnet101:
// 2.3e-4 of the scale with Lavin's F(4x4) on six layers), which is why the plan builder gives
// F(4x4) only to the layers a region's error budget allows (plan_winograd.cc) and then only
// when clearly faster.
#include "external/onednn/run/winograd_conv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using Geometry = WinogradConv::Geometry;

// The transforms of F(m x m, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks"): input B^T (alpha x alpha), filter G (alpha x 3), output A^T (m x alpha).
template <int M>
struct Tr;
template <>
struct Tr<2> {
  static constexpr int kA = 4;
  static constexpr float kBT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float kAT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
// F(4x4) interpolates at 0, 1, -1, 2, -1/2 and infinity rather than Lavin's 0, +-1, +-2
// (Barabasz et al., "Error analysis and improving the accuracy of Winograd convolution for
// deep neural networks", 2020): -1/2 in place of -2 keeps A^T's and B^T's entries small
// (up to 8 and 5/2 against 8 and 5), which cuts the largest error against float64 2-3x
// (winograd_conv_test prints it) for three more adds per row pass of the input transform.
template <>
struct Tr<4> {
  static constexpr int kA = 6;
  static constexpr float kBT[6][6] = {{1, 1.5f, -2, -1.5f, 1, 0}, {0, -1, -2.5f, -0.5f, 1, 0},
                                      {0, 1, 0.5f, -2.5f, 1, 0},  {0, -0.5f, -1, 0.5f, 1, 0},
                                      {0, 2, -1, -2, 1, 0},       {0, 1, 1.5f, -2, -1.5f, 1}};
  static constexpr float kAT[4][6] = {{1, 1, 1, 1, 1, 0},
                                      {0, 1, -1, 2, -0.5f, 0},
                                      {0, 1, 1, 4, 0.25f, 0},
                                      {0, 1, -1, 8, -0.125f, 1}};
};

// G for the weight transform, in double (done once).
const double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
const double kG4[6][3] = {{1, 0, 0},
                          {-1.0 / 3, -1.0 / 3, -1.0 / 3},
                          {1.0 / 3, -1.0 / 3, 1.0 / 3},
                          {1.0 / 15, 2.0 / 15, 4.0 / 15},
                          {-16.0 / 15, 8.0 / 15, -4.0 / 15},
                          {0, 0, 1}};

// Row I of B^T (kInput) or A^T of F(M x M, 3x3), known at compile time.
template <int M, bool kInput, int I>
struct RowOf {
  static constexpr int kSize = Tr<M>::kA;
  static constexpr float At(int k) {
    if constexpr (kInput) {
      return Tr<M>::kBT[I][k];
    } else {
      return Tr<M>::kAT[I][k];
    }
  }
};

// acc + sum_k Row[k] * in[k * stride], k ascending: zeros vanish, +-1 become adds and
// subtracts, other coefficients FMAs, all decided at compile time (a loop over the row's
// values left GCC comparing and branching on every coefficient).
template <typename Row, int K = 0>
KILN_AVX2 __attribute__((always_inline)) inline __m256 RowDot(const __m256* in, int stride,
                                                              __m256 acc) {
  if constexpr (K == Row::kSize) {
    return acc;
  } else {
    constexpr float c = Row::At(K);
    const __m256* x = in + K * stride;
    if constexpr (c == 0.0f) {
      return RowDot<Row, K + 1>(in, stride, acc);
    } else if constexpr (c == 1.0f) {
      return RowDot<Row, K + 1>(in, stride, _mm256_add_ps(acc, *x));
    } else if constexpr (c == -1.0f) {
      return RowDot<Row, K + 1>(in, stride, _mm256_sub_ps(acc, *x));
    } else {
      return RowDot<Row, K + 1>(in, stride, _mm256_fmadd_ps(_mm256_set1_ps(c), *x, acc));
    }
  }
}

// out = L in for the first `Rows` rows of L (B^T or A^T), `in` A x A: out[i][j] = sum_k
// L[i][k] in[k][j], each from zero.
template <int M, bool kInput, int Rows, int I = 0>
KILN_AVX2 __attribute__((always_inline)) inline void LeftProduct(const __m256* in, __m256* out) {
  if constexpr (I < Rows) {
    constexpr int A = Tr<M>::kA;
    for (int j = 0; j < A; ++j)
      out[I * A + j] = RowDot<RowOf<M, kInput, I>>(in + j, A, _mm256_setzero_ps());
    LeftProduct<M, kInput, Rows, I + 1>(in, out);
  }
}

// out = in R^T for the first `Cols` rows of R (B^T or A^T), `in` rows x A: out[i][j] =
// sum_k in[i][k] R[j][k], each from zero (out: rows x Cols).
template <int M, bool kInput, int Rows, int Cols, int J = 0>
KILN_AVX2 __attribute__((always_inline)) inline void RightProduct(const __m256* in, __m256* out) {
  if constexpr (J < Cols) {
    constexpr int A = Tr<M>::kA;
    for (int i = 0; i < Rows; ++i)
      out[i * Cols + J] = RowDot<RowOf<M, kInput, J>>(in + i * A, 1, _mm256_setzero_ps());
    RightProduct<M, kInput, Rows, Cols, J + 1>(in, out);
  }
}

// Tile `t` of the block starting at tile `first`: image, top row and left column of its input
// window (padding included: may be negative), or false past the last tile.
bool TileOrigin(const Geometry& g, int64_t tile, int64_t* n, int64_t* y0, int64_t* x0) {
  if (tile >= g.tiles) return false;
  int64_t per_image = g.th * g.tw;
  *n = tile / per_image;
  int64_t r = tile % per_image;
  *y0 = (r / g.tw) * g.m - g.pt;
  *x0 = (r % g.tw) * g.m - g.pl;
  return true;
}

// V[.][.][t][.] = B^T d B for every channel block of tile `t` of the block at `first` (V of
// `vblock` tiles per position).
template <int M>
KILN_AVX2 void InputTile(const Geometry& g, const float* src, float* v, int64_t first, int64_t t,
                         int64_t vblock) {
  constexpr int A = Tr<M>::kA;
  int64_t n, y0, x0;
  const int64_t vstride = g.cb * vblock * 8;  // floats between positions
  if (!TileOrigin(g, first + t, &n, &y0, &x0)) {
    for (int64_t p = 0; p < A * A; ++p) {
      for (int64_t c = 0; c < g.cb; ++c)
        _mm256_store_ps(v + p * vstride + (c * vblock + t) * 8, _mm256_setzero_ps());
    }
    return;
  }
  // Most tiles lie wholly inside the image: their loads need no bounds checks.
  const bool inside = y0 >= 0 && y0 + A <= g.h && x0 >= 0 && x0 + A <= g.w;
  for (int64_t c = 0; c < g.cb; ++c) {
    const float* plane = src + ((n * g.cb + c) * g.h) * g.w * 8;
    __m256 d[A * A], tmp[A * A];
    if (inside) {
      const float* at = plane + (y0 * g.w + x0) * 8;
      for (int i = 0; i < A; ++i) {
        for (int j = 0; j < A; ++j) d[i * A + j] = _mm256_loadu_ps(at + (i * g.w + j) * 8);
      }
    } else {
      for (int i = 0; i < A; ++i) {
        int64_t y = y0 + i;
        for (int j = 0; j < A; ++j) {
          int64_t x = x0 + j;
          d[i * A + j] = (y >= 0 && y < g.h && x >= 0 && x < g.w)
                             ? _mm256_loadu_ps(plane + (y * g.w + x) * 8)
                             : _mm256_setzero_ps();
        }
      }
    }
    LeftProduct<M, true, A>(d, tmp);      // B^T d
    RightProduct<M, true, A, A>(tmp, d);  // (B^T d) B, over d
    float* at = v + (c * vblock + t) * 8;
    for (int p = 0; p < A * A; ++p) _mm256_store_ps(at + p * vstride, d[p]);
  }
}

// 6 tiles x 16 output channels over `channels` input channels: 12 accumulators held in named
// registers (an array of them made GCC spill to the stack), C in steps of one broadcast of V
// per tile (v: 8-channel blocks `vstride` floats apart, tiles 8 floats apart) and two vectors
// of U (u: 16 floats per channel). Stores the two 8-channel halves at m0 and m1.
KILN_AVX2 void Kernel6x16(const float* v, int64_t vstride, int64_t blocks, const float* u,
                          float* m0, float* m1) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t cb = 0; cb < blocks; ++cb, v += vstride) {
#pragma GCC unroll 8
    for (int ci = 0; ci < 8; ++ci, u += 16) {
      const __m256 b0 = _mm256_load_ps(u), b1 = _mm256_load_ps(u + 8);
      __m256 a = _mm256_broadcast_ss(v + ci);
      c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01);
      a = _mm256_broadcast_ss(v + 8 + ci);
      c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11);
      a = _mm256_broadcast_ss(v + 16 + ci);
      c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21);
      a = _mm256_broadcast_ss(v + 24 + ci);
      c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31);
      a = _mm256_broadcast_ss(v + 32 + ci);
      c40 = _mm256_fmadd_ps(a, b0, c40), c41 = _mm256_fmadd_ps(a, b1, c41);
      a = _mm256_broadcast_ss(v + 40 + ci);
      c50 = _mm256_fmadd_ps(a, b0, c50), c51 = _mm256_fmadd_ps(a, b1, c51);
    }
  }
  _mm256_store_ps(m0, c00), _mm256_store_ps(m1, c01);
  _mm256_store_ps(m0 + 8, c10), _mm256_store_ps(m1 + 8, c11);
  _mm256_store_ps(m0 + 16, c20), _mm256_store_ps(m1 + 16, c21);
  _mm256_store_ps(m0 + 24, c30), _mm256_store_ps(m1 + 24, c31);
  _mm256_store_ps(m0 + 32, c40), _mm256_store_ps(m1 + 32, c41);
  _mm256_store_ps(m0 + 40, c50), _mm256_store_ps(m1 + 40, c51);
}

// The GEMM of position `p` and the 16 output channels of K block `kb` over `tiles` tiles (a
// multiple of 6), 6 at a time: V holds `vblock` tiles per position ([p][cb][vblock][8]), M
// `kblocks` 16-wide K blocks per position ([p][2 * kblocks][vblock][8]), `mkb` the block's
// index among them.
void GemmPanel(const Geometry& g, const float* u, const float* v, float* mo, int64_t p, int64_t kb,
               int64_t mkb, int64_t kblocks, int64_t vblock, int64_t tiles) {
  const int64_t cp = g.cb * 8, cb = g.cb;
  const float* up = u + (p * g.kb16 + kb) * cp * 16;
  const float* vp = v + p * cb * vblock * 8;
  float* m0 = mo + ((p * kblocks * 2 + 2 * mkb) * vblock) * 8;
  float* m1 = m0 + vblock * 8;
  for (int64_t t0 = 0; t0 < tiles; t0 += 6)
    Kernel6x16(vp + t0 * 8, vblock * 8, cb, up, m0 + t0 * 8, m1 + t0 * 8);
}

// dst for tile `t` of the block at `first`: A^T M A, bias and post-ops for the output blocks
// of 8 channels from `kb_begin` (M's first) to `kb_end` (the padded channels of the last one
// written as zeros); M holds `mblocks` 8-channel blocks of `vblock` tiles per position.
template <int M>
KILN_AVX2 void OutputTile(const Geometry& g, const float* mo, const float* bias,
                          const std::vector<WinogradPostOp>& ops, float* dst, int64_t first,
                          int64_t t, int64_t kb_begin, int64_t kb_end, int64_t mblocks,
                          int64_t vblock) {
  constexpr int A = Tr<M>::kA;
  int64_t n, y0, x0;
  if (!TileOrigin(g, first + t, &n, &y0, &x0)) return;
  y0 += g.pt;  // the tile's first output row and column
  x0 += g.pl;
  const int64_t mstride = mblocks * vblock * 8;  // floats between positions
  for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
    const float* at = mo + ((kb - kb_begin) * vblock + t) * 8;
    __m256 mm[A * A], tmp[M * A];
    for (int p = 0; p < A * A; ++p) mm[p] = _mm256_load_ps(at + p * mstride);
    LeftProduct<M, false, M>(mm, tmp);      // A^T M
    RightProduct<M, false, M, M>(tmp, mm);  // (A^T M) A, over mm
    const int64_t valid = std::min<int64_t>(8, g.k - kb * 8);
    __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 b = bias != nullptr ? _mm256_maskload_ps(bias + kb * 8, lanes) : _mm256_setzero_ps();
    float* plane = dst + ((n * g.kb8 + kb) * g.oh) * g.ow * 8;
    for (int i = 0; i < M && y0 + i < g.oh; ++i) {
      for (int j = 0; j < M && x0 + j < g.ow; ++j) {
        float* out = plane + ((y0 + i) * g.ow + x0 + j) * 8;
        __m256 y = _mm256_add_ps(mm[i * M + j], b);
        y = ApplyPostOps(y, ops, out);
        _mm256_storeu_ps(out, _mm256_and_ps(y, _mm256_castsi256_ps(lanes)));
      }
    }
  }
}

bool IsBlocked8(const memory::desc& md) {
  return md.data_type() == memory::data_type::f32 && md.dims().size() == 4 &&
         md == memory::desc(md.dims(), memory::data_type::f32, memory::format_tag::aBcd8b);
}

int64_t RoundUp6(int64_t x) { return (std::max<int64_t>(x, 1) + 5) / 6 * 6; }
int64_t CeilDiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

// Tiles per block, and whether threads take K slices of shared blocks (k_sliced) rather than
// blocks of their own. A thread's V and M stay in L2 (this core's is 512 KiB: ~160 KiB for
// them, the rest for U's stream). When the weights outweigh the data (deep layers at small H,
// W), streaming all of U once per block of each thread would multiply the dominant traffic:
// then V's block is as large as ~320 KiB allows (one block for the zoo's 7x7 and 14x14
// layers), every thread reads all of it and streams only its K slice of U, once per block.
void ChooseBlocking(Geometry* g) {
  const int64_t cp = g->cb * 8, kp = g->kb16 * 16;
  g->k_sliced = g->tiles * (cp + kp) < cp * kp;
  if (g->k_sliced) {
    const int64_t fit = std::max<int64_t>((320 << 10) / (g->positions * cp * 4) / 6 * 6, 6);
    g->block = RoundUp6(CeilDiv(g->tiles, CeilDiv(g->tiles, fit)));
    // K blocks per GEMM pass: their M (~64 KiB) stays in L2 for the output transform.
    g->kgroup = std::max<int64_t>((64 << 10) / (g->positions * g->block * 16 * 4), 1);
    return;
  }
  // Balanced: the same number of blocks for every thread, as few as fit.
  const int64_t per_tile = g->positions * (cp + kp) * 4;
  const int64_t fit = std::clamp<int64_t>((160 << 10) / per_tile / 6 * 6, 6, 120);
  const int64_t per_thread = CeilDiv(g->tiles, g->threads);
  g->block = RoundUp6(CeilDiv(per_thread, CeilDiv(per_thread, fit)));
}

}  // namespace

WinogradConv::WinogradConv(const Geometry& g, std::vector<WinogradPostOp> post_ops)
    : g_(g), post_ops_(std::move(post_ops)) {
  auto round16 = [](int64_t floats) { return static_cast<size_t>((floats + 15) / 16 * 16); };
  const int64_t v = g_.positions * g_.block * g_.cb * 8;
  if (g_.k_sliced) {
    shared_floats_ = round16(v);
    per_thread_floats_ = round16(g_.positions * g_.block * g_.kgroup * 16);
  } else {
    per_thread_floats_ = round16(v + g_.positions * g_.block * g_.kb16 * 16);
  }
  scratch_bytes_ = (shared_floats_ + per_thread_floats_ * g_.threads) * sizeof(float);
}

std::shared_ptr<const WinogradConv> WinogradConv::Make(const KilnConvSpec& spec, int m) {
  const memory::desc& src = spec.src;
  const memory::desc& dst = spec.dst;
  const std::vector<int64_t>& weight_dims = spec.weight_dims;
  const std::vector<int64_t>& pad_l = spec.pad_l;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return nullptr;
  if ((m != 2 && m != 4) || !IsBlocked8(src) || !IsBlocked8(dst)) return nullptr;
  const std::vector<int64_t> three = {3, 3}, one = {1, 1}, zero = {0, 0};
  if (weight_dims.size() != 4 ||
      std::vector<int64_t>(weight_dims.begin() + 2, weight_dims.end()) != three ||
      spec.strides != one || spec.dilations != zero || pad_l.size() != 2)
    return nullptr;
  memory::dims in = src.dims(), out = dst.dims();
  Geometry g;
  g.n = in[0], g.c = in[1], g.h = in[2], g.w = in[3];
  g.k = out[1], g.oh = out[2], g.ow = out[3], g.pt = pad_l[0], g.pl = pad_l[1];
  if (out[0] != g.n || weight_dims[0] != g.k || weight_dims[1] != g.c || g.oh < 1 || g.ow < 1 ||
      g.pt < 0 || g.pl < 0)
    return nullptr;
  g.m = m, g.alpha = m + 2, g.positions = g.alpha * g.alpha;
  g.cb = (g.c + 7) / 8, g.kb16 = (g.k + 15) / 16, g.kb8 = (g.k + 7) / 8;
  g.th = (g.oh + m - 1) / m, g.tw = (g.ow + m - 1) / m, g.tiles = g.n * g.th * g.tw;
  g.threads = std::max(spec.threads, 1);
  ChooseBlocking(&g);
  std::shared_ptr<WinogradConv> conv(new WinogradConv(g, spec.post_ops));
  conv->TransformWeights(spec.weights);
  return conv;
}

// U[p][kb16][c][k % 16] = (G g G^T)[p] of weights g[k][c], in double; padded channels zero
// (all of U zero without weights).
void WinogradConv::TransformWeights(const float* weights) {
  const Geometry& g = g_;
  const int64_t cp = g.cb * 8, a = g.alpha;
  const size_t count = static_cast<size_t>(g.positions * g.kb16 * cp * 16);
  float* u = static_cast<float*>(std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64));
  if (u == nullptr) throw std::bad_alloc();
  u_.reset(u, [](float* p) { std::free(p); });
  std::fill(u, u + count, 0.0f);
  if (weights == nullptr) return;
  const double(*gm)[3] = g.m == 2 ? kG2 : kG4;
  for (int64_t k = 0; k < g.k; ++k) {
    for (int64_t c = 0; c < g.c; ++c) {
      const float* w = weights + (k * g.c + c) * 9;
      double gw[6][3];  // G g
      for (int64_t i = 0; i < a; ++i) {
        for (int j = 0; j < 3; ++j) {
          gw[i][j] = gm[i][0] * w[j] + gm[i][1] * w[3 + j] + gm[i][2] * w[6 + j];
        }
      }
      for (int64_t i = 0; i < a; ++i) {
        for (int64_t j = 0; j < a; ++j) {
          double s = gw[i][0] * gm[j][0] + gw[i][1] * gm[j][1] + gw[i][2] * gm[j][2];
          u[(((i * a + j) * g.kb16 + k / 16) * cp + c) * 16 + k % 16] = static_cast<float>(s);
        }
      }
    }
  }
}

// One block of tiles by one thread (the threads taking blocks of their own).
void WinogradConv::RunBlock(const float* src, const float* bias, float* dst, float* v, float* mo,
                            int64_t block) const {
  const int64_t first = block * g_.block, n = g_.block;
  for (int64_t t = 0; t < n; ++t) {
    g_.m == 2 ? InputTile<2>(g_, src, v, first, t, n) : InputTile<4>(g_, src, v, first, t, n);
  }
  for (int64_t p = 0; p < g_.positions; ++p) {
    for (int64_t kb = 0; kb < g_.kb16; ++kb)
      GemmPanel(g_, u_.get(), v, mo, p, kb, kb, g_.kb16, n, n);
  }
  for (int64_t t = 0; t < n; ++t) {
    g_.m == 2 ? OutputTile<2>(g_, mo, bias, post_ops_, dst, first, t, 0, g_.kb8, g_.kb16 * 2, n)
              : OutputTile<4>(g_, mo, bias, post_ops_, dst, first, t, 0, g_.kb8, g_.kb16 * 2, n);
  }
}

// The GEMMs and output transforms of one thread's 16-wide K blocks [kb_begin, kb_end) over the
// block at `first` (V transformed, shared), `g_.kgroup` K blocks at a time into its M.
void WinogradConv::RunSlice(const float* bias, float* dst, const float* v, float* mo, int64_t first,
                            int64_t kb_begin, int64_t kb_end) const {
  const int64_t n = g_.block, used = std::min(n, RoundUp6(g_.tiles - first));
  for (int64_t k0 = kb_begin; k0 < kb_end; k0 += g_.kgroup) {
    const int64_t k1 = std::min(kb_end, k0 + g_.kgroup);
    // Position-major: V's slice of a position is reused by every K block of the group.
    for (int64_t p = 0; p < g_.positions; ++p) {
      for (int64_t kb = k0; kb < k1; ++kb)
        GemmPanel(g_, u_.get(), v, mo, p, kb, kb - k0, g_.kgroup, n, used);
    }
    const int64_t o0 = 2 * k0, o1 = std::min(2 * k1, g_.kb8);
    for (int64_t t = 0; t < used; ++t) {
      g_.m == 2 ? OutputTile<2>(g_, mo, bias, post_ops_, dst, first, t, o0, o1, 2 * g_.kgroup, n)
                : OutputTile<4>(g_, mo, bias, post_ops_, dst, first, t, o0, o1, 2 * g_.kgroup, n);
    }
  }
}

void WinogradConv::Run(const float* src, const float* bias, float* dst, void* scratch) const {
  const Geometry& g = g_;
  const int64_t blocks = CeilDiv(g.tiles, g.block);
  const int team = std::max(1, std::min(omp_get_max_threads(), g.threads));
  float* shared = static_cast<float*>(scratch);
  float* own = shared + shared_floats_;
  if (!g.k_sliced) {
#pragma omp parallel num_threads(team) if (team > 1 && blocks > 1)
    {
      float* v = own + per_thread_floats_ * omp_get_thread_num();
      float* mo = v + g.positions * g.block * g.cb * 8;
#pragma omp for schedule(static)
      for (int64_t b = 0; b < blocks; ++b) RunBlock(src, bias, dst, v, mo, b);
    }
    return;
  }
  // One team for the whole convolution: per block, the tiles' input transforms split among
  // the threads, then each thread its own K slice (every output by one thread, in the same
  // order at any team size: the result does not depend on it).
#pragma omp parallel num_threads(team) if (team > 1)
  {
    const int64_t i = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t kb_begin = g.kb16 * i / threads, kb_end = g.kb16 * (i + 1) / threads;
    float* mo = own + per_thread_floats_ * i;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * g.block;
#pragma omp for schedule(static)
      for (int64_t t = 0; t < g.block; ++t) {
        g.m == 2 ? InputTile<2>(g, src, shared, first, t, g.block)
                 : InputTile<4>(g, src, shared, first, t, g.block);
      }
      RunSlice(bias, dst, shared, mo, first, kb_begin, kb_end);
      if (b + 1 < blocks) {
#pragma omp barrier
      }
    }
  }
}

const char* WinogradConv::ImplName() const {
  return g_.m == 2 ? "kiln:winograd_f2" : "kiln:winograd_f4";
}

}  // namespace kiln::onednn::internal
