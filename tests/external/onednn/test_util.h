// Helpers for the oneDNN vendor tests: graphs from ONNX text with float initializers, regions
// compiled by the codegen and created by the runtime, runs, and plain C++ reference kernels.
#ifndef KILN_TESTS_EXTERNAL_ONEDNN_TEST_UTIL_H_
#define KILN_TESTS_EXTERNAL_ONEDNN_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "external/onednn/compile/codegen.h"
#include "external/onednn/run/runtime.h"
#include "vm/providers.h"
#include "base/tensor.h"

namespace kiln::onednn::testing {

using Dims = std::vector<int64_t>;
using Floats = std::vector<float>;

/// A float initializer added to the model (the ONNX text refers to it by name).
struct Init {
  std::string name;
  Dims dims;
  Floats data;
};

/// Parses ONNX text, adds `inits` as initializers, imports and infers shapes. Throws
/// std::runtime_error on any failure (a bug in the test).
compiler::Graph MakeGraph(const std::string& text, const std::vector<Init>& inits = {});

/// Deterministic pseudo-random floats in [lo, hi).
Floats Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
int64_t Numel(const Dims& d);

/// A region of every node of a graph (inputs: the graph inputs; outputs: the graph outputs),
/// generated and created through the runtime with its constants wrapped as kiln Tensors.
struct CompiledRegion {
  std::shared_ptr<compiler::Graph> graph;
  compiler::ExternalCode code;
  std::vector<Tensor> constants;
  std::unique_ptr<TensorFunction> fn;

  OneDnnRegion& region() const { return dynamic_cast<OneDnnRegion&>(*fn); }
  /// Runs with the given inputs; returns the outputs (shapes given). Throws on error status.
  std::vector<Floats> Run(const std::vector<std::pair<Dims, Floats>>& inputs,
                          const std::vector<Dims>& output_shapes) const;
  /// Like Run, returning the Status; through RunProfiled when `profiler` is not null.
  Status TryRun(const std::vector<std::pair<Dims, Floats>>& inputs,
                const std::vector<Dims>& output_shapes, std::vector<Floats>* outputs,
                RegionProfiler* profiler = nullptr) const;
};

/// Options that create every region, reference implementations included: the tests using
/// the default below check oneDNN's numerics, not which regions the runtime declines.
inline OneDnnOptions RunEverything() {
  OneDnnOptions o;
  o.decline_reference_impls = false;
  return o;
}
/// Codegen + the spec (ExternalRegionSpec from the code) + OneDnnRuntime::CreateRegion.
/// Throws std::runtime_error with the status on failure (a decline included).
CompiledRegion Compile(compiler::Graph graph, OneDnnOptions options = RunEverything());
/// The spec a loader would build for `code` over `constants`.
ExternalRegionSpec MakeSpec(const compiler::ExternalCode& code,
                            const std::vector<Tensor>& constants, int num_inputs, int num_outputs,
                            const char* name = "test_region");
/// Codegen only (all nodes, graph inputs / outputs).
StatusOr<compiler::ExternalCode> CodegenAll(const compiler::Graph& graph);

// ---- Reference kernels (row-major, f32 in, double accumulation) ----

struct ConvParams {
  int64_t group = 1;
  Dims strides = {1, 1}, dilations = {1, 1}, pads = {0, 0, 0, 0};
};
/// 2-D convolution NCHW x OIHW (+ bias) -> NCHW; `out` dims are returned in *out_dims.
Floats RefConv2d(const Floats& x, const Dims& xd, const Floats& w, const Dims& wd,
                 const Floats* bias, const ConvParams& p, Dims* out_dims);
/// [.., M, K] x [K, N] (B 2-D) or equal batch dims.
Floats RefMatMul(const Floats& a, const Dims& ad, const Floats& b, const Dims& bd);
Floats RefPool2d(const Floats& x, const Dims& xd, bool max, const Dims& kernel, const Dims& strides,
                 const Dims& pads, bool count_include_pad, Dims* out_dims);
Floats RefSoftmax(const Floats& x, const Dims& xd, int axis, bool log);
Floats RefLayerNorm(const Floats& x, const Dims& xd, int axis, const Floats& scale,
                    const Floats& bias, float eps);
float RefGelu(float x);

/// |a - b| <= atol + rtol * |b| for every element; a NaN or Inf in `got` fails, and so does any
/// element where `want` is NaN or Inf (the oneDNN references are finite). Prints the count and
/// the first mismatch on failure.
bool Close(const Floats& got, const Floats& want, double atol, double rtol);

/// Sets environment variable `var` to `value` (null: unsets it) for one scope, restoring what it
/// was after: the kernels' `KILN_ONEDNN_*` switches, which plans read when they are built.
class ScopedEnv {
 public:
  ScopedEnv(const char* var, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string var_, saved_;
  bool had_ = false;
};

}  // namespace kiln::onednn::testing

#endif  // KILN_TESTS_EXTERNAL_ONEDNN_TEST_UTIL_H_
