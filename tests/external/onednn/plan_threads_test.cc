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
using internal::kSpreadElements;
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

// The team size each step ran under (a profile sample is taken as its step ends).
struct Teams : RegionProfiler {
  std::vector<int> sizes;
  std::vector<std::string> kinds;
  void Record(const RegionStepSample& s) override {
    sizes.push_back(omp_get_max_threads());
    kinds.emplace_back(s.kind);
  }
};

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
  BOOST_TEST(StepThreads(kSerialWork - 1, 0, 2) == 1);
  BOOST_TEST(StepThreads(kSerialWork, 0, 2) == 2);
  BOOST_TEST(StepThreads(kSerialWork, 0, 8) == 8);
  BOOST_TEST(StepThreads(0, 0, 1) == 1);
  BOOST_TEST(StepThreads(int64_t{1} << 40, 0, 1) == 1);
  // Small work on an input the team wrote keeps the team once that input is large.
  BOOST_TEST(StepThreads(kSerialWork - 1, kSpreadElements - 1, 2) == 1);
  BOOST_TEST(StepThreads(kSerialWork - 1, kSpreadElements, 2) == 2);
  BOOST_TEST(StepThreads(0, kSpreadElements, 1) == 1);
}

// A large conv keeps the team, and so does the pool that reads its output; the copy of the
// 64 pooled values runs serially; results match.
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
  Teams teams;
  std::vector<Floats> got;
  BOOST_REQUIRE(r.TryRun({{xd, x}}, {yd}, &got, &teams).ok());
  // Sums of 576 products of magnitude <= 0.05, averaged over 784 positions.
  BOOST_TEST(Close(got[0], want, 1e-5 * std::sqrt(576.0) * 4, 1e-4));
  const RegionStats s = r.region().stats();
  BOOST_TEST(s.serial_steps >= 1);  // the output copy of the 64 pooled values
  BOOST_TEST(s.serial_steps < s.plan_steps);
  // Serial steps run at 1, the others at the caller's 2: the team is switched where the steps
  // switch (and left at 1 until then), and the caller's is back after the run.
  BOOST_TEST(std::count(teams.sizes.begin(), teams.sizes.end(), 1) == s.serial_steps);
  BOOST_TEST(std::count(teams.sizes.begin(), teams.sizes.end(), 2) == s.plan_steps - s.serial_steps);
  BOOST_TEST(omp_get_max_threads() == 2);
}

// A squeeze-excite block after a large convolution: the pool and the multiply have little
// work but read the 50,176 values the team's threads wrote (each half in its own core's
// cache), so they keep the team; the two products of 64 values between them, which read only
// what one thread wrote, run serially. Results match plain loops.
BOOST_AUTO_TEST_CASE(steps_reading_what_the_team_wrote_keep_the_team) {
  Threads two(2);
  Dims wd = {64, 64, 3, 3}, w1d = {16, 64, 1, 1}, w2d = {64, 16, 1, 1};
  Floats w = Random(Numel(wd), 8, -0.05f, 0.05f);
  Floats w1 = Random(Numel(w1d), 9, -0.2f, 0.2f), w2 = Random(Numel(w2d), 10, -0.2f, 0.2f);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 64, 28, 28] X) => (float Y) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W)
      p = GlobalAveragePool(c)
      f = Conv (p, W1)
      h = Relu(f)
      s = Conv (h, W2)
      Y = Mul(c, s)
    })",
                                       {{"W", wd, w}, {"W1", w1d, w1}, {"W2", w2d, w2}}));
  Dims xd = {1, 64, 28, 28}, cd, pd, fd, sd;
  Floats x = Random(Numel(xd), 11);
  Floats c = RefConv2d(x, xd, w, wd, nullptr, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd);
  Floats p = RefPool2d(c, cd, false, {28, 28}, {1, 1}, {0, 0, 0, 0}, false, &pd);
  Floats h = Relu(RefConv2d(p, pd, w1, w1d, nullptr, {1, {1, 1}, {1, 1}, {0, 0, 0, 0}}, &fd));
  Floats sc = RefConv2d(h, fd, w2, w2d, nullptr, {1, {1, 1}, {1, 1}, {0, 0, 0, 0}}, &sd);
  Floats want = c;
  for (size_t i = 0; i < want.size(); ++i) want[i] *= sc[i / (28 * 28)];
  Teams teams;
  std::vector<Floats> got;
  BOOST_REQUIRE(r.TryRun({{xd, x}}, {cd}, &got, &teams).ok());
  // c: sums of 576 products of magnitude <= 0.05; s: of 16 products of terms below ~1.
  BOOST_TEST(Close(got[0], want, 1e-5 * std::sqrt(576.0) * 8, 1e-4));
  // The conv (with its input's reorder), the pool and the multiply (with the copy out) at
  // 2; the two products of 64 and 16 values at 1.
  int pools = 0, muls = 0, serial_convs = 0;
  for (size_t i = 0; i < teams.kinds.size(); ++i) {
    BOOST_TEST_INFO("step " << i << ": " << teams.kinds[i]);
    if (teams.kinds[i] == "pool" || teams.kinds[i] == "binary") {
      BOOST_TEST(teams.sizes[i] == 2);
      (teams.kinds[i] == "pool" ? pools : muls) += 1;
    }
    serial_convs += teams.kinds[i] == "conv" && teams.sizes[i] == 1;
  }
  BOOST_TEST(pools == 1);
  BOOST_TEST(muls == 1);
  BOOST_TEST(serial_convs == 2);
  BOOST_TEST(r.region().stats().serial_steps == 2);
}

// The same pool on the region's input (written outside the region, by whoever): too little
// work for a fork, it runs serially.
BOOST_AUTO_TEST_CASE(small_steps_on_the_region_input_stay_serial) {
  Threads two(2);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 64, 28, 28] X) => (float Y) {
      Y = GlobalAveragePool(X)
    })",
                                       {}));
  Dims xd = {1, 64, 28, 28}, yd;
  Floats x = Random(Numel(xd), 12);
  Floats want = RefPool2d(x, xd, false, {28, 28}, {1, 1}, {0, 0, 0, 0}, false, &yd);
  Teams teams;
  std::vector<Floats> got;
  BOOST_REQUIRE(r.TryRun({{xd, x}}, {yd}, &got, &teams).ok());
  BOOST_TEST(Close(got[0], want, 1e-5, 1e-6));
  const RegionStats s = r.region().stats();
  BOOST_TEST(s.serial_steps == s.plan_steps);
  BOOST_TEST(std::count(teams.sizes.begin(), teams.sizes.end(), 1) == s.plan_steps);
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
