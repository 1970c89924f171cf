// Timing printout (not a test): kiln's small-output-channel convolution beside oneDNN's
// convolution on the zoo's output layers (src and dst aBcd8b, as in a region, the post-op the
// model fuses), interleaved run by run so a loaded machine slows both alike; microseconds,
// GMAC/s and the ratio to oneDNN. At one thread the median of the thread's CPU time; at more,
// the fastest wall time (as small_conv_bench).
//   bazel run //tests/external/onednn:small_oc_conv_bench -- [threads] [runs]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <vector>

#include "external/onednn/run/small_oc_conv.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;
using kiln::onednn::internal::SmallOcConv;
using kiln::onednn::internal::WinogradPostOp;
using Kind = WinogradPostOp::Kind;

struct Shape {
  const char* name;
  int64_t c, k, h, w, kh, kw, stride, pad_h, pad_w;
  bool post;  // a Tanh (the image layers' output activation), else none
};

const Shape kShapes[] = {
    {"fast_style 16>3 9x9", 16, 3, 136, 168, 9, 9, 1, 0, 0, false},
    {"esrgan 32>3 3x3", 32, 3, 192, 256, 3, 3, 1, 1, 1, false},
    {"esrgan 64>3 3x3", 64, 3, 192, 256, 3, 3, 1, 1, 1, false},
    {"hifigan 16>1 1x7", 16, 1, 1, 4096, 1, 7, 1, 0, 3, true},
    {"vocoder 32>1 1x7", 32, 1, 1, 8192, 1, 7, 1, 0, 3, true},
    {"dcgan phase 64>3 2x2", 64, 3, 33, 33, 2, 2, 1, 0, 0, true},
    {"seg head 64>2 1x1", 64, 2, 128, 128, 1, 1, 1, 0, 0, false},
    {"seg head 32>4 3x3", 32, 4, 128, 128, 3, 3, 1, 1, 1, false},
    {"espcn tail 32>9 3x3 (k>4)", 32, 9, 120, 160, 3, 3, 1, 1, 1, false},
};

double NowUs(bool cpu) {
  timespec ts;
  clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

double Typical(std::vector<double> v, int threads) {
  std::sort(v.begin(), v.end());
  return threads == 1 ? v[v.size() / 2] : v.front();
}

void* Buffer(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  for (size_t i = 0; i < bytes / 4; ++i) p[i] = 0.125f * static_cast<float>(i % 13) - 0.75f;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 1, runs = argc > 2 ? std::atoi(argv[2]) : 21;
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::printf("%-28s %10s %10s %8s %8s %7s  (threads %d, %d runs)\n", "shape", "onednn us",
              "kiln us", "dnn GMAC", "kiln GMAC", "ratio", threads, runs);
  for (const Shape& s : kShapes) {
    const int64_t oh = (s.h + 2 * s.pad_h - s.kh) / s.stride + 1;
    const int64_t ow = (s.w + 2 * s.pad_w - s.kw) / s.stride + 1;
    memory::dims xd = {1, s.c, s.h, s.w}, yd = {1, s.k, oh, ow};
    memory::dims wd = {s.k, s.c, s.kh, s.kw};
    memory::desc src_md(xd, memory::data_type::f32, memory::format_tag::aBcd8b);
    memory::desc dst_md(yd, memory::data_type::f32, memory::format_tag::aBcd8b);
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
        memory::desc(wd, memory::data_type::f32, memory::format_tag::any),
        memory::desc({s.k}, memory::data_type::f32, memory::format_tag::a), dst_md,
        {s.stride, s.stride}, {s.pad_h, s.pad_w}, {s.pad_h, s.pad_w});
    dnnl::post_ops po;
    if (s.post) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    dnnl::convolution_forward conv(pd);
    std::vector<float> wt(static_cast<size_t>(s.k * s.c * s.kh * s.kw), 0.01f);
    memory src(src_md, eng, Buffer(src_md.get_size())), dst(dst_md, eng, Buffer(dst_md.get_size()));
    memory w(pd.weights_desc(), eng, Buffer(pd.weights_desc().get_size()));
    memory b({{s.k}, memory::data_type::f32, memory::format_tag::a}, eng, Buffer(s.k * 4));
    std::vector<WinogradPostOp> post;
    if (s.post) post.push_back({Kind::kTanh});
    auto kiln = SmallOcConv::Make({src_md,
                                   dst_md,
                                   wt.data(),
                                   wd,
                                   {s.stride, s.stride},
                                   {0, 0},
                                   {s.pad_h, s.pad_w},
                                   post,
                                   threads});
    std::vector<double> t[2];
    for (int r = 0; r < runs + 2; ++r) {
      for (int i = 0; i < 2; ++i) {
        if (i == 1 && kiln == nullptr) continue;
        double start = NowUs(threads == 1);
        if (i == 0) {
          conv.execute(st, {{DNNL_ARG_SRC, src},
                            {DNNL_ARG_WEIGHTS, w},
                            {DNNL_ARG_BIAS, b},
                            {DNNL_ARG_DST, dst}});
          st.wait();
        } else {
          kiln->Run(static_cast<const float*>(src.get_data_handle()),
                    static_cast<const float*>(b.get_data_handle()),
                    static_cast<float*>(dst.get_data_handle()));
        }
        double us = NowUs(threads == 1) - start;
        if (r >= 2) t[i].push_back(us);
      }
    }
    const double macs = static_cast<double>(s.k * oh * ow * s.c * s.kh * s.kw);
    const double m0 = Typical(t[0], threads);
    if (kiln == nullptr) {
      std::printf("%-28s %10.0f %10s %8.1f %8s %7s  (%s; kiln declines)\n", s.name, m0, "-",
                  macs / m0 / 1e3, "-", "-", pd.impl_info_str());
      continue;
    }
    const double m1 = Typical(t[1], threads);
    std::printf("%-28s %10.0f %10.0f %8.1f %8.1f %7.2f  (%s)\n", s.name, m0, m1, macs / m0 / 1e3,
                macs / m1 / 1e3, m1 / m0, pd.impl_info_str());
  }
  return 0;
}
