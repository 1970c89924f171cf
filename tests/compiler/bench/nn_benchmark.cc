// Steady-state speed of the nn lowerings' kernels that dominate ResNet and BERT: the lowered
// kernel of a one-node model called directly (no VM), with FLOP/s of wall time as a counter.
// Moved out of nn_test so that `bazel test` asserts answers and this binary measures.
//   bazel run -c opt //tests/compiler/bench:nn_benchmark
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "compiler/lower/lower.h"
#include "jit/compute.h"
#include "jit/engine.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Model;
using testing::RandomTensor;

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "nn_benchmark: %s: %s\n", what.c_str(), s.message().c_str());
  std::exit(1);
}

jit::Engine& SharedEngine() {
  static std::unique_ptr<jit::Engine> engine = [] {
    auto e = jit::Engine::Create();
    if (!e.ok()) Die("engine", e.status());
    return std::move(*e);
  }();
  return *engine;
}

const LoweringTable& Table() { return testing::TableOf<AddNnLowerings>(); }

// The kernel the nn lowering makes for the one node of `model`.
jit::KernelFn CompileNode(const std::string& model) {
  StatusOr<Graph> g = testing::InferText(model);
  if (!g.ok()) Die("model", g.status());
  StatusOr<std::vector<NodeId>> order = g->TopologicalOrder();
  if (!order.ok()) Die("order", order.status());
  StatusOr<LoweredNode> lowered = LowerNode(*g, (*order)[0], false, Table());
  if (!lowered.ok()) Die("lowering", lowered.status());
  StatusOr<jit::KernelFn> fn = SharedEngine().GetOrCompile(*lowered->kernel);
  if (!fn.ok()) Die("compile", fn.status());
  return *fn;
}

// Times fn on args (inputs then the output), counting `flops` per call.
void TimeKernel(benchmark::State& state, jit::KernelFn fn, const std::vector<TensorDataRef>& args,
                double flops) {
  std::vector<void*> buffers;
  std::vector<const int64_t*> shapes;
  for (const TensorDataRef& t : args) {
    buffers.push_back(const_cast<void*>(t->data()));
    shapes.push_back(t->dims().data());
  }
  for (auto _ : state) fn(buffers.data(), shapes.data(), nullptr, nullptr);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

struct NodeCase {
  const char* name;
  std::string model;
  std::vector<std::vector<int64_t>> inputs;  // f32 in [-1, 1]
  std::vector<int64_t> output;
  double flops;
};

std::vector<NodeCase> Cases() {
  return {
      {"MatMul_512x512x512", Model(13, "(float[512,512] a, float[512,512] b) => (y)",
                                   "y = MatMul(a, b)"),
       {{512, 512}, {512, 512}}, {512, 512}, 2.0 * 512 * 512 * 512},
      {"Conv_64to64_3x3_56x56_pad1",
       Model(13, "(float[1,64,56,56] x, float[64,64,3,3] w) => (y)",
             "y = Conv <pads = [1, 1, 1, 1]> (x, w)"),
       {{1, 64, 56, 56}, {64, 64, 3, 3}}, {1, 64, 56, 56}, 2.0 * 64 * 64 * 9 * 56 * 56},
      {"Conv_64to256_1x1_56x56",
       Model(13, "(float[1,64,56,56] x, float[256,64,1,1] w) => (y)", "y = Conv(x, w)"),
       {{1, 64, 56, 56}, {256, 64, 1, 1}}, {1, 256, 56, 56}, 2.0 * 256 * 64 * 56 * 56},
      {"MatMul_128x768x3072_BERT_FFN",
       Model(13, "(float[128,768] a, float[768,3072] b) => (y)", "y = MatMul(a, b)"),
       {{128, 768}, {768, 3072}}, {128, 3072}, 2.0 * 128 * 768 * 3072},
      {"Gemm_transB_128x768x3072",
       Model(13, "(float[128,768] a, float[3072,768] b) => (y)", "y = Gemm <transB = 1> (a, b)"),
       {{128, 768}, {3072, 768}}, {128, 3072}, 2.0 * 128 * 768 * 3072},
      {"DepthwiseConv_128ch_3x3_56x56",
       Model(13, "(float[1,128,56,56] x, float[128,1,3,3] w) => (y)",
             "y = Conv <pads = [1, 1, 1, 1], group = 128> (x, w)"),
       {{1, 128, 56, 56}, {128, 1, 3, 3}}, {1, 128, 56, 56}, 2.0 * 128 * 9 * 56 * 56},
      {"MaxPool_3x3_s2_64ch_112x112",
       Model(13, "(float[1,64,112,112] x) => (y)",
             "y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)"),
       {{1, 64, 112, 112}}, {1, 64, 56, 56}, 64.0 * 56 * 56 * 9},
      {"LayerNorm_128x768",
       Model(17, "(float[128,768] x, float[768] s, float[768] b) => (y)",
             "y = LayerNormalization(x, s, b)"),
       {{128, 768}, {768}, {768}}, {128, 768}, 128.0 * 768 * 8},
  };
}

// jit::MatmulKernel, the JIT's own GEMM, beside the lowering's MatMul of the same size.
void BM_JitMatmulKernel512(benchmark::State& state) {
  StatusOr<jit::KernelFn> fn = SharedEngine().GetOrCompile(jit::MatmulKernel("mm"));
  if (!fn.ok()) Die("compile", fn.status());
  TensorDataRef a = RandomTensor(DType::kF32, {512, 512}, -1, 1, 1);
  TimeKernel(state, *fn, {a, a, RandomTensor(DType::kF32, {512, 512}, 0, 1, 0)},
             2.0 * 512 * 512 * 512);
}
BENCHMARK(BM_JitMatmulKernel512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln::compiler

int main(int argc, char** argv) {
  using namespace kiln::compiler;
  for (const NodeCase& c : Cases()) {
    benchmark::RegisterBenchmark(c.name, [c](benchmark::State& state) {
      std::vector<TensorDataRef> args;
      uint64_t seed = 1;
      for (const auto& dims : c.inputs) {
        args.push_back(RandomTensor(kiln::DType::kF32, dims, -1, 1, seed++));
      }
      args.push_back(RandomTensor(kiln::DType::kF32, c.output, 0, 1, 0));
      TimeKernel(state, CompileNode(c.model), args, c.flops);
    })->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
