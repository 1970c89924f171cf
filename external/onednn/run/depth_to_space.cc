// kiln's DepthToSpace on plain or channel-blocked layouts, parallel over OpenMP's team by
// output row. Blocked DCR with whole blocks per phase (every ConvTranspose phase rewrite whose
// channels fill blocks) copies a block per output pixel; everything else computes each lane's
// source.
#include "external/onednn/run/depth_to_space.h"

#include <omp.h>

#include <cstring>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// 1 for plain row-major, 8 or 16 for nChw8c / nChw16c; 0 for anything else.
int64_t BlockOf(const memory::desc& md) {
  if (md.data_type() != memory::data_type::f32 || md.dims().size() != 4) return 0;
  const memory::dims dims = md.dims();
  if (md == memory::desc(dims, memory::data_type::f32, tag::abcd)) return 1;
  if (md == memory::desc(dims, memory::data_type::f32, tag::nChw8c)) return 8;
  if (md == memory::desc(dims, memory::data_type::f32, tag::nChw16c)) return 16;
  return 0;
}

int64_t CeilDiv(int64_t n, int64_t b) { return (n + b - 1) / b; }

}  // namespace

std::shared_ptr<const DepthToSpace> DepthToSpace::Make(const memory::desc& src,
                                                       const memory::desc& dst,
                                                       int64_t blocksize, bool crd) {
  const int64_t block = BlockOf(src);
  if (block == 0 || BlockOf(dst) != block || blocksize < 1) return nullptr;
  const memory::dims x = src.dims(), y = dst.dims();
  const int64_t s = blocksize;
  if (x[1] % (s * s) != 0 || y[0] != x[0] || y[1] != x[1] / (s * s) || y[2] != x[2] * s ||
      y[3] != x[3] * s)
    return nullptr;
  std::shared_ptr<DepthToSpace> k(new DepthToSpace());
  k->batch_ = x[0], k->channels_ = x[1], k->height_ = x[2], k->width_ = x[3];
  k->s_ = s;
  k->crd_ = crd;
  k->block_ = block;
  k->whole_blocks_ = block > 1 && !crd && y[1] % block == 0;
  return k;
}

int64_t DepthToSpace::InChannel(int64_t c, int64_t i, int64_t j) const {
  const int64_t out_c = channels_ / (s_ * s_);
  return crd_ ? c * s_ * s_ + i * s_ + j : (i * s_ + j) * out_c + c;
}

void DepthToSpace::Run(const float* src, float* dst) const {
  const int64_t s = s_, h_in = height_, w_in = width_, h_out = h_in * s, w_out = w_in * s;
  const int64_t out_c = channels_ / (s * s), b = block_;
  const int64_t out_blocks = CeilDiv(out_c, b), in_blocks = CeilDiv(channels_, b);
  const int64_t in_pixels = h_in * w_in, out_pixels = h_out * w_out;
  // One task per (image, output channel block or channel, output row).
  const int64_t rows = batch_ * out_blocks * h_out;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t oh = t % h_out, cb = t / h_out % out_blocks, n = t / h_out / out_blocks;
    const int64_t h = oh / s, i = oh % s;
    float* out = dst + ((n * out_blocks + cb) * out_pixels + oh * w_out) * b;
    if (b == 1) {  // plain: channel cb, one row
      for (int64_t j = 0; j < s; ++j) {
        const float* in = src + (n * channels_ + InChannel(cb, i, j)) * in_pixels + h * w_in;
        for (int64_t w = 0; w < w_in; ++w) out[w * s + j] = in[w];
      }
    } else if (whole_blocks_) {
      for (int64_t j = 0; j < s; ++j) {
        const int64_t ib = InChannel(cb * b, i, j) / b;
        const float* in = src + ((n * in_blocks + ib) * in_pixels + h * w_in) * b;
        for (int64_t w = 0; w < w_in; ++w)
          std::memcpy(out + (w * s + j) * b, in + w * b, sizeof(float) * b);
      }
    } else {
      for (int64_t ow = 0; ow < w_out; ++ow) {
        const int64_t w = ow / s, j = ow % s;
        float* o = out + ow * b;
        for (int64_t l = 0; l < b; ++l) {
          const int64_t c = cb * b + l;
          if (c >= out_c) {
            o[l] = 0.0f;
            continue;
          }
          const int64_t ic = InChannel(c, i, j);
          o[l] = src[((n * in_blocks + ic / b) * in_pixels + h * w_in + w) * b + ic % b];
        }
      }
    }
  }
}

const char* DepthToSpace::ImplName() { return "kiln:depth_to_space"; }

}  // namespace kiln::onednn::internal
