// kiln's blocked max pooling (external/onednn/run/blocked_pool.h) against oneDNN's own
// pooling primitive on the same layouts: bitwise equal outputs (max is exact, and NaN elements
// lose as in oneDNN; the inputs hold no signed zeros, whose order may differ), for ceil-mode and padded windows, channel counts that pad the last block,
// batches and both block sizes; and the cases it leaves to oneDNN.
#define BOOST_TEST_MODULE onednn_blocked_pool_test
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <vector>

#include "external/onednn/run/blocked_pool.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "tests/external/onednn/cpu_engine.h"

namespace kiln::onednn::internal {
namespace {

namespace data = boost::unit_test::data;
using dnnl::memory;
using tag = memory::format_tag;

using testing::Cpu;

struct Case {
  const char* name;
  int64_t n, c, h, w, kh, kw, sh, sw, pt, pl, pb, pr;  // pb, pr: bottom / right (ceil_mode)
  tag layout;
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

const Case kCases[] = {
    // googlenet's inception branch pool: 3x3, stride 1, pad 1.
    {"3x3_s1_p1", 1, 16, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, tag::aBcd8b},
    // googlenet's / squeezenet's ceil_mode pools: the last window hangs over the edge.
    {"3x3_s2_ceil", 2, 24, 10, 12, 3, 3, 2, 2, 0, 0, 1, 1, tag::aBcd8b},
    {"2x2_s2_ceil_odd", 1, 8, 7, 7, 2, 2, 2, 2, 0, 0, 1, 1, tag::aBcd8b},
    // 12 channels: the second block is half padding.
    {"channels_12", 1, 12, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, tag::aBcd8b},
    {"asymmetric_window", 1, 8, 9, 13, 2, 4, 1, 3, 1, 0, 0, 2, tag::aBcd8b},
    {"block_16", 2, 20, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, tag::aBcd16b},
};

// Random values in [-1, 1) with some NaNs and repeated maxima; channel padding zeroed as
// oneDNN keeps it.
void Fill(memory m, const Case& c) {
  float* p = static_cast<float*>(m.get_data_handle());
  size_t n = m.get_desc().get_size() / sizeof(float);
  uint32_t s = 12345;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
    if (i % 37 == 5) p[i] = std::numeric_limits<float>::quiet_NaN();
    if (i % 11 == 3) p[i] = 0.5f;
  }
  // Zero the padded channels through a plain copy's reorder round trip.
  memory::desc plain({c.n, c.c, c.h, c.w}, memory::data_type::f32, tag::abcd);
  memory tmp(plain, Cpu());
  dnnl::stream st(Cpu());
  dnnl::reorder(m, tmp).execute(st, m, tmp);
  dnnl::reorder(tmp, m).execute(st, tmp, m);
  st.wait();
}

int64_t Out(int64_t in, int64_t k, int64_t s, int64_t pa, int64_t pb) {
  return (in + pa + pb - k) / s + 1;
}

BOOST_DATA_TEST_CASE(equals_onednn_pooling_bitwise, data::make(kCases), c) {
  int64_t oh = Out(c.h, c.kh, c.sh, c.pt, c.pb), ow = Out(c.w, c.kw, c.sw, c.pl, c.pr);
  memory::desc src_md({c.n, c.c, c.h, c.w}, memory::data_type::f32, c.layout);
  memory::desc dst_md({c.n, c.c, oh, ow}, memory::data_type::f32, c.layout);
  auto pool = BlockedMaxPool::Make(src_md, dst_md, {c.kh, c.kw}, {c.sh, c.sw}, {0, 0},
                                   {c.pt, c.pl});
  if (!__builtin_cpu_supports("avx2")) {
    // The contract on such CPUs: oneDNN's primitive runs instead.
    BOOST_TEST(pool == nullptr);
    return;
  }
  BOOST_REQUIRE(pool != nullptr);
  dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference,
                                   dnnl::algorithm::pooling_max, src_md, dst_md, {c.sh, c.sw},
                                   {c.kh, c.kw}, {0, 0}, {c.pt, c.pl}, {c.pb, c.pr});
  dnnl::pooling_v2_forward::primitive_desc pd(d, Cpu());
  memory src(src_md, Cpu()), want(dst_md, Cpu()), got(dst_md, Cpu());
  Fill(src, c);
  dnnl::stream st(Cpu());
  dnnl::pooling_v2_forward(pd).execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, want}});
  st.wait();
  std::memset(got.get_data_handle(), 0x7f, dst_md.get_size());
  pool->Run(static_cast<const float*>(src.get_data_handle()),
            static_cast<float*>(got.get_data_handle()));
  BOOST_TEST(std::memcmp(got.get_data_handle(), want.get_data_handle(), dst_md.get_size()) == 0);
}

BOOST_AUTO_TEST_CASE(leaves_other_layouts_and_windows_to_onednn) {
  auto md = [](memory::dims d, tag t) { return memory::desc(d, memory::data_type::f32, t); };
  memory::dims in = {1, 16, 8, 8}, out = {1, 16, 4, 4};
  // Plain and channels-last layouts, mixed blocks, dilation, a first window wholly in padding.
  BOOST_TEST(!BlockedMaxPool::Make(md(in, tag::abcd), md(out, tag::abcd), {2, 2}, {2, 2},
                                   {0, 0}, {0, 0}));
  BOOST_TEST(!BlockedMaxPool::Make(md(in, tag::acdb), md(out, tag::acdb), {2, 2}, {2, 2},
                                   {0, 0}, {0, 0}));
  BOOST_TEST(!BlockedMaxPool::Make(md(in, tag::aBcd8b), md(out, tag::aBcd16b), {2, 2}, {2, 2},
                                   {0, 0}, {0, 0}));
  BOOST_TEST(!BlockedMaxPool::Make(md(in, tag::aBcd8b), md({1, 16, 3, 3}, tag::aBcd8b), {2, 2},
                                   {2, 2}, {1, 1}, {0, 0}));
  BOOST_TEST(!BlockedMaxPool::Make(md(in, tag::aBcd8b), md({1, 16, 5, 5}, tag::aBcd8b), {2, 2},
                                   {2, 2}, {0, 0}, {2, 2}));
  BOOST_TEST(!BlockedMaxPool::Make(md({1, 16, 8}, tag::aBc8b), md({1, 16, 4}, tag::aBc8b), {2},
                                   {2}, {0}, {0}));
  if (__builtin_cpu_supports("avx2"))
    BOOST_TEST(BlockedMaxPool::Make(md(in, tag::aBcd8b), md(out, tag::aBcd8b), {2, 2}, {2, 2},
                                    {0, 0}, {0, 0}) != nullptr);
}

}  // namespace
}  // namespace kiln::onednn::internal
