// Every ONNX backend node model the compiler accepts must load: compiles each model of the
// conformance data (tests/conformance/runner.h's folder) and loads the bytes with bind=false,
// so the compiler can never again write a file its own loader rejects (issue 17, finding 2).
// Models the compiler refuses are counted, not failed; expected_pass.txt's must all compile.
#define BOOST_TEST_MODULE load_all_test
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "embed/compile.h"
#include "tests/conformance/runner.h"
#include "vm/executable.h"

namespace kiln::conformance {
namespace {

constexpr char kListPath[] = "tests/conformance/expected_pass.txt";

BOOST_AUTO_TEST_CASE(every_compiled_node_model_loads) {
  std::string dir = TestDataDir();
  StatusOr<std::vector<std::string>> tests = ListTests(dir);
  BOOST_REQUIRE_MESSAGE(tests.ok(), tests.status().ToString());
  StatusOr<std::vector<std::string>> listed = ReadTestList(kListPath);
  BOOST_REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
  std::set<std::string> must_compile(listed->begin(), listed->end());

  auto start = std::chrono::steady_clock::now();
  LoadOptions verify_only;
  verify_only.bind = false;
  // "onednn" (the default: oneDNN claims regions) and "none" (JIT kernels only) write different
  // files from the same model; both must load.
  for (const char* external : {"onednn", "none"}) {
    compiler::CompileOptions options;
    options.external = external;
    int loaded = 0, refused = 0;
    for (const std::string& name : *tests) {
      StatusOr<std::vector<uint8_t>> bytes =
          kiln::CompileOnnxFile(dir + "/" + name + "/model.onnx", options);
      if (!bytes.ok()) {
        ++refused;
        BOOST_CHECK_MESSAGE(must_compile.count(name) == 0,
                            name << " is in expected_pass.txt but does not compile: "
                                 << OneLine(bytes.status().ToString()));
        continue;
      }
      StatusOr<std::shared_ptr<const Executable>> exe =
          Executable::LoadBytes(bytes->data(), bytes->size(), verify_only);
      BOOST_CHECK_MESSAGE(exe.ok(), name << " (external '" << external
                                         << "'): the compiler wrote a file its loader rejects: "
                                         << OneLine(exe.status().ToString()));
      loaded += exe.ok();
    }
    std::printf("external '%s': %d of %zu node models compiled and loaded, %d refused by the "
                "compiler\n", external, loaded, tests->size(), refused);
    BOOST_TEST(loaded >= static_cast<int>(must_compile.size()));
  }
  std::printf("%.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace
}  // namespace kiln::conformance
