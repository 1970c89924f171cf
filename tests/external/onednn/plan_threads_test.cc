// Steps too small to pay for a fork run on the calling thread (plan_threads.cc): the work
// estimate and its threshold, which steps of a plan run serially, that a region of small ops
// run at two threads starts no OpenMP thread, and results against plain reference loops.
#define BOOST_TEST_MODULE onednn_plan_threads_test
#include <dirent.h>
#include <omp.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "external/onednn/run/plan_builder.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

using internal::kSerialWork;
using internal::OpWork;
using internal::StepThreads;

// Threads of this process (entries of /proc/self/task).
int ProcessThreads() {
  DIR* dir = opendir("/proc/self/task");
  BOOST_REQUIRE(dir != nullptr);
  int n = 0;
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

// Sets OpenMP's team size for the scope (plans are built for the team of their first run).
struct Threads {
  explicit Threads(int n) : before(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(before); }
  int before;
};

Floats Relu(Floats v) {
  for (float& x : v) x = std::max(x, 0.0f);
  return v;
}

Op Conv3x3() {
  Op op;
  op.kind = OpKind::kConv;
  op.kernel = {3, 3};
  op.strides = {1, 1};
  op.dilations = {1, 1};
  op.pads = {1, 1, 1, 1};
  return op;
}

// Must run first: the OpenMP pool's threads, once started, stay for the process's life.
BOOST_AUTO_TEST_CASE(a_region_of_small_ops_at_two_threads_starts_no_thread) {
  Threads two(2);
  const int before = ProcessThreads();
  Dims wd = {16, 8, 3, 3};
  Floats w = Random(Numel(wd), 1, -0.3f, 0.3f), b = Random(16, 2);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 10, 10] X) => (float Y) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W, B)
      a = Relu(c)
      Y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (a)
    })",
                                       {{"W", wd, w}, {"B", {16}, b}}));
  Dims xd = {1, 8, 10, 10}, cd, yd;
  Floats x = Random(Numel(xd), 3);
  Floats a = Relu(RefConv2d(x, xd, w, wd, &b, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd));
  Floats want = RefPool2d(a, cd, true, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, &yd);
  for (int call = 0; call < 3; ++call) {
    std::vector<Floats> got = r.Run({{xd, x}}, {yd});
    // f32 sums of 72 products of magnitude <= 0.3 on inputs of magnitude <= 1.
    BOOST_TEST(Close(got[0], want, 1e-5 * std::sqrt(72.0) * 4, 1e-5));
  }
  const RegionStats s = r.region().stats();
  BOOST_TEST(s.plan_steps > 0);
  BOOST_TEST(s.serial_steps == s.plan_steps);
  BOOST_TEST(ProcessThreads() == before);
}

BOOST_AUTO_TEST_CASE(work_counts_multiply_adds_and_elements) {
  std::vector<Dims> dims = {{1, 8, 10, 10}, {16, 8, 3, 3}};
  Op conv = Conv3x3();
  conv.inputs = {0, 1};
  // 1600 outputs x 72 multiply-adds, plus the elements read and written.
  const int64_t macs = 16 * 100 * 72;
  BOOST_TEST(OpWork(conv, dims) > macs);
  BOOST_TEST(OpWork(conv, dims) < 2 * macs);
  // 64 channels at 56x56: 115.6M multiply-adds, far above the threshold.
  std::vector<Dims> big = {{1, 64, 56, 56}, {64, 64, 3, 3}};
  BOOST_TEST(OpWork(conv, big) >= int64_t{115605504});
  Op matmul;
  matmul.kind = OpKind::kMatMul;
  matmul.inputs = {0, 1};
  std::vector<Dims> mm = {{4, 32, 64}, {64, 48}};  // 4 x 32 x 48 outputs x 64
  BOOST_TEST(OpWork(matmul, mm) >= 4 * 32 * 48 * 64);
  std::vector<Dims> batched_b = {{32, 64}, {4, 64, 48}};  // the batch on B
  BOOST_TEST(OpWork(matmul, batched_b) >= 4 * 32 * 48 * 64);
  Op relu;
  relu.kind = OpKind::kEltwise;
  relu.inputs = {0};
  std::vector<Dims> small = {{1, 16, 10, 10}}, large = {{1, 256, 56, 56}};
  BOOST_TEST(OpWork(relu, small) < kSerialWork);
  BOOST_TEST(OpWork(relu, large) >= kSerialWork);
  // An upsampling writes its input's size times every factor: x2 in H and W writes 4x.
  Op resize;
  resize.kind = OpKind::kResize;
  resize.inputs = {0};
  resize.strides = {2, 2};
  std::vector<Dims> map = {{1, 64, 40, 40}};  // 102,400 in, 409,600 out
  BOOST_TEST(OpWork(resize, map) == (102400 + 409600) * 8);
  // A bad window (the build reports it) counts as big: it never hides behind one thread.
  std::vector<Dims> bad = {{1, 8, 10, 10}, {16, 8, 3}};
  BOOST_TEST(OpWork(conv, bad) >= kSerialWork);
}

BOOST_AUTO_TEST_CASE(threads_drop_to_one_below_the_threshold_only) {
  BOOST_TEST(StepThreads(kSerialWork - 1, 2) == 1);
  BOOST_TEST(StepThreads(kSerialWork, 2) == 2);
  BOOST_TEST(StepThreads(kSerialWork, 8) == 8);
  BOOST_TEST(StepThreads(0, 1) == 1);
  BOOST_TEST(StepThreads(int64_t{1} << 40, 1) == 1);
}

// A large conv keeps the team; the small ops around it run serially; results match.
BOOST_AUTO_TEST_CASE(large_steps_keep_the_team) {
  Threads two(2);
  Dims wd = {64, 64, 3, 3};
  Floats w = Random(Numel(wd), 4, -0.05f, 0.05f);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 64, 28, 28] X) => (float Y) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W)
      a = Relu(c)
      Y = GlobalAveragePool(a)
    })",
                                       {{"W", wd, w}}));
  Dims xd = {1, 64, 28, 28}, cd, yd;
  Floats x = Random(Numel(xd), 5);
  Floats a = Relu(RefConv2d(x, xd, w, wd, nullptr, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd));
  Floats want = RefPool2d(a, cd, false, {28, 28}, {1, 1}, {0, 0, 0, 0}, false, &yd);
  // The team size each step ran under (a profile sample is taken as its step ends).
  struct Teams : RegionProfiler {
    std::vector<int> sizes;
    void Record(const RegionStepSample&) override { sizes.push_back(omp_get_max_threads()); }
  } teams;
  std::vector<Floats> got;
  BOOST_REQUIRE(r.TryRun({{xd, x}}, {yd}, &got, &teams).ok());
  // Sums of 576 products of magnitude <= 0.05, averaged over 784 positions.
  BOOST_TEST(Close(got[0], want, 1e-5 * std::sqrt(576.0) * 4, 1e-4));
  const RegionStats s = r.region().stats();
  BOOST_TEST(s.serial_steps >= 1);  // the pooled 64 values and the output copy
  BOOST_TEST(s.serial_steps < s.plan_steps);
  // Serial steps run at 1, the others at the caller's 2: the team is switched where the steps
  // switch (and left at 1 until then), and the caller's is back after the run.
  BOOST_TEST(std::count(teams.sizes.begin(), teams.sizes.end(), 1) == s.serial_steps);
  BOOST_TEST(std::count(teams.sizes.begin(), teams.sizes.end(), 2) == s.plan_steps - s.serial_steps);
  BOOST_TEST(omp_get_max_threads() == 2);
}

// At one thread nothing is marked: there is no team to leave.
BOOST_AUTO_TEST_CASE(one_thread_marks_nothing) {
  Threads one(1);
  Dims wd = {16, 8, 3, 3};
  Floats w = Random(Numel(wd), 6);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 10, 10] X) => (float Y) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W)
      Y = Relu(c)
    })",
                                       {{"W", wd, w}}));
  Dims xd = {1, 8, 10, 10}, yd;
  Floats x = Random(Numel(xd), 7);
  Floats want = Relu(RefConv2d(x, xd, w, wd, nullptr, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd));
  std::vector<Floats> got = r.Run({{xd, x}}, {yd});
  BOOST_TEST(Close(got[0], want, 1e-5 * std::sqrt(72.0) * 4, 1e-5));
  BOOST_TEST(r.region().stats().serial_steps == 0);
}

}  // namespace
}  // namespace kiln::onednn::testing
