// Timing of oneDNN regions through the runtime (not a test): a ResNet-style conv (64 -> 64,
// 3x3, pad 1, 56x56, batch 1, + bias + relu) and a 512^3 matmul. Prints first-call and steady
// state latency and GFLOP/s.   bazel run -c opt //tests/external/onednn:onednn_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Time(const char* name, CompiledRegion& r, const Dims& xd, const Dims& yd, double flops) {
  Floats x = Random(Numel(xd), 1);
  double t0 = Now();
  r.Run({{xd, x}}, {yd});
  double first = Now() - t0;
  std::vector<double> times;
  for (int i = 0; i < 50; ++i) {
    double t = Now();
    r.Run({{xd, x}}, {yd});
    times.push_back(Now() - t);
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  std::printf("%-40s first %8.3f ms   median %8.3f ms   min %8.3f ms   %6.1f GFLOP/s\n", name,
              first * 1e3, median * 1e3, times[0] * 1e3, flops / times[0] / 1e9);
}

int Main() {
  {
    Dims wd = {64, 64, 3, 3};
    CompiledRegion r =
        Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[1, 64, 56, 56] X) => (float Y) {
        c = Conv <pads = [1, 1, 1, 1]> (X, W, B)
        Y = Relu(c)
      })",
                          {{"W", wd, Random(Numel(wd), 2)}, {"B", {64}, Random(64, 3)}}));
    Time("conv 64->64 3x3 56x56 b1 +bias+relu", r, {1, 64, 56, 56}, {1, 64, 56, 56},
         2.0 * 64 * 64 * 9 * 56 * 56);
  }
  {
    CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[512, 512] X) => (float Y) {
        Y = MatMul(X, W)
      })",
                                         {{"W", {512, 512}, Random(512 * 512, 4)}}));
    Time("matmul 512x512x512 (constant B)", r, {512, 512}, {512, 512}, 2.0 * 512 * 512 * 512);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::onednn::testing

int main() { return kiln::onednn::testing::Main(); }
