// Links every system dependency and checks its version, so a wrong package fails here first.
#define BOOST_TEST_MODULE deps_test
#include <boost/test/unit_test.hpp>
#include <flatbuffers/base.h>
#include <dnnl.hpp>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/TargetSelect.h>
#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

BOOST_AUTO_TEST_CASE(flatbuffers_is_2_0) {
  BOOST_TEST(FLATBUFFERS_VERSION_MAJOR == 2);
  BOOST_TEST(FLATBUFFERS_VERSION_MINOR == 0);
}

BOOST_AUTO_TEST_CASE(llvm_is_19_and_has_native_target) {
  BOOST_TEST(LLVM_VERSION_MAJOR == 19);
  BOOST_TEST(!llvm::InitializeNativeTarget());
}

BOOST_AUTO_TEST_CASE(onednn_is_2_6_and_creates_an_engine) {
  const dnnl_version_t* v = dnnl_version();
  BOOST_TEST(v->major == 2);
  BOOST_TEST(v->minor == 6);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  BOOST_TEST((engine.get_kind() == dnnl::engine::kind::cpu));
}

BOOST_AUTO_TEST_CASE(onnx_parses_checks_and_infers_shapes) {
  const char* text = R"ONNX(
    <ir_version: 8, opset_import: ["" : 13]>
    agraph (float[N, 4] x) => (float[N, 4] y) {
      y = Relu(x)
    }
  )ONNX";
  onnx::ModelProto model;
  onnx::Status status = onnx::OnnxParser::Parse(model, text);
  BOOST_TEST_REQUIRE(status.IsOK(), status.ErrorMessage());
  onnx::checker::check_model(model);  // throws on an invalid model
  onnx::shape_inference::InferShapes(model);
  BOOST_TEST(model.graph().node(0).op_type() == "Relu");
  BOOST_TEST(model.graph().output(0).type().tensor_type().shape().dim(0).dim_param() == "N");
}
