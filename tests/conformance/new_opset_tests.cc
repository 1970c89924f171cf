// Runs kiln's opset 18-21 conformance tests (tests/conformance/new_opsets/data, made by
// new_opsets/make_tests.py with ONNX Runtime's outputs as the reference) and fails if any of
// them fails: libonnx-testdata 1.12 has no tests past opset 17.
#define BOOST_TEST_MODULE new_opset_tests
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/conformance/runner.h"

namespace kiln::conformance {
namespace {

constexpr char kDataDir[] = "tests/conformance/new_opsets/data";

BOOST_AUTO_TEST_CASE(every_new_opset_test_passes) {
  StatusOr<std::vector<std::string>> tests = ListTests(kDataDir);
  BOOST_REQUIRE_MESSAGE(tests.ok(), tests.status().ToString());
  // make_tests.py writes 46; fewer means the data went missing from the runfiles.
  BOOST_TEST(tests->size() >= 46u);
  StatusOr<std::unique_ptr<Runner>> runner = Runner::Create();
  BOOST_REQUIRE_MESSAGE(runner.ok(), runner.status().ToString());
  int passed = 0;
  for (const std::string& name : *tests) {
    TestResult r = (*runner)->Run(std::string(kDataDir) + "/" + name);
    BOOST_TEST(r.passed, name + ": " + r.reason);
    BOOST_TEST(r.data_sets == 1, name);
    passed += r.passed ? 1 : 0;
  }
  std::printf("%d passed of %zu\n", passed, tests->size());
}

}  // namespace
}  // namespace kiln::conformance
