// Timing printout (not a test): kiln's Winograd 3x3 convolution (F(2x2) and F(4x4)) beside
// oneDNN's direct convolution on the zoo's 3x3 stride-1 shapes, interleaved run by run so a
// loaded machine slows all alike; microseconds and the ratio to oneDNN. At one thread the
// median of the thread's CPU time (robust to other processes on a shared machine); at more,
// the fastest wall time (a thread preempted by another process stalls the team at its next
// barrier, for a whole time slice: the fastest run is the one no other process disturbed).
//   bazel run //tests/external/onednn:winograd_bench -- [threads] [runs]
#include <omp.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "external/onednn/run/winograd_conv.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;
using kiln::onednn::internal::WinogradConv;
using kiln::onednn::internal::WinogradPostOp;

struct Shape {
  const char* name;
  int64_t c, k, hw;
};

const Shape kShapes[] = {
    {"resnet 64@56", 64, 64, 56},       {"resnet 128@28", 128, 128, 28},
    {"resnet 256@14", 256, 256, 14},    {"resnet 512@7", 512, 512, 7},
    {"googlenet 64>192@56", 64, 192, 56}, {"googlenet 96>128@28", 96, 128, 28},
    {"googlenet 16>32@28", 16, 32, 28}, {"googlenet 112>224@14", 112, 224, 14},
    {"googlenet 160>320@7", 160, 320, 7}, {"densenet 128>32@56", 128, 32, 56},
    {"densenet 128>32@14", 128, 32, 14}, {"densenet 128>32@7", 128, 32, 7},
};

double NowUs(bool cpu) {
  timespec ts;
  clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

// The median (one thread) or the minimum (more) of the times.
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
  std::printf("%-24s %10s %10s %10s %7s %7s  (threads %d, %d runs)\n", "shape", "onednn us",
              "f2 us", "f4 us", "f2/dnn", "f4/dnn", threads, runs);
  if (threads > 1) std::printf("(the fastest run of each: wall time)\n");
  for (const Shape& s : kShapes) {
    memory::dims xd = {1, s.c, s.hw, s.hw}, yd = {1, s.k, s.hw, s.hw}, wd = {s.k, s.c, 3, 3};
    memory::desc src_md(xd, memory::data_type::f32, memory::format_tag::aBcd8b);
    memory::desc dst_md(yd, memory::data_type::f32, memory::format_tag::aBcd8b);
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
        memory::desc(wd, memory::data_type::f32, memory::format_tag::any),
        memory::desc({s.k}, memory::data_type::f32, memory::format_tag::a), dst_md, {1, 1},
        {1, 1}, {1, 1});
    dnnl::post_ops po;
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0, 0);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    dnnl::convolution_forward conv(pd);
    std::vector<float> wt(static_cast<size_t>(s.k * s.c * 9));
    for (size_t i = 0; i < wt.size(); ++i) wt[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
    memory src(src_md, eng, Buffer(src_md.get_size())), dst(dst_md, eng, Buffer(dst_md.get_size()));
    memory w(pd.weights_desc(), eng, Buffer(pd.weights_desc().get_size()));
    memory b({{s.k}, memory::data_type::f32, memory::format_tag::a}, eng, Buffer(s.k * 4));
    std::vector<std::shared_ptr<const WinogradConv>> wino;
    std::vector<void*> scratch;
    for (int m : {2, 4}) {
      wino.push_back(WinogradConv::Make(
          {src_md, dst_md, wt.data(), wd, {1, 1}, {0, 0}, {1, 1}, {WinogradPostOp{}}, threads}, m));
      scratch.push_back(Buffer(wino.back()->scratch_bytes()));
    }
    std::vector<double> t[3];
    for (int r = 0; r < runs + 2; ++r) {
      for (int i = 0; i < 3; ++i) {
        double start = NowUs(threads == 1);
        if (i == 0) {
          conv.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b},
                            {DNNL_ARG_DST, dst}});
          st.wait();
        } else {
          wino[i - 1]->Run(static_cast<const float*>(src.get_data_handle()),
                           static_cast<const float*>(b.get_data_handle()),
                           static_cast<float*>(dst.get_data_handle()), scratch[i - 1]);
        }
        double us = NowUs(threads == 1) - start;
        if (r >= 2) t[i].push_back(us);
      }
    }
    double m0 = Typical(t[0], threads), m1 = Typical(t[1], threads), m2 = Typical(t[2], threads);
    std::printf("%-24s %10.0f %10.0f %10.0f %7.2f %7.2f\n", s.name, m0, m1, m2, m1 / m0, m2 / m0);
  }
  return 0;
}
