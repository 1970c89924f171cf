// The ONNX conformance runner: one ONNX backend node test (a folder with model.onnx and
// test_data_set_*/{input,output}_*.pb) compiled by kiln, run on the JIT, and compared.
//
// The test data comes from Debian's libonnx-testdata (tools/setup.sh installs it). Its folder
// is $KILN_ONNX_TESTDATA if set, else /usr/share/libonnx-testdata/data/node.
#ifndef KILN_TESTS_CONFORMANCE_RUNNER_H_
#define KILN_TESTS_CONFORMANCE_RUNNER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "embed/runtime.h"
#include "vm/executable.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln::conformance {

inline constexpr char kDefaultTestDataDir[] = "/usr/share/libonnx-testdata/data/node";

/// $KILN_ONNX_TESTDATA if set and non-empty, else kDefaultTestDataDir.
std::string TestDataDir();

/// The names of the test folders in `dir` (those holding a model.onnx), sorted. NotFound naming
/// the folder (and how to install it) when it does not exist or holds no tests.
StatusOr<std::vector<std::string>> ListTests(const std::string& dir);

/// Test names from a list file: one per line; blank lines and text after '#' are ignored.
/// NotFound naming the path if it cannot be read.
StatusOr<std::vector<std::string>> ReadTestList(const std::string& path);

/// numpy.allclose semantics: |got - want| <= atol + rtol * |want|.
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
  /// bf16 elements of the same sign may also differ by this many units in the last place.
  int bf16_ulps = 0;
};

/// Ok if `got` equals `want`: same dtype and shape; floats within `tol` (NaN matches NaN, an
/// infinity only the same infinity); integers and bools exactly. Otherwise InvalidArgument with
/// a one-line reason: the mismatching count and the worst element with its index.
Status CompareTensors(const Tensor& got, const Tensor& want, const Tolerance& tol = {});

struct TestResult {
  bool passed = false;
  std::string reason;  // one line; empty when passed
  int data_sets = 0;   // data sets run (all of them when passed)
  double seconds = 0;  // compile + load + runs
};

struct RunnerOptions {
  Tolerance tolerance;
  /// CompileOptions::external ("onednn", "none"); empty: the compiler's default.
  std::string external;
  /// Each Invoke stops after this (0: no limit). Compilation is not bounded: the sweep runs
  /// tests in child processes with a wall-clock limit for that.
  std::chrono::milliseconds run_timeout{60000};
};

/// Runs node tests. One JIT engine (and so one kernel-code cache) serves every test a Runner
/// runs. Not thread-safe: one test at a time.
class Runner {
 public:
  /// Creates a kiln::Runtime (JIT, oneDNN, $KILN_PLUGINS) as `kiln run` does.
  static StatusOr<std::unique_ptr<Runner>> Create(const RunnerOptions& options = {});

  /// Compiles `dir`/model.onnx (CompileOnnxFile, default options but `external`), loads it, runs
  /// every test_data_set_* in order and compares every output. The first failure decides the
  /// reason, which starts with the stage: "compile: ...", "load: ...", "test_data_set_0: ...".
  /// Where the model wants bf16, a UINT16 data file is read as bf16 (ONNX's generator writes
  /// bf16 data that way, numpy having no bfloat16). The tests whose bf16 reference ONNX 1.12
  /// computed by truncation allow one bf16 ulp (TolerancesFor in runner.cc).
  TestResult Run(const std::string& dir);

 private:
  explicit Runner(const RunnerOptions& options) : options_(options) {}
  Status RunDataSet(const std::shared_ptr<const Executable>& exe, const std::string& dir,
                    const Tolerance& tolerance);

  RunnerOptions options_;
  std::shared_ptr<Runtime> runtime_;
  LoadOptions load_;  // runtime_'s
};

/// Flattens a message to one line (newlines and tabs become spaces).
std::string OneLine(std::string text);

}  // namespace kiln::conformance

#endif  // KILN_TESTS_CONFORMANCE_RUNNER_H_
