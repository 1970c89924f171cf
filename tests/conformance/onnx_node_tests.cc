// Runs every ONNX backend node test named in tests/conformance/expected_pass.txt (the tests kiln
// is known to pass; `bazel run //tests/conformance:sweep -- --write-list ...` regrows it) and
// fails if any of them fails. One JIT engine serves all tests.
//
// The test data is read from $KILN_ONNX_TESTDATA, else /usr/share/libonnx-testdata/data/node
// (Debian's libonnx-testdata, installed by tools/setup.sh); a missing folder fails the test.
//
// Also runs kiln's own opset 18-21 tests (tests/conformance/new_opsets/data, made by
// new_opsets/make_tests.py with ONNX Runtime 1.30's outputs as the reference), all of which must
// pass: libonnx-testdata 1.12 has no tests past opset 17.
#define BOOST_TEST_MODULE onnx_node_tests
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "tests/conformance/runner.h"

namespace kiln::conformance {
namespace {

constexpr char kListPath[] = "tests/conformance/expected_pass.txt";
constexpr char kNewOpsetDir[] = "tests/conformance/new_opsets/data";

// Runs `names` from `dir` (each must be one of `available`) and reports every failure.
void RunAll(const std::string& dir, const std::vector<std::string>& names,
            const std::vector<std::string>& available) {
  std::set<std::string> known(available.begin(), available.end());
  StatusOr<std::unique_ptr<Runner>> runner = Runner::Create();
  BOOST_REQUIRE_MESSAGE(runner.ok(), runner.status().ToString());
  int passed = 0, failed = 0;
  for (const std::string& name : names) {
    TestResult r;
    if (known.count(name) == 0) {
      r.reason = "no such test in " + dir;
    } else {
      r = (*runner)->Run(dir + "/" + name);
    }
    if (r.passed) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), r.reason.c_str());
      BOOST_ERROR(name + ": " + r.reason);
    }
  }
  std::printf("%s: %d passed, %d failed\n", dir.c_str(), passed, failed);
  std::fflush(stdout);
  BOOST_TEST(failed == 0);
}

BOOST_AUTO_TEST_CASE(listed_node_tests_pass) {
  StatusOr<std::vector<std::string>> listed = ReadTestList(kListPath);
  BOOST_REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
  std::string dir = TestDataDir();
  StatusOr<std::vector<std::string>> available = ListTests(dir);
  BOOST_REQUIRE_MESSAGE(available.ok(), available.status().ToString());
  RunAll(dir, *listed, *available);
}

BOOST_AUTO_TEST_CASE(every_new_opset_test_passes) {
  StatusOr<std::vector<std::string>> tests = ListTests(kNewOpsetDir);
  BOOST_REQUIRE_MESSAGE(tests.ok(), tests.status().ToString());
  // make_tests.py writes 46; fewer means the data went missing from the runfiles.
  BOOST_TEST(tests->size() >= 46u);
  RunAll(kNewOpsetDir, *tests, *tests);
}

}  // namespace
}  // namespace kiln::conformance
