// Links every system dependency and checks its version, so a wrong package fails here first.
#define BOOST_TEST_MODULE deps_test
#include <boost/test/unit_test.hpp>
#include <flatbuffers/base.h>
#include <dnnl.hpp>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/TargetSelect.h>

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
