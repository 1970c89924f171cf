// The kiln binary end to end: inspect, run (named and positional inputs, --output-dir,
// --timeout-ms), exit codes and error messages for bad files and bad arguments.
#define BOOST_TEST_MODULE kiln_cli_test
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "jit/compute.h"
#include "jit/kir_serialize.h"
#include "tools/npy.h"
#include "vm/builder.h"
#include "vm/context.h"

namespace kiln {
namespace {

struct Result {
  int code;
  std::string out;  // stdout and stderr together
};

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

Result Kiln(const std::string& args) {
  std::string cmd = "tools/kiln " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// @main(x: f32[n, 3], k: i64[]) -> (k, x, w): no kernels, so it runs without a kernel provider.
// @spin(): loops forever.
std::string WriteProgram() {
  ExecutableBuilder b("cli test");
  float w[2] = {0.5f, -1.5f};
  int c = b.AddConstant("w", DType::kF32, {2}, w, sizeof(w));
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{-1, "n"}, {3, ""}}, false});
  f.AddParam(ValueSpec{"k", DType::kI64, {}, false});
  f.AddResult(ValueSpec{"k", DType::kI64, {}, false});
  f.AddResult(ValueSpec{"x", DType::kF32, {{-1, "n"}, {3, ""}}, false});
  f.AddResult(ValueSpec{"w", DType::kF32, {{2, ""}}, false});
  f.SetSourceNode("Identity_0");
  f.LoadConst(2, c);
  f.Ret({1, 0, 2});
  FunctionBuilder& spin = b.AddFunction("spin");
  Label top = spin.NewLabel();
  spin.Bind(top);
  spin.Move(1, 0);
  spin.Goto(top);
  spin.set_register_count(2);
  MetadataDef meta;
  meta.entry = "main";
  b.SetMetadata(meta);
  std::string path = TmpDir() + "/cli.kiln";
  BOOST_REQUIRE(b.WriteFile(path).ok());
  return path;
}

std::string WriteNpyFile(const std::string& name, const Tensor& t) {
  std::string path = TmpDir() + "/" + name;
  BOOST_REQUIRE(WriteNpy(path, t).ok());
  return path;
}

BOOST_AUTO_TEST_CASE(usage_and_unknown_commands) {
  BOOST_TEST(Kiln("").code == 2);
  Result r = Kiln("--help");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(Contains(r.out, "inspect"));
  r = Kiln("frobnicate");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "unknown command 'frobnicate'"));
}

BOOST_AUTO_TEST_CASE(inspect_prints_header_disassembly_tables_and_sizes) {
  std::string path = WriteProgram();
  Result r = Kiln("inspect " + path);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "format 1.0, producer 'cli test'"));
  BOOST_TEST(Contains(r.out, "func @main(x: f32[n, 3], k: i64[]) -> (k: i64[], x: f32[n, 3], w: f32[2])"));
  BOOST_TEST(Contains(r.out, "load_const r2 constants[0] 'w'    ; Identity_0"));
  BOOST_TEST(Contains(r.out, "goto L0"));
  BOOST_TEST(Contains(r.out, "[0] w f32[2] at "));
  BOOST_TEST(Contains(r.out, "constant data     8 bytes"));
}

BOOST_AUTO_TEST_CASE(inspect_rejects_a_corrupt_file_with_where_and_what) {
  std::string path = TmpDir() + "/bad.kiln";
  std::ofstream(path) << "this is not an executable at all";
  Result r = Kiln("inspect " + path);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "INVALID_FORMAT"));
  BOOST_TEST(Contains(r.out, path));
  r = Kiln("inspect " + TmpDir() + "/missing.kiln");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "NOT_FOUND"));
}

BOOST_AUTO_TEST_CASE(run_with_named_and_positional_inputs_writes_outputs) {
  std::string path = WriteProgram();
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t k = 42;
  std::string xp = WriteNpyFile("x.npy", Tensor::Wrap(x, DType::kF32, Shape{2, 3}));
  std::string kp = WriteNpyFile("k.npy", Tensor::Wrap(&k, DType::kI64, Shape()));
  std::string out_dir = TmpDir() + "/out";
  BOOST_REQUIRE(std::system(("mkdir -p " + out_dir).c_str()) == 0);
  Result r = Kiln("run " + path + " --input k=" + kp + " --input x=" + xp + " --output-dir " + out_dir);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "k: i64[] [42]"));
  BOOST_TEST(Contains(r.out, "x: f32[2, 3] [1, 2, 3, 4, 5, 6]"));
  BOOST_TEST(Contains(r.out, "w: f32[2] [0.5, -1.5]"));
  auto w = ReadNpy(out_dir + "/w.npy", DefaultAllocator());
  BOOST_REQUIRE(w.ok());
  BOOST_TEST(w->data_as<float>()[1] == -1.5f);
  r = Kiln("run " + path + " " + xp + " " + kp);  // positional, in parameter order
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "k: i64[] [42]"));
}

BOOST_AUTO_TEST_CASE(run_rejects_inputs_that_do_not_match) {
  std::string path = WriteProgram();
  float x[6] = {};
  int64_t k = 1;
  std::string xp = WriteNpyFile("x2.npy", Tensor::Wrap(x, DType::kF32, Shape{3, 2}));
  std::string kp = WriteNpyFile("k2.npy", Tensor::Wrap(&k, DType::kI64, Shape()));
  Result r = Kiln("run " + path + " --input x=" + xp + " --input k=" + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 0 'x': dim 1 is 2, expected 3"), r.out);
  r = Kiln("run " + path + " --input y=" + xp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "no input named 'y' (inputs: x, k)"), r.out);
  r = Kiln("run " + path + " --input x=" + xp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "missing input 1 'k'"), r.out);
  r = Kiln("run " + path + " --input x=" + TmpDir() + "/nope.npy --input k=" + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "nope.npy"), r.out);
  r = Kiln("run " + path + " --bogus");
  BOOST_TEST(r.code == 2);
  r = Kiln("run " + path + " --timeout-ms -5");
  BOOST_TEST(r.code == 2);
}

BOOST_AUTO_TEST_CASE(run_timeout_stops_an_infinite_loop) {
  std::string path = WriteProgram();
  Result r = Kiln("run " + path + " --function spin --timeout-ms 100");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "DEADLINE_EXCEEDED: in 'spin' at pc 1 (goto)"), r.out);
}

// Reads the number after "key": in a one-line JSON object; NaN if absent.
double JsonNumber(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

BOOST_AUTO_TEST_CASE(bench_reports_first_call_percentiles_and_memory_as_json) {
  std::string path = WriteProgram();
  Result r = Kiln("bench " + path + " --shape n=4 --iters 20 --warmup 2 --json");
  BOOST_TEST(r.code == 0, r.out);
  for (const char* key : {"first_ms", "p50_ms", "p90_ms", "p99_ms", "jit_compiles", "jit_ms", "peak_rss_mb"}) {
    BOOST_TEST(!std::isnan(JsonNumber(r.out, key)), key);
  }
  BOOST_TEST(JsonNumber(r.out, "first_ms") > 0.0);
  BOOST_TEST(JsonNumber(r.out, "p50_ms") <= JsonNumber(r.out, "p90_ms"));
  BOOST_TEST(JsonNumber(r.out, "p90_ms") <= JsonNumber(r.out, "p99_ms"));
  BOOST_TEST(JsonNumber(r.out, "peak_rss_mb") > 1.0);
  BOOST_TEST(JsonNumber(r.out, "iters") == 20.0);
  r = Kiln("bench " + path + " --shape n=4 --iters 3");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "first call"));
  BOOST_TEST(Contains(r.out, "p99"));
}

BOOST_AUTO_TEST_CASE(bench_errors_name_what_is_missing_or_wrong) {
  std::string path = WriteProgram();
  Result r = Kiln("bench " + path);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 'x' (x: f32[n, 3]): dim 0 is symbolic: give --shape n=N"), r.out);
  r = Kiln("bench " + path + " --shape n=-1");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "--shape wants a non-negative integer"), r.out);
  r = Kiln("bench " + path + " --iters 0");
  BOOST_TEST(r.code == 2);
  r = Kiln("bench " + path + " --function nope --shape n=1");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "no function named 'nope'"), r.out);
  r = Kiln("bench " + path + " --function spin --timeout-ms 50");  // loops forever
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "DEADLINE_EXCEEDED: in 'spin'"), r.out);
}

BOOST_AUTO_TEST_CASE(profile_prints_tables_and_writes_a_chrome_trace) {
  std::string path = WriteProgram();
  std::string trace = TmpDir() + "/trace.json";
  Result r = Kiln("profile " + path + " --shape n=2 --iters 3 --trace " + trace);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "3 profiled runs after one warm-up"), r.out);
  BOOST_TEST(Contains(r.out, "load_const"), r.out);
  BOOST_TEST(Contains(r.out, "6 instructions"), r.out);  // 2 per run
  BOOST_TEST(Contains(r.out, "trace: " + trace + " (6 events)"), r.out);
  std::ifstream in(trace);
  std::stringstream text;
  text << in.rdbuf();
  BOOST_TEST(text.str().rfind("{\"traceEvents\": [", 0) == 0u);
  BOOST_TEST(Contains(text.str(), "\"node\": \"Identity_0\""), text.str());
  r = Kiln("profile " + path);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "give --shape n=N"), r.out);
  r = Kiln("profile " + path + " --iters 0");
  BOOST_TEST(r.code == 2);
  r = Kiln("profile " + path + " --function spin --timeout-ms 50");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "DEADLINE_EXCEEDED"), r.out);
}

// kiln run / bench bind the JIT: a kernel stored as kernel IR is compiled on first use.
BOOST_AUTO_TEST_CASE(run_and_bench_jit_compile_kernel_payloads) {
  ExecutableBuilder b;
  jit::Operand x{DType::kF32, 1, {}};
  jit::Kernel add = jit::ElementwiseBinary("add", x, x, DType::kF32,
                                           [](jit::Expr a, jit::Expr c) { return a + c; });
  KernelDef def{"add", {DType::kF32, DType::kF32}, {DType::kF32}};
  def.payload_format = jit::kPayloadFormat;
  def.payload = jit::SerializeKernel(add);
  int k = b.AddKernel(def);
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{3, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{3, ""}}, false});
  f.LoadConsti(1, 12);
  f.AllocStorage(2, 1);
  f.AllocTensor(3, 2, 0, DType::kF32, {3});
  f.InvokeKernel(k, {0, 0}, {3});
  f.Ret({3});
  std::string path = TmpDir() + "/jit_add.kiln";
  BOOST_REQUIRE(b.WriteFile(path).ok());
  float xs[3] = {1.5f, -2, 4};
  std::string xp = WriteNpyFile("jit_x.npy", Tensor::Wrap(xs, DType::kF32, Shape{3}));
  Result r = Kiln("run " + path + " " + xp);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "y: f32[3] [3, -4, 8]"), r.out);
  r = Kiln("bench " + path + " --iters 5 --json");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(JsonNumber(r.out, "jit_compiles") >= 1.0, r.out);
  BOOST_TEST(JsonNumber(r.out, "jit_ms") > 0.0, r.out);
}

// A vendor runtime added without rebuilding kiln: the example plugin, by flag or environment.
BOOST_AUTO_TEST_CASE(run_loads_vendor_plugins) {
  ExecutableBuilder b;
  std::string blob = "Relu";
  int region = b.AddExternalRegion({"example_0", "example", {blob.begin(), blob.end()}, {}, 1, 1});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{3, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{3, ""}}, false});
  f.LoadConsti(1, 12);
  f.AllocStorage(2, 1);
  f.AllocTensor(3, 2, 0, DType::kF32, {3});
  f.InvokeExternal(region, {0}, {3});
  f.Ret({3});
  std::string path = TmpDir() + "/relu.kiln";
  BOOST_REQUIRE(b.WriteFile(path).ok());
  float x[3] = {-2, 0.5f, 3};
  std::string xp = WriteNpyFile("relu_x.npy", Tensor::Wrap(x, DType::kF32, Shape{3}));
  const std::string plugin = "examples/vendor_plugin/libkiln_example_vendor.so";

  Result r = Kiln("run " + path + " " + xp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "no runtime is registered for vendor 'example' (needed by region 'example_0'"), r.out);
  r = Kiln("run " + path + " " + xp + " --plugin " + plugin);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "y: f32[3] [0, 0.5, 3]"), r.out);
  r = Kiln("run " + path + " " + xp + " --plugin " + TmpDir() + "/missing.so");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "missing.so: no such file"), r.out);
  BOOST_REQUIRE(setenv("KILN_PLUGINS", plugin.c_str(), 1) == 0);
  r = Kiln("run " + path + " " + xp);
  unsetenv("KILN_PLUGINS");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "y: f32[3] [0, 0.5, 3]"), r.out);
}

}  // namespace
}  // namespace kiln
