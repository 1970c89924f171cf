// kiln's channel copy (slice / shuffle) on plain or channel-blocked layouts, parallel over
// OpenMP's team. Whole runs of channels that stay together (a slice at a block-aligned offset)
// are copied as blocks; other output blocks gather their lanes pixel by pixel.
#include "external/onednn/run/channel_gather.h"

#include <immintrin.h>
#include <omp.h>

#include <cstring>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// The channel block of `md` (dims `dims`): 1 for plain row-major, 8 or 16 for oneDNN's
// channel-blocked layouts; 0 for anything else.
int64_t BlockOf(const memory::desc& md) {
  if (md.data_type() != memory::data_type::f32) return 0;
  memory::dims dims = md.dims();
  static const tag k8[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c};
  static const tag k16[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
  static const tag kPlain[] = {tag::abc, tag::abcd, tag::abcde};
  size_t r = dims.size();
  if (r < 3 || r > 5) return 0;
  if (md == memory::desc(dims, memory::data_type::f32, kPlain[r - 3])) return 1;
  if (md == memory::desc(dims, memory::data_type::f32, k8[r - 3])) return 8;
  if (md == memory::desc(dims, memory::data_type::f32, k16[r - 3])) return 16;
  return 0;
}

int64_t RoundUp(int64_t n, int64_t b) { return (n + b - 1) / b * b; }

// One output block of B lanes over `p` pixels, lane l read from lane[l] (stride B per pixel),
// lanes from `lanes` on zero. B is a constant so the lane loop unrolls into one vector store.
template <int B>
void GatherLanes(const float* const* lane, int64_t lanes, int64_t p, float* out) {
  for (int64_t s = 0; s < p; ++s) {
    float v[B];
    for (int l = 0; l < B; ++l) v[l] = l < lanes ? lane[l][s * B] : 0.0f;
    std::memcpy(out + s * B, v, sizeof(v));
  }
}

}  // namespace

std::shared_ptr<const ChannelGather> ChannelGather::Make(const std::vector<memory::desc>& srcs,
                                                         const memory::desc& dst, int64_t group,
                                                         int64_t start) {
  int64_t block = BlockOf(dst);
  memory::dims dd = dst.dims();
  if (block == 0 || srcs.empty()) return nullptr;
  std::shared_ptr<ChannelGather> g(new ChannelGather());
  for (size_t i = 2; i < dd.size(); ++i) g->pixels_ *= dd[i];
  std::vector<Source> all;  // the concatenation's channels
  for (size_t k = 0; k < srcs.size(); ++k) {
    memory::dims sd = srcs[k].dims();
    if (BlockOf(srcs[k]) != block || sd.size() != dd.size() || sd[0] != dd[0]) return nullptr;
    for (size_t i = 2; i < sd.size(); ++i) {
      if (sd[i] != dd[i]) return nullptr;
    }
    g->src_batch_stride_.push_back(RoundUp(sd[1], block) * g->pixels_);
    for (int64_t c = 0; c < sd[1]; ++c) all.push_back({static_cast<int>(k), c});
  }
  int64_t c = static_cast<int64_t>(all.size()), count = dd[1];
  if (group < 1 || c % group != 0 || start < 0 || count < 1 || start + count > c) return nullptr;
  g->batch_ = dd[0];
  g->block_ = block;
  g->dst_batch_stride_ = RoundUp(count, block) * g->pixels_;
  g->dst_blocks_ = RoundUp(count, block) / block;
  g->count_ = count;
  int64_t per_group = c / group;
  for (int64_t k = start; k < start + count; ++k)
    g->source_.push_back(all[(k % group) * per_group + k / group]);
  if (block == 8 && __builtin_cpu_supports("avx2")) {
    for (int64_t ob = 0; ob < g->dst_blocks_; ++ob) {
      g->first_piece_.push_back(g->pieces_.size());
      for (int64_t l = 0; l < 8 && ob * 8 + l < count; ++l) {
        const Source& s = g->source_[ob * 8 + l];
        size_t i = g->first_piece_.back();
        while (i < g->pieces_.size() &&
               !(g->pieces_[i].input == s.input && g->pieces_[i].block == s.channel / 8))
          ++i;
        if (i == g->pieces_.size()) g->pieces_.push_back({s.input, s.channel / 8, {}, {}});
        g->pieces_[i].lane[l] = static_cast<int32_t>(s.channel % 8);
        g->pieces_[i].mask[l] = -1;
      }
    }
    g->first_piece_.push_back(g->pieces_.size());
  }
  return g;
}

// Output block `ob` of image `n`: per pixel, each piece's input vector permuted into place and
// blended in (lanes no piece fills stay zero: the padding).
__attribute__((target("avx2"))) void ChannelGather::RunAvx2(const float* const* srcs, float* dst,
                                                            int64_t n, int64_t ob) const {
  const int64_t p = pixels_;
  float* out = dst + n * dst_batch_stride_ + ob * 8 * p;
  size_t first = first_piece_[ob], end = first_piece_[ob + 1];
  const float* in[8];
  __m256i lane[8], mask[8];
  for (size_t i = first; i < end; ++i) {
    const Piece& pc = pieces_[i];
    in[i - first] = srcs[pc.input] + n * src_batch_stride_[pc.input] + pc.block * 8 * p;
    lane[i - first] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pc.lane));
    mask[i - first] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pc.mask));
  }
  const size_t k = end - first;
  for (int64_t s = 0; s < p; ++s) {
    __m256 v = _mm256_setzero_ps();
    for (size_t i = 0; i < k; ++i) {
      __m256 x = _mm256_permutevar8x32_ps(_mm256_loadu_ps(in[i] + s * 8), lane[i]);
      v = _mm256_blendv_ps(v, x, _mm256_castsi256_ps(mask[i]));
    }
    _mm256_storeu_ps(out + s * 8, v);
  }
}

const char* ChannelGather::ImplName() { return "kiln:channels"; }

void ChannelGather::Run(const float* const* srcs, float* dst) const {
  const int64_t b = block_, p = pixels_, blocks = batch_ * dst_blocks_;
#pragma omp parallel for schedule(static) if (omp_get_max_threads() > 1 && blocks >= 2)
  for (int64_t nb = 0; nb < blocks; ++nb) {
    int64_t n = nb / dst_blocks_, ob = nb % dst_blocks_;
    float* out = dst + n * dst_batch_stride_ + ob * b * p;
    int64_t lanes = count_ - ob * b < b ? count_ - ob * b : b;
    const Source* from = source_.data() + ob * b;
    // Lanes that are one whole block of one input, in place: one copy.
    bool run = lanes == b && from[0].channel % b == 0;
    for (int64_t l = 1; run && l < lanes; ++l)
      run = from[l].input == from[0].input && from[l].channel == from[0].channel + l;
    if (run) {
      const float* in = srcs[from[0].input] + n * src_batch_stride_[from[0].input];
      std::memcpy(out, in + from[0].channel * p, sizeof(float) * b * p);
      continue;
    }
    if (!first_piece_.empty()) {
      RunAvx2(srcs, dst, n, ob);
      continue;
    }
    const float* lane[16] = {};
    for (int64_t l = 0; l < lanes; ++l) {
      const float* in = srcs[from[l].input] + n * src_batch_stride_[from[l].input];
      lane[l] = in + (from[l].channel / b) * b * p + from[l].channel % b;
    }
    if (b == 8) {
      GatherLanes<8>(lane, lanes, p, out);
    } else {
      GatherLanes<16>(lane, lanes, p, out);
    }
  }
}

}  // namespace kiln::onednn::internal
