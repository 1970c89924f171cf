// Timing printout (not a test): kiln's small-input-channel convolution beside oneDNN's
// convolution on the zoo's first layers (src abcd, dst aBcd8b, the post-op the model fuses),
// interleaved run by run so a loaded machine slows both alike; microseconds, GMAC/s and the
// ratio to oneDNN. At one thread the median of the thread's CPU time; at more, the fastest
// wall time (as winograd_bench).
//   bazel run //tests/external/onednn:small_conv_bench -- [threads] [runs]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <vector>

#include "external/onednn/run/small_conv.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;
using kiln::onednn::internal::SmallConv;
using kiln::onednn::internal::WinogradPostOp;
using Kind = WinogradPostOp::Kind;

struct Shape {
  const char* name;
  int64_t c, k, h, w, kernel, stride;
  Kind post;
};

const Shape kShapes[] = {
    {"espcn_x3 1>64 5x5", 1, 64, 120, 160, 5, 1, Kind::kTanh},
    {"fast_style 3>32 9x9", 3, 32, 128, 160, 9, 1, Kind::kRelu},
    {"resnet 3>64 7x7/2", 3, 64, 224, 224, 7, 2, Kind::kRelu},
    {"mobilenet_v2 3>32 3x3/2", 3, 32, 224, 224, 3, 2, Kind::kClip},
    {"effnet_v2_s 3>24 3x3/2", 3, 24, 192, 192, 3, 2, Kind::kSwish},
    {"effnet_b0 3>32 3x3/2", 3, 32, 224, 224, 3, 2, Kind::kSwish},
    {"mnv3 3>16 3x3/2", 3, 16, 224, 224, 3, 2, Kind::kHardSwish},
    {"crnn 1>64 3x3", 1, 64, 32, 160, 3, 1, Kind::kRelu},
    {"yolo 3>16 3x3/2", 3, 16, 192, 256, 3, 2, Kind::kSwish},
    {"unet 3>16 3x3", 3, 16, 128, 128, 3, 1, Kind::kRelu},
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

dnnl::algorithm Algorithm(Kind k) {
  switch (k) {
    case Kind::kTanh: return dnnl::algorithm::eltwise_tanh;
    case Kind::kClip: return dnnl::algorithm::eltwise_clip;
    case Kind::kSwish: return dnnl::algorithm::eltwise_swish;
    case Kind::kHardSwish: return dnnl::algorithm::eltwise_hardswish;
    default: return dnnl::algorithm::eltwise_relu;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 1, runs = argc > 2 ? std::atoi(argv[2]) : 21;
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::printf("%-26s %10s %10s %8s %8s %7s  (threads %d, %d runs)\n", "shape", "onednn us",
              "kiln us", "dnn GMAC", "kiln GMAC", "ratio", threads, runs);
  for (const Shape& s : kShapes) {
    const int64_t pad = s.kernel / 2;
    const int64_t oh = (s.h + 2 * pad - s.kernel) / s.stride + 1;
    const int64_t ow = (s.w + 2 * pad - s.kernel) / s.stride + 1;
    memory::dims xd = {1, s.c, s.h, s.w}, yd = {1, s.k, oh, ow};
    memory::dims wd = {s.k, s.c, s.kernel, s.kernel};
    memory::desc src_md(xd, memory::data_type::f32, memory::format_tag::abcd);
    memory::desc dst_md(yd, memory::data_type::f32, memory::format_tag::aBcd8b);
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
        memory::desc(wd, memory::data_type::f32, memory::format_tag::any),
        memory::desc({s.k}, memory::data_type::f32, memory::format_tag::a), dst_md,
        {s.stride, s.stride}, {pad, pad}, {pad, pad});
    const float alpha = s.post == Kind::kSwish ? 1.0f : 0.0f, beta = 6.0f;
    dnnl::post_ops po;
    po.append_eltwise(1.0f, Algorithm(s.post), alpha, beta);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    dnnl::convolution_forward conv(pd);
    std::vector<float> wt(static_cast<size_t>(s.k * s.c * s.kernel * s.kernel), 0.01f);
    memory src(src_md, eng, Buffer(src_md.get_size())), dst(dst_md, eng, Buffer(dst_md.get_size()));
    memory w(pd.weights_desc(), eng, Buffer(pd.weights_desc().get_size()));
    memory b({{s.k}, memory::data_type::f32, memory::format_tag::a}, eng, Buffer(s.k * 4));
    auto kiln = SmallConv::Make({src_md, dst_md, wt.data(), wd, {s.stride, s.stride}, {0, 0},
                                 {pad, pad}, {WinogradPostOp{s.post, alpha, beta}}, threads});
    if (kiln == nullptr) return 1;
    std::vector<double> t[2];
    for (int r = 0; r < runs + 2; ++r) {
      for (int i = 0; i < 2; ++i) {
        double start = NowUs(threads == 1);
        if (i == 0) {
          conv.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b},
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
    const double m0 = Typical(t[0], threads), m1 = Typical(t[1], threads);
    const double macs = static_cast<double>(s.k * oh * ow * s.c * s.kernel * s.kernel);
    std::printf("%-26s %10.0f %10.0f %8.1f %8.1f %7.2f\n", s.name, m0, m1, macs / m0 / 1e3,
                macs / m1 / 1e3, m1 / m0);
  }
  return 0;
}
