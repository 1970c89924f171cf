// kiln's own 2-D max pooling on oneDNN's channel-blocked layouts: AVX2 code, chosen at run time
// (the library is built for baseline x86-64), parallel over OpenMP's team.
#include "external/onednn/run/blocked_pool.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <limits>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using Geometry = BlockedMaxPool::Geometry;

// Floats of one input row (W x block) the kernel keeps on its stack (32 KiB); wider rows run
// oneDNN's primitive.
constexpr int64_t kMaxRowFloats = 8192;

// The window of output `o` along a dim of size `n` clipped to the input: [*lo, *hi).
inline void Clip(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t n, int64_t* lo,
                 int64_t* hi) {
  int64_t start = o * stride - pad;
  *lo = std::max<int64_t>(start, 0);
  *hi = std::min<int64_t>(start + k, n);
}

// The largest of n vectors at p, p + stride, ...: m = max(x, m) keeps m when x is NaN or
// equal, as oneDNN's compare-and-blend does, and the max starts at the lowest float as
// oneDNN's does. The common window sizes are unrolled (their trip counts are known).
__attribute__((target("avx2"))) inline __m256 MaxOf(const float* p, int64_t n, int64_t stride) {
  __m256 m = _mm256_set1_ps(std::numeric_limits<float>::lowest());
  switch (n) {
    case 3:
      m = _mm256_max_ps(_mm256_loadu_ps(p), m);
      m = _mm256_max_ps(_mm256_loadu_ps(p + stride), m);
      return _mm256_max_ps(_mm256_loadu_ps(p + 2 * stride), m);
    case 2:
      m = _mm256_max_ps(_mm256_loadu_ps(p), m);
      return _mm256_max_ps(_mm256_loadu_ps(p + stride), m);
    default:
      for (int64_t i = 0; i < n; ++i) m = _mm256_max_ps(_mm256_loadu_ps(p + i * stride), m);
      return m;
  }
}

// One output row of one channel block's plane: the largest element of each window, taken
// first down the window's rows (into `row`, one vector per input column and 8 channels) and
// then across its columns.
__attribute__((target("avx2"))) void PoolRow(const Geometry& g, const float* plane, float* out,
                                             int64_t oh, float* row) {
  int64_t h0, h1;
  Clip(oh, g.sh, g.ph, g.kh, g.h, &h0, &h1);
  const int64_t pitch = g.w * g.block;
  const float* top = plane + h0 * pitch;
  for (int64_t i = 0; i < pitch; i += 8) _mm256_store_ps(row + i, MaxOf(top + i, h1 - h0, pitch));
  for (int64_t ow = 0; ow < g.ow; ++ow) {
    int64_t w0, w1;
    Clip(ow, g.sw, g.pw, g.kw, g.w, &w0, &w1);
    for (int64_t j = 0; j < g.block; j += 8)
      _mm256_storeu_ps(out + ow * g.block + j, MaxOf(row + w0 * g.block + j, w1 - w0, g.block));
  }
}

// The channel block of `md` when it is f32 [N, C, H, W] in aBcd8b or aBcd16b, else 0.
int64_t BlockOf(const memory::desc& md) {
  if (md.data_type() != memory::data_type::f32 || md.dims().size() != 4) return 0;
  if (md == memory::desc(md.dims(), memory::data_type::f32, memory::format_tag::aBcd8b)) return 8;
  if (md == memory::desc(md.dims(), memory::data_type::f32, memory::format_tag::aBcd16b))
    return 16;
  return 0;
}

// Every window along a dim (output size `out`) overlaps the input (size `in`).
bool NoEmptyWindow(int64_t in, int64_t out, int64_t k, int64_t s, int64_t pad) {
  return k - pad > 0 && (out - 1) * s - pad < in;
}

}  // namespace

std::shared_ptr<const BlockedMaxPool> BlockedMaxPool::Make(const memory::desc& src,
                                                           const memory::desc& dst,
                                                           const std::vector<int64_t>& kernel,
                                                           const std::vector<int64_t>& strides,
                                                           const std::vector<int64_t>& dilations,
                                                           const std::vector<int64_t>& pad_l) {
  if (!__builtin_cpu_supports("avx2")) return nullptr;
  int64_t block = BlockOf(src);
  if (block == 0 || BlockOf(dst) != block || kernel.size() != 2 || strides.size() != 2 ||
      pad_l.size() != 2)
    return nullptr;
  for (int64_t d : dilations) {
    if (d != 0) return nullptr;  // oneDNN's dilations: 0 is dense
  }
  memory::dims in = src.dims(), out = dst.dims();
  if (in[0] != out[0] || in[1] != out[1]) return nullptr;
  Geometry g;
  g.block = block;
  g.planes = in[0] * ((in[1] + block - 1) / block);
  g.h = in[2], g.w = in[3], g.oh = out[2], g.ow = out[3];
  g.kh = kernel[0], g.kw = kernel[1], g.sh = strides[0], g.sw = strides[1];
  g.ph = pad_l[0], g.pw = pad_l[1];
  if (g.w * g.block > kMaxRowFloats || g.sh < 1 || g.sw < 1 ||
      !NoEmptyWindow(g.h, g.oh, g.kh, g.sh, g.ph) || !NoEmptyWindow(g.w, g.ow, g.kw, g.sw, g.pw))
    return nullptr;
  return std::shared_ptr<const BlockedMaxPool>(new BlockedMaxPool(g));
}

void BlockedMaxPool::Run(const float* src, float* dst) const {
  const Geometry& g = g_;
  const int64_t rows = g.planes * g.oh;
  const int64_t in_plane = g.h * g.w * g.block, out_plane = g.oh * g.ow * g.block;
  // One output row is ~W x kh vector loads: too little to split; a team only for many rows.
#pragma omp parallel if (omp_get_max_threads() > 1 && rows >= 2 * omp_get_max_threads())
  {
    alignas(32) float row[kMaxRowFloats];
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t p = r / g.oh, oh = r % g.oh;
      PoolRow(g, src + p * in_plane, dst + p * out_plane + oh * g.ow * g.block, oh, row);
    }
  }
}

const char* BlockedMaxPool::ImplName() { return "kiln:avx2"; }

}  // namespace kiln::onednn::internal
