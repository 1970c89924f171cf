// Runs every ONNX backend node test named in tests/conformance/expected_pass.txt (the tests kiln
// is known to pass; `bazel run //tests/conformance:sweep -- --write-list ...` regrows it) and
// fails if any of them fails. One JIT engine serves all tests.
//
// The test data is read from $KILN_ONNX_TESTDATA, else /usr/share/libonnx-testdata/data/node
// (Debian's libonnx-testdata, installed by tools/setup.sh); a missing folder fails the test.
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

BOOST_AUTO_TEST_CASE(listed_node_tests_pass) {
  StatusOr<std::vector<std::string>> listed = ReadTestList(kListPath);
  BOOST_REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
  std::string dir = TestDataDir();
  StatusOr<std::vector<std::string>> available = ListTests(dir);
  BOOST_REQUIRE_MESSAGE(available.ok(), available.status().ToString());
  std::set<std::string> known(available->begin(), available->end());

  StatusOr<std::unique_ptr<Runner>> runner = Runner::Create();
  BOOST_REQUIRE_MESSAGE(runner.ok(), runner.status().ToString());
  int passed = 0, failed = 0;
  for (const std::string& name : *listed) {
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
  std::printf("%d passed, %d failed\n", passed, failed);
  std::fflush(stdout);
  BOOST_TEST(failed == 0);
}

}  // namespace
}  // namespace kiln::conformance
