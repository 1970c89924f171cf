// Writes real executables for the load fuzzer's seed corpus: small ONNX models (text syntax)
// compiled by kiln's own compiler, so the seeds carry serialized kernel IR, shape functions,
// constants and oneDNN region blobs exactly as `kiln compile` writes them (a few KB each).
// Generated at fuzz time rather than checked in, so they always match the current format.
//
// Optional ONNX files (e.g. conformance node tests) are compiled for the JIT as well.
//
//   make_model_seeds DIR [MODEL.onnx ...]   -> DIR/model_<name>.kiln, DIR/onnx_<i>.kiln
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "embed/compile.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

struct SeedModel {
  const char* name;
  const char* external;  // "onednn" or "none"
  const char* text;
  bool regions_without_conv = false;
};

// Two 3x3 convolutions with constant weights, for `kiln compile --tune`: its region blob
// carries tuning records (the Winograd probe's limit, a tile per Conv, on AVX2 + FMA hosts).
std::string TunedConvModel() {
  std::string w;
  for (int i = 0; i < 8 * 8 * 9; ++i) w += (i ? ", " : "") + std::to_string((i * 37 % 19 - 9) / 30.0);
  return R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[1, 8, 6, 6] x) => (float[1, 8, 6, 6] y) <float[8, 8, 3, 3] w = {)" + w + R"(}> {
        c = Conv <pads = [1, 1, 1, 1]> (x, w)
        r = Relu(c)
        y = Conv <pads = [1, 1, 1, 1]> (r, w)
      })";
}

const SeedModel kModels[] = {
    // Symbolic batch: generic kernels, shape functions, a fused elementwise chain.
    {"mlp_jit", "none",
     R"(<ir_version: 8, opset_import: ["" : 13]>
        g (float[N, 8] x, float[8, 4] w) => (float[N, 4] y) <float[4] b = {1, 2, 3, 4}> {
          h = MatMul(x, w)
          hb = Add(h, b)
          y = Relu(hb)
        })"},
    // On oneDNN (regions without a conv kept): a matmul region with add and relu post-ops.
    {"mlp_onednn", "onednn",
     R"(<ir_version: 8, opset_import: ["" : 13]>
        g (float[2, 8] x, float[8, 4] w) => (float[2, 4] y) <float[4] b = {1, 2, 3, 4}> {
          h = MatMul(x, w)
          hb = Add(h, b)
          y = Relu(hb)
        })",
     true},
    // Convolution, pooling and a softmax head: region plus JIT kernels around it.
    {"conv_onednn", "onednn",
     R"(<ir_version: 8, opset_import: ["" : 13]>
        g (float[1, 2, 6, 6] x, float[3, 2, 3, 3] w) => (float[1, 27] y) {
          c = Conv <pads = [1, 1, 1, 1]> (x, w)
          r = Relu(c)
          p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
          f = Flatten(p)
          y = Softmax <axis = 1> (f)
        })"},
    // Reductions, layer norm arithmetic and a data-dependent reshape on the JIT.
    {"norm_jit", "none",
     R"(<ir_version: 8, opset_import: ["" : 13]>
        g (float[B, S, 6] x, int64[2] shape) => (y, z) {
          m = ReduceMean <axes = [-1]> (x)
          d = Sub(x, m)
          v = Mul(d, d)
          var = ReduceMean <axes = [-1]> (v)
          s = Sqrt(var)
          y = Div(d, s)
          z = Reshape(y, shape)
        })"},
};

// Compiles the ONNX model `onnx` (named `name` in messages) and writes it to `path`.
bool WriteSeed(const std::string& name, const std::string& onnx, const CompileOptions& options,
               const std::string& path) {
  StatusOr<std::vector<uint8_t>> bytes = kiln::CompileOnnxBytes(onnx.data(), onnx.size(), options);
  if (!bytes.ok()) {
    std::fprintf(stderr, "make_model_seeds: %s: %s\n", name.c_str(),
                 bytes.status().ToString().c_str());
    return false;
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes->data(), 1, bytes->size(), f) != bytes->size() ||
      std::fclose(f) != 0) {
    std::fprintf(stderr, "make_model_seeds: cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("%s: %zu bytes (%s)\n", path.c_str(), bytes->size(), name.c_str());
  return true;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_model_seeds DIR [MODEL.onnx ...]\n");
    return 2;
  }
  const std::string dir = argv[1];
  for (const SeedModel& m : kModels) {
    CompileOptions options;
    options.external = m.external;
    if (m.regions_without_conv) options.external_options["regions_without_conv"] = "1";
    if (!WriteSeed(m.name, testing::ModelBytes(m.text), options,
                   dir + "/model_" + m.name + ".kiln")) {
      return 1;
    }
  }
  CompileOptions tuned;
  tuned.external = "onednn";
  tuned.tune = true;
  if (!WriteSeed("conv_onednn_tuned", testing::ModelBytes(TunedConvModel()), tuned,
                 dir + "/model_conv_onednn_tuned.kiln")) {
    return 1;
  }
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::string onnx((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "make_model_seeds: cannot read %s\n", argv[i]);
      return 1;
    }
    CompileOptions options;
    options.external = "none";
    if (!WriteSeed(argv[i], onnx, options, dir + "/onnx_" + std::to_string(i - 2) + ".kiln")) {
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace kiln::compiler

int main(int argc, char** argv) { return kiln::compiler::Main(argc, argv); }
