// The conformance runner's parts: tensor comparison (tolerances, NaN, infinities, exact
// integers), test lists, test discovery, and Runner::Run on test folders written here.
#define BOOST_TEST_MODULE runner_test
#include "tests/conformance/runner.h"

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tools/tensor_file.h"

namespace kiln::conformance {
namespace {

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

template <typename T>
Tensor Wrap(std::vector<T>& v, DType dtype, const Shape& shape) {
  return Tensor::Wrap(v.data(), dtype, shape);
}

BOOST_AUTO_TEST_CASE(floats_compare_with_allclose_tolerance) {
  std::vector<float> want = {1.0f, -2.0f, 0.0f, 1000.0f};
  std::vector<float> got = {1.0009f, -2.0019f, 5e-8f, 1000.9f};  // each inside atol + rtol*|want|
  Tensor w = Wrap(want, DType::kF32, Shape{2, 2});
  BOOST_TEST(CompareTensors(Wrap(got, DType::kF32, Shape{2, 2}), w).ok());
  got[3] = 1001.2f;  // 1.2 > 1e-7 + 1e-3 * 1000
  Status s = CompareTensors(Wrap(got, DType::kF32, Shape{2, 2}), w);
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.message() == "1 of 4 values differ; worst at [1, 1]: got 1001.20001, expected 1000",
             s.message());
  got[2] = 2e-7f;  // 0 expected: only atol applies
  s = CompareTensors(Wrap(got, DType::kF32, Shape{2, 2}), w);
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(Contains(s.message(), "2 of 4 values differ; worst at [1, 1]"), s.message());
  // Custom tolerances.
  BOOST_TEST(CompareTensors(Wrap(got, DType::kF32, Shape{2, 2}), w, {1e-2, 1e-6}).ok());
}

BOOST_AUTO_TEST_CASE(nan_matches_nan_and_infinities_match_themselves) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = INFINITY;
  std::vector<double> want = {nan, inf, -inf, 1.0};
  std::vector<double> got = want;
  Tensor w = Wrap(want, DType::kF64, Shape{4});
  BOOST_TEST(CompareTensors(Wrap(got, DType::kF64, Shape{4}), w).ok());
  got[0] = 0.0;
  Status s = CompareTensors(Wrap(got, DType::kF64, Shape{4}), w);
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(Contains(s.message(), "worst at [0]: got 0, expected nan"), s.message());
  got = want;
  got[3] = nan;
  BOOST_TEST(!CompareTensors(Wrap(got, DType::kF64, Shape{4}), w).ok());
  got = want;
  got[1] = -inf;
  s = CompareTensors(Wrap(got, DType::kF64, Shape{4}), w);
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(Contains(s.message(), "got -inf, expected inf"), s.message());
  got = want;
  got[1] = 1e308;
  BOOST_TEST(!CompareTensors(Wrap(got, DType::kF64, Shape{4}), w).ok());
}

// A NaN or Inf where the reference is finite fails wherever it is (first, middle, last), in
// f32 and f64, with any tolerance; the message names the element.
BOOST_AUTO_TEST_CASE(nan_or_inf_where_reference_is_finite_fails_in_any_position) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = INFINITY;
  for (int at : {0, 2, 4}) {
    for (double bad : {nan, inf, -inf}) {
      std::vector<double> want = {1, 2, 3, 4, 5}, got = want;
      got[at] = bad;
      Status s = CompareTensors(Wrap(got, DType::kF64, Shape{5}),
                                Wrap(want, DType::kF64, Shape{5}), {1e30, 1e30});
      BOOST_REQUIRE_MESSAGE(!s.ok(), "at=" << at << " bad=" << bad);
      BOOST_TEST(Contains(s.message(), "1 of 5 values differ; worst at [" + std::to_string(at)),
                 s.message());
      std::vector<float> wantf(want.begin(), want.end()), gotf(got.begin(), got.end());
      BOOST_TEST(!CompareTensors(Wrap(gotf, DType::kF32, Shape{5}),
                                 Wrap(wantf, DType::kF32, Shape{5}), {1e30, 1e30})
                      .ok(),
                 "f32 at=" << at << " bad=" << bad);
    }
  }
}

BOOST_AUTO_TEST_CASE(integers_and_bools_compare_exactly) {
  std::vector<int64_t> want = {1, -5, 1LL << 40};
  std::vector<int64_t> got = want;
  Tensor w = Wrap(want, DType::kI64, Shape{3});
  BOOST_TEST(CompareTensors(Wrap(got, DType::kI64, Shape{3}), w).ok());
  got[2] += 1;  // within a float tolerance, but integers are exact
  Status s = CompareTensors(Wrap(got, DType::kI64, Shape{3}), w);
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.message() ==
             "1 of 3 values differ; worst at [2]: got 1099511627777, expected 1099511627776");
  std::vector<uint8_t> bw = {1, 0}, bg = {1, 1};
  s = CompareTensors(Wrap(bg, DType::kBool, Shape{2}), Wrap(bw, DType::kBool, Shape{2}));
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(Contains(s.message(), "worst at [1]: got 1, expected 0"), s.message());
}

BOOST_AUTO_TEST_CASE(half_precision_is_widened) {
  // f16: 0x3c00 = 1, 0xc000 = -2, 0x7e00 = NaN, 0x0001 = 2^-24; bf16: 0x3fc0 = 1.5.
  std::vector<uint16_t> want = {0x3c00, 0xc000, 0x7e00, 0x0001};
  std::vector<uint16_t> got = {0x3c00, 0xc000, 0x7e00, 0x0001};
  BOOST_TEST(
      CompareTensors(Wrap(got, DType::kF16, Shape{4}), Wrap(want, DType::kF16, Shape{4})).ok());
  got[1] = 0xc002;  // -2.0039: outside 1e-3 relative (one ulp, -2.00195, is inside)
  Status s = CompareTensors(Wrap(got, DType::kF16, Shape{4}), Wrap(want, DType::kF16, Shape{4}));
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(Contains(s.message(), "got -2.00390625, expected -2"), s.message());
  std::vector<uint16_t> b = {0x3fc0};
  std::vector<uint16_t> b2 = {0x3fc1};
  s = CompareTensors(Wrap(b2, DType::kBF16, Shape{1}), Wrap(b, DType::kBF16, Shape{1}));
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(Contains(s.message(), "expected 1.5"), s.message());
}

// Tolerance::bf16_ulps admits exactly that many bf16 steps, never a sign change.
BOOST_AUTO_TEST_CASE(bf16_ulps_admit_adjacent_values_only) {
  Tolerance one_ulp;
  one_ulp.bf16_ulps = 1;
  std::vector<uint16_t> want = {0x3fc0, 0x3f80, 0x0000};  // 1.5, 1, +0
  std::vector<uint16_t> got = {0x3fc1, 0x3f7f, 0x0001};   // one step away each
  BOOST_TEST(
      CompareTensors(Wrap(got, DType::kBF16, Shape{3}), Wrap(want, DType::kBF16, Shape{3}), one_ulp)
          .ok());
  got[0] = 0x3fc2;  // two steps
  BOOST_TEST(!CompareTensors(Wrap(got, DType::kBF16, Shape{3}), Wrap(want, DType::kBF16, Shape{3}),
                             one_ulp)
                  .ok());
  got = {0x3fc0, 0x3f80, 0x8001};  // -2^-133 against +0: a sign change, tiny but not one step
  Tolerance loose = one_ulp;
  loose.atol = 0;
  BOOST_TEST(
      !CompareTensors(Wrap(got, DType::kBF16, Shape{3}), Wrap(want, DType::kBF16, Shape{3}), loose)
           .ok());
}

BOOST_AUTO_TEST_CASE(dtype_and_shape_must_match) {
  std::vector<float> a = {1, 2, 3, 4};
  std::vector<double> d = {1, 2, 3, 4};
  Status s = CompareTensors(Wrap(a, DType::kF32, Shape{4}), Wrap(d, DType::kF64, Shape{4}));
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.message() == "dtype f32, expected f64");
  s = CompareTensors(Wrap(a, DType::kF32, Shape{4}), Wrap(a, DType::kF32, Shape{2, 2}));
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.message() == "shape [4], expected [2, 2]");
  std::vector<float> none;
  BOOST_TEST(
      CompareTensors(Wrap(none, DType::kF32, Shape{0, 3}), Wrap(none, DType::kF32, Shape{0, 3}))
          .ok());
}

BOOST_AUTO_TEST_CASE(test_lists_skip_comments_and_blank_lines) {
  std::string path = TmpDir() + "/list.txt";
  std::ofstream(path)
      << "# header\n\ntest_add\n  test_relu  # trailing comment\n#test_gone\ntest_abs\r\n";
  StatusOr<std::vector<std::string>> names = ReadTestList(path);
  BOOST_REQUIRE(names.ok());
  BOOST_TEST(*names == (std::vector<std::string>{"test_add", "test_relu", "test_abs"}),
             boost::test_tools::per_element());
  names = ReadTestList(TmpDir() + "/no_list.txt");
  BOOST_REQUIRE(!names.ok());
  BOOST_TEST(names.status().code() == StatusCode::kNotFound);
}

// Writes a node-test folder: model.onnx from ONNX text, and one data set.
void WriteTest(const std::string& dir, const std::string& model_text,
               const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  BOOST_REQUIRE(
      std::system(("rm -rf " + dir + " && mkdir -p " + dir + "/test_data_set_0").c_str()) == 0);
  onnx::ModelProto model;
  onnx::Status parsed = onnx::OnnxParser::Parse(model, model_text.c_str());
  BOOST_REQUIRE_MESSAGE(parsed.IsOK(), parsed.ErrorMessage());
  std::ofstream out(dir + "/model.onnx", std::ios::binary);
  BOOST_REQUIRE(model.SerializeToOstream(&out));
  out.close();
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string p = dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb";
    BOOST_REQUIRE(tools::WriteTensorProto(p, inputs[i], "in").ok());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string p = dir + "/test_data_set_0/output_" + std::to_string(i) + ".pb";
    BOOST_REQUIRE(tools::WriteTensorProto(p, outputs[i], "out").ok());
  }
}

BOOST_AUTO_TEST_CASE(list_tests_finds_model_folders_and_names_a_missing_folder) {
  std::string root = TmpDir() + "/node";
  std::vector<float> x = {1};
  Tensor t = Tensor::Wrap(x.data(), DType::kF32, Shape{1});
  const char* kModel =
      R"(<ir_version: 8, opset_import: ["" : 13]> g (float[1] x) => (float[1] y) { y = Relu(x) })";
  WriteTest(root + "/test_b", kModel, {t}, {t});
  WriteTest(root + "/test_a", kModel, {t}, {t});
  BOOST_REQUIRE(std::system(("mkdir -p " + root + "/not_a_test").c_str()) == 0);
  StatusOr<std::vector<std::string>> tests = ListTests(root);
  BOOST_REQUIRE_MESSAGE(tests.ok(), tests.status().ToString());
  BOOST_TEST(*tests == (std::vector<std::string>{"test_a", "test_b"}),
             boost::test_tools::per_element());
  tests = ListTests(TmpDir() + "/no_such_folder");
  BOOST_REQUIRE(!tests.ok());
  BOOST_TEST(tests.status().code() == StatusCode::kNotFound);
  BOOST_TEST(Contains(tests.status().message(), "libonnx-testdata"), tests.status().message());
  BOOST_TEST(Contains(tests.status().message(), "no_such_folder"), tests.status().message());
}

BOOST_AUTO_TEST_CASE(run_reports_the_compile_stage_of_a_failure) {
  StatusOr<std::unique_ptr<Runner>> runner = Runner::Create();
  BOOST_REQUIRE_MESSAGE(runner.ok(), runner.status().ToString());
  std::string dir = TmpDir() + "/node/test_unsupported";
  std::vector<float> x = {1, 2};
  Tensor t = Tensor::Wrap(x.data(), DType::kF32, Shape{2});
  WriteTest(dir, R"(<ir_version: 8, opset_import: ["" : 13]> g (float[2] x) => (float[2] y) {
                     y = Frobnicate(x) })",
            {t}, {t});
  TestResult r = (*runner)->Run(dir);
  BOOST_TEST(!r.passed);
  BOOST_TEST(r.reason.rfind("compile: ", 0) == 0u, r.reason);
  BOOST_TEST(Contains(r.reason, "Frobnicate"), r.reason);

  std::ofstream(dir + "/model.onnx") << "not a model";
  r = (*runner)->Run(dir);
  BOOST_TEST(!r.passed);
  BOOST_TEST(r.reason.rfind("compile: INVALID_FORMAT", 0) == 0u, r.reason);

  r = (*runner)->Run(TmpDir() + "/node/test_missing");
  BOOST_TEST(!r.passed);
  BOOST_TEST(r.reason.rfind("compile: NOT_FOUND", 0) == 0u, r.reason);
}

// Through the compiler and the JIT: a correct expectation passes, every data set and every
// output is compared, and the reason names the data set, the output and the element.
BOOST_AUTO_TEST_CASE(run_compiles_runs_and_compares_every_data_set_and_output) {
  StatusOr<std::unique_ptr<Runner>> runner = Runner::Create();
  BOOST_REQUIRE_MESSAGE(runner.ok(), runner.status().ToString());
  const char* kModel = R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[2, 3] a, float[2, 3] b) => (float[2, 3] sum, float[2, 3] diff) {
        sum = Add(a, b) diff = Sub(a, b) })";
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {0.5f, -1, 2, 8, 0, -6};
  std::vector<float> sum(6), diff(6);
  for (int i = 0; i < 6; ++i) {
    sum[i] = a[i] + b[i];
    diff[i] = a[i] - b[i];
  }
  Tensor ta = Wrap(a, DType::kF32, Shape{2, 3}), tb = Wrap(b, DType::kF32, Shape{2, 3});
  Tensor tsum = Wrap(sum, DType::kF32, Shape{2, 3}), tdiff = Wrap(diff, DType::kF32, Shape{2, 3});
  std::string dir = TmpDir() + "/node/test_add_sub";
  WriteTest(dir, kModel, {ta, tb}, {tsum, tdiff});
  TestResult r = (*runner)->Run(dir);
  BOOST_TEST(r.passed, r.reason);
  BOOST_TEST(r.data_sets == 1);

  // A second data set whose second output is wrong in one element.
  std::string set1 = dir + "/test_data_set_1";
  BOOST_REQUIRE(std::system(("mkdir -p " + set1).c_str()) == 0);
  std::vector<float> bad = diff;
  bad[4] += 0.5f;
  BOOST_REQUIRE(tools::WriteTensorProto(set1 + "/input_0.pb", ta, "a").ok());
  BOOST_REQUIRE(tools::WriteTensorProto(set1 + "/input_1.pb", tb, "b").ok());
  BOOST_REQUIRE(tools::WriteTensorProto(set1 + "/output_0.pb", tsum, "sum").ok());
  BOOST_REQUIRE(
      tools::WriteTensorProto(set1 + "/output_1.pb", Wrap(bad, DType::kF32, Shape{2, 3}), "diff")
          .ok());
  r = (*runner)->Run(dir);
  BOOST_TEST(!r.passed);
  BOOST_TEST(r.data_sets == 1);
  BOOST_TEST(
      r.reason ==
          "test_data_set_1: INVALID_ARGUMENT: output 1 'diff': 1 of 6 values differ; worst at "
          "[1, 1]: got 5, expected 5.5",
      r.reason);

  // Expected shape and dtype are checked, and a missing input file is reported.
  BOOST_REQUIRE(
      tools::WriteTensorProto(set1 + "/output_1.pb", Wrap(diff, DType::kF32, Shape{3, 2}), "diff")
          .ok());
  r = (*runner)->Run(dir);
  BOOST_TEST(Contains(r.reason, "output 1 'diff': shape [2, 3], expected [3, 2]"), r.reason);
  std::vector<double> wide(diff.begin(), diff.end());
  BOOST_REQUIRE(
      tools::WriteTensorProto(set1 + "/output_1.pb", Wrap(wide, DType::kF64, Shape{2, 3}), "diff")
          .ok());
  r = (*runner)->Run(dir);
  BOOST_TEST(Contains(r.reason, "output 1 'diff': dtype f32, expected f64"), r.reason);
  BOOST_REQUIRE(std::system(("rm " + set1 + "/input_1.pb").c_str()) == 0);
  r = (*runner)->Run(dir);
  BOOST_TEST(r.reason == "test_data_set_1: INVALID_ARGUMENT: 1 input files for 2 parameters",
             r.reason);
}

// ONNX's generator stores bf16 data as UINT16 (numpy has no bfloat16): read as bf16 where the
// model wants bf16.
BOOST_AUTO_TEST_CASE(uint16_files_are_read_as_bf16_where_the_model_wants_bf16) {
  StatusOr<std::unique_ptr<Runner>> runner = Runner::Create();
  BOOST_REQUIRE_MESSAGE(runner.ok(), runner.status().ToString());
  std::string dir = TmpDir() + "/node/test_bf16_identity";
  std::vector<uint16_t> x = {0x3fc0, 0xc000, 0x0000};  // 1.5, -2, 0
  Tensor t = Wrap(x, DType::kBF16, Shape{3});
  WriteTest(dir, R"(<ir_version: 8, opset_import: ["" : 13]> g (bfloat16[3] x) => (bfloat16[3] y) {
                     y = Identity(x) })",
            {}, {});
  for (const char* name : {"input_0.pb", "output_0.pb"}) {
    onnx::TensorProto p;
    p.set_data_type(onnx::TensorProto::UINT16);
    p.add_dims(3);
    for (uint16_t v : x) p.add_int32_data(v);
    std::ofstream out(dir + "/test_data_set_0/" + name, std::ios::binary);
    BOOST_REQUIRE(p.SerializeToOstream(&out));
  }
  TestResult r = (*runner)->Run(dir);
  BOOST_TEST(r.passed, r.reason);
}

}  // namespace
}  // namespace kiln::conformance
