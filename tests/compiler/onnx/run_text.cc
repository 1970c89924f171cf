// See run_text.h.
#include "tests/compiler/onnx/run_text.h"

#include <boost/test/unit_test.hpp>

#include "compiler/compile.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/test_util.h"
#include "vm/disassembler.h"

namespace kiln::compiler::testing {

std::shared_ptr<const Executable> CompileAndLoadText(const std::string& text) {
  CompileOptions options;
  options.external = "none";
  std::string bytes = ModelBytes(text);
  StatusOr<std::vector<uint8_t>> exe_bytes = CompileOnnxBytes(bytes.data(), bytes.size(), options);
  BOOST_TEST_REQUIRE(exe_bytes.ok(), exe_bytes.status().ToString());
  auto exe = LoadWithJit(*exe_bytes);
  BOOST_TEST_REQUIRE(exe.ok(), exe.status().ToString());
  return *exe;
}

std::vector<TensorDataRef> CompileAndRunText(const std::string& text,
                                             const std::vector<TensorDataRef>& inputs,
                                             std::string* listing) {
  std::shared_ptr<const Executable> exe = CompileAndLoadText(text);
  if (listing) *listing = InspectExecutable(*exe);
  auto outs = RunExecutable(exe, inputs);
  BOOST_TEST_REQUIRE(outs.ok(), outs.status().ToString());
  return *outs;
}

}  // namespace kiln::compiler::testing
