// Compile time of synthetic models of 100 and 1000 nodes (transformer-like blocks with symbolic
// batch and seq: MatMul, Add, Mul, Erf, ReduceMean, Sub, Sqrt, Div, Softmax, Reshape), with
// and without oneDNN partitioning.
//   bazel run -c opt //tests/compiler/bench:compile_benchmark
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "compiler/compile.h"
#include "embed/compile.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

// About 10 nodes per block plus the block's constants.
std::string Model(int blocks) {
  std::string body;
  std::string x = "x";
  for (int b = 0; b < blocks; ++b) {
    std::string p = "b" + std::to_string(b) + "_";
    body += p + "h = MatMul(" + x + ", w)\n";
    body += p + "hb = Add(" + p + "h, bias)\n";
    body += p + "m = ReduceMean <axes = [-1]> (" + p + "hb)\n";
    body += p + "d = Sub(" + p + "hb, " + p + "m)\n";
    body += p + "v = Mul(" + p + "d, " + p + "d)\n";
    body += p + "var = ReduceMean <axes = [-1]> (" + p + "v)\n";
    body += p + "s = Sqrt(" + p + "var)\n";
    body += p + "n = Div(" + p + "d, " + p + "s)\n";
    body += p + "e = Erf(" + p + "n)\n";
    body += p + "o = Add(" + p + "e, " + x + ")\n";
    x = p + "o";
  }
  body += "y = Softmax <axis = -1> (" + x + ")\n";
  return R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[B, S, 64] x, float[64, 64] w, float[64] bias) => (float[B, S, 64] y) {
)" + body + "}";
}

void BM_Compile(benchmark::State& state) {
  int blocks = static_cast<int>(state.range(0));
  std::string bytes = testing::ModelBytes(Model(blocks));
  CompileOptions o;
  o.external = state.range(1) ? "onednn" : "none";
  CompileStats stats;
  for (auto _ : state) {
    auto r = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(r->data());
  }
  state.counters["nodes"] = stats.nodes;
  state.counters["kernels"] = stats.kernels;
  state.counters["regions"] = stats.external_regions;
}
BENCHMARK(BM_Compile)
    ->ArgsProduct({{10, 100}, {0, 1}})
    ->ArgNames({"blocks", "onednn"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::compiler

BENCHMARK_MAIN();
