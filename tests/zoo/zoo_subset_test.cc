// The zoo subset in `bazel test`: three real architectures nobody tuned for (squeezenet1_1,
// mobilenet_v3_small with its activations written as scalar arithmetic at a non-square dynamic
// size, the gpt_tiny causal decoder at seq 8), stored as graphs whose weights are refilled from a
// seed (weights.h), compiled with the default oneDNN offload and with --external=none, and
// compared with ONNX Runtime 1.30's output on the same model and input (NAME.ref.npy, written by
// make_refs.sh).
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <sstream>

#define BOOST_TEST_MODULE zoo_subset_test
#include <boost/test/unit_test.hpp>

#include "embed/compile.h"
#include "embed/runtime.h"
#include "tests/zoo/weights.h"
#include "tools/npy.h"
#include "vm/context.h"

namespace kiln::zoo {
namespace {

constexpr char kData[] = "tests/zoo/data/";

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<Case> Cases() {
  StatusOr<std::vector<Case>> cases = ParseCases(ReadText(std::string(kData) + "cases.txt"));
  BOOST_TEST_REQUIRE(cases.ok(), cases.status().ToString());
  BOOST_TEST_REQUIRE(cases->size() == 3u);
  return *cases;
}

// The refilled model of `c`, serialized.
std::string FilledModel(const Case& c) {
  onnx::ModelProto model;
  BOOST_TEST_REQUIRE(model.ParseFromString(ReadText(kData + c.name + ".graph.onnx")));
  StatusOr<int> filled = FillWeights(model);
  BOOST_TEST_REQUIRE(filled.ok(), filled.status().ToString());
  BOOST_TEST_REQUIRE(*filled > 0);
  return model.SerializeAsString();
}

// Compiles `c` with `external`, runs it on its input and compares with ONNX Runtime's output:
// each element within rtol 1e-3 and atol 1e-4 x the output's largest magnitude, the bound
// tools/zoo.py uses. f32 kernels that sum in another order than MLAS (blocked GEMM, Winograd-free
// direct convolution, oneDNN's post-op fusion) differ by a few ulps per layer; over 20-50 layers
// that stays below 1e-4 of the output's scale, while any wrong index, layout or fusion is off by
// O(scale).
void RunCase(const Case& c, const std::string& external) {
  BOOST_TEST_CONTEXT(c.name << " with --external=" << external) {
    compiler::CompileOptions options;
    options.external = external;
    std::string model = FilledModel(c);
    StatusOr<std::vector<uint8_t>> kiln = kiln::CompileOnnxBytes(model.data(), model.size(), options);
    BOOST_TEST_REQUIRE(kiln.ok(), kiln.status().ToString());

    StatusOr<std::shared_ptr<Runtime>> runtime = Runtime::Create();
    BOOST_TEST_REQUIRE(runtime.ok(), runtime.status().ToString());
    auto exe = (*runtime)->LoadBytes(kiln->data(), kiln->size());
    BOOST_TEST_REQUIRE(exe.ok(), exe.status().ToString());
    auto context = (*runtime)->NewContext(*exe);
    BOOST_TEST_REQUIRE(context.ok(), context.status().ToString());
    StatusOr<Tensor> input = MakeInput(c, (*runtime)->allocator());
    BOOST_TEST_REQUIRE(input.ok(), input.status().ToString());
    StatusOr<std::vector<Tensor>> outputs = (*context)->Invoke("main", {*input});
    BOOST_TEST_REQUIRE(outputs.ok(), outputs.status().ToString());
    BOOST_TEST_REQUIRE(outputs->size() == 1u);

    StatusOr<Tensor> ref = ReadNpy(kData + c.name + ".ref.npy", (*runtime)->allocator());
    BOOST_TEST_REQUIRE(ref.ok(), ref.status().ToString());
    const Tensor& got = (*outputs)[0];
    BOOST_TEST_REQUIRE((got.dtype() == DType::kF32));
    BOOST_TEST_REQUIRE(got.shape().ToString() == ref->shape().ToString());
    const float* g = got.data_as<float>();
    const float* r = ref->data_as<float>();
    double scale = 0;
    for (int64_t i = 0; i < ref->NumElements(); ++i) scale = std::max(scale, std::fabs(double(r[i])));
    BOOST_TEST_REQUIRE(scale > 0);
    int64_t bad = 0, first_bad = -1;
    double worst = 0;
    for (int64_t i = 0; i < ref->NumElements(); ++i) {
      double err = std::fabs(double(g[i]) - r[i]);  // NaN fails the test below
      if (!(err <= 1e-4 * scale + 1e-3 * std::fabs(double(r[i])))) {
        if (bad++ == 0) first_bad = i;
      }
      if (!(err <= worst)) worst = err;
    }
    BOOST_TEST_MESSAGE(c.name << " --external=" << external << ": max abs error " << worst
                              << " (output scale " << scale << ")");
    BOOST_TEST(bad == 0, bad << " of " << ref->NumElements() << " elements outside tolerance, "
                             << "first at " << first_bad << " (got " << g[first_bad] << ", want "
                             << r[first_bad] << ")");
  }
}

BOOST_AUTO_TEST_CASE(default_offload_matches_onnx_runtime) {
  for (const Case& c : Cases()) RunCase(c, "onednn");
}

BOOST_AUTO_TEST_CASE(jit_only_matches_onnx_runtime) {
  for (const Case& c : Cases()) RunCase(c, "none");
}

// The fill is the contract make_refs.sh relied on: the same seed gives the same bits, and a
// constant range gives exactly that constant.
BOOST_AUTO_TEST_CASE(fill_is_deterministic_and_keeps_constant_tensors) {
  onnx::ModelProto model;
  onnx::TensorProto* w = model.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(100);
  for (int i = 0; i < 100; ++i) w->add_float_data(i % 7 == 0 ? -0.5f : 0.25f);
  onnx::TensorProto* ones = model.mutable_graph()->add_initializer();
  *ones = *w;
  ones->set_name("ones");
  ones->clear_float_data();
  for (int i = 0; i < 100; ++i) ones->add_float_data(1.0f);
  StatusOr<int> stripped = StripWeights(model);
  BOOST_TEST_REQUIRE(stripped.ok());
  BOOST_TEST(*stripped == 2);
  BOOST_TEST(w->float_data_size() == 0);
  onnx::ModelProto again = model;
  BOOST_TEST_REQUIRE(FillWeights(model).ok());
  BOOST_TEST_REQUIRE(FillWeights(again).ok());
  BOOST_TEST(model.graph().initializer(0).raw_data() == again.graph().initializer(0).raw_data());
  const std::string& raw = model.graph().initializer(0).raw_data();
  BOOST_TEST_REQUIRE(raw.size() == 400u);
  const float* v = reinterpret_cast<const float*>(raw.data());
  float lo = v[0], hi = v[0];
  for (int i = 0; i < 100; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  BOOST_TEST(lo >= -0.5f);
  BOOST_TEST(hi <= 0.25f);
  BOOST_TEST(hi - lo > 0.5f);  // spread over the range, not one value
  const float* o = reinterpret_cast<const float*>(model.graph().initializer(1).raw_data().data());
  for (int i = 0; i < 100; ++i) BOOST_TEST_REQUIRE(o[i] == 1.0f);
}

BOOST_AUTO_TEST_CASE(malformed_fill_tags_are_errors_naming_the_initializer) {
  onnx::ModelProto model;
  onnx::TensorProto* w = model.mutable_graph()->add_initializer();
  w->set_name("conv.weight");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->set_doc_string("kiln-fill uniform 1 nope");
  StatusOr<int> filled = FillWeights(model);
  BOOST_TEST_REQUIRE(!filled.ok());
  BOOST_TEST(filled.status().message().find("conv.weight") != std::string::npos);
}

}  // namespace
}  // namespace kiln::zoo
