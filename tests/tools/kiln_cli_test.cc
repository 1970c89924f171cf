// The kiln binary end to end: compile (exit codes and the compiler's messages), inspect, run
// (named and positional .npy / .pb inputs, --output-dir with .npy or .pb outputs,
// --timeout-ms), exit codes and error messages for bad files, bad inputs and bad arguments, and
// the one flag dialect of every subcommand (--flag=value or --flag value, -h, --version,
// --threads, --dim).
#define BOOST_TEST_MODULE kiln_cli_test
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "serializer/version.h"
#include "tests/jit/test_programs.h"
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
  // The JIT cache is on by default: keep it in the test's own directory, not the user's.
  setenv("XDG_CACHE_HOME", (TmpDir() + "/xdg_cache").c_str(), 1);
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
  jit::testing::AddPassThroughProgram(b);
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
  BOOST_TEST(Contains(r.out, "format " + std::to_string(kFormatMajor) + "." +
                                 std::to_string(kFormatMinor) + ", producer 'cli test'"));
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
  BOOST_TEST(Contains(r.out, "input 0 'x' (" + xp + "): dim 1 is 2, expected x: f32[n, 3]"), r.out);
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
  BOOST_TEST(Contains(r.out, "kiln run: unknown flag --bogus"), r.out);
  r = Kiln("run " + path + " --timeout-ms -5");
  BOOST_TEST(r.code == 2);
}

// A TensorProto file written with the ONNX API (independent of kiln's encoder).
// A TensorProto file `name` in the test directory; the tensor is named `tensor_name` (unnamed
// when empty, as many exporters write them).
std::string WritePbFile(const std::string& name, int type, const std::vector<int64_t>& dims,
                        const void* data, size_t bytes, const std::string& tensor_name = "") {
  onnx::TensorProto p;
  if (!tensor_name.empty()) p.set_name(tensor_name);
  p.set_data_type(type);
  for (int64_t d : dims) p.add_dims(d);
  p.set_raw_data(data, bytes);
  std::string path = TmpDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  BOOST_REQUIRE(p.SerializeToOstream(&out));
  return path;
}

onnx::TensorProto ReadPbFile(const std::string& path) {
  onnx::TensorProto p;
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in.good(), path);
  BOOST_REQUIRE_MESSAGE(p.ParseFromIstream(&in), path);
  return p;
}

BOOST_AUTO_TEST_CASE(run_reads_pb_inputs_named_and_positional) {
  std::string path = WriteProgram();
  float x[6] = {1, 2, 3, 4, 5, 6.5f};
  int64_t k = -9;
  std::string xp = WritePbFile("x.pb", onnx::TensorProto::FLOAT, {2, 3}, x, sizeof(x), "x");
  std::string kp = WritePbFile("k.pb", onnx::TensorProto::INT64, {}, &k, sizeof(k), "k");
  Result r = Kiln("run " + path + " --input x=" + xp + " --input k=" + kp);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "k: i64[] [-9]"), r.out);
  BOOST_TEST(Contains(r.out, "x: f32[2, 3] [1, 2, 3, 4, 5, 6.5]"), r.out);
  // Positional, mixing formats: x from .pb, k from .npy.
  std::string kn = WriteNpyFile("k_pos.npy", Tensor::Wrap(&k, DType::kI64, Shape()));
  r = Kiln("run " + path + " " + xp + " " + kn);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "x: f32[2, 3] [1, 2, 3, 4, 5, 6.5]"), r.out);
  // Typed fields (float_data) instead of raw_data.
  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::FLOAT);
  typed.add_dims(1);
  typed.add_dims(3);
  for (float v : {7.0f, 8.0f, 9.0f}) typed.add_float_data(v);
  std::string tp = TmpDir() + "/typed.pb";
  {
    std::ofstream out(tp, std::ios::binary);
    BOOST_REQUIRE(typed.SerializeToOstream(&out));
  }
  r = Kiln("run " + path + " " + tp + " " + kp);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "x: f32[1, 3] [7, 8, 9]"), r.out);
  // bench and profile take .pb inputs too (no --dim needed then).
  r = Kiln("bench " + path + " --input x=" + xp + " --input k=" + kp + " --iters 2 --json");
  BOOST_TEST(r.code == 0, r.out);
  r = Kiln("profile " + path + " --input x=" + xp + " --input k=" + kp + " --iters 1");
  BOOST_TEST(r.code == 0, r.out);
  r = Kiln("bench " + path + " --input x=" + TmpDir() + "/absent.pb --iters 2");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "absent.pb: no such file"), r.out);
}

BOOST_AUTO_TEST_CASE(run_writes_pb_and_npy_outputs_that_round_trip) {
  std::string path = WriteProgram();
  float x[3] = {0.25f, -1, 3};
  int64_t k = 5;
  std::string xp = WritePbFile("rt_x.pb", onnx::TensorProto::FLOAT, {1, 3}, x, sizeof(x));
  std::string kp = WritePbFile("rt_k.pb", onnx::TensorProto::INT64, {}, &k, sizeof(k));
  std::string out_dir = TmpDir() + "/pb_out";
  BOOST_REQUIRE(std::system(("rm -rf " + out_dir + " && mkdir -p " + out_dir).c_str()) == 0);
  Result r = Kiln("run " + path + " " + xp + " " + kp + " --output-dir " + out_dir + " --output-format pb");
  BOOST_TEST(r.code == 0, r.out);
  // Results in order: k, x, w.
  onnx::TensorProto k_out = ReadPbFile(out_dir + "/output_0.pb");
  BOOST_TEST(k_out.name() == "k");
  BOOST_TEST(k_out.data_type() == onnx::TensorProto::INT64);
  BOOST_TEST(k_out.dims_size() == 0);
  BOOST_TEST(k_out.raw_data() == std::string(reinterpret_cast<const char*>(&k), sizeof(k)));
  onnx::TensorProto x_out = ReadPbFile(out_dir + "/output_1.pb");
  BOOST_TEST(x_out.name() == "x");
  BOOST_TEST(x_out.data_type() == onnx::TensorProto::FLOAT);
  BOOST_TEST(x_out.dims_size() == 2);
  BOOST_TEST(x_out.dims(0) == 1);
  BOOST_TEST(x_out.dims(1) == 3);
  BOOST_TEST(x_out.raw_data() == std::string(reinterpret_cast<const char*>(x), sizeof(x)));
  onnx::TensorProto w_out = ReadPbFile(out_dir + "/output_2.pb");
  BOOST_TEST(w_out.name() == "w");
  float w[2] = {0.5f, -1.5f};
  BOOST_TEST(w_out.raw_data() == std::string(reinterpret_cast<const char*>(w), sizeof(w)));
  // The written outputs are valid inputs again: x back in through output_1.pb.
  r = Kiln("run " + path + " " + out_dir + "/output_1.pb " + out_dir + "/output_0.pb");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "x: f32[1, 3] [0.25, -1, 3]"), r.out);
  // .npy outputs (the default format) hold the same values.
  r = Kiln("run " + path + " " + xp + " " + kp + " --output-dir " + out_dir + " --output-format npy");
  BOOST_TEST(r.code == 0, r.out);
  auto xn = ReadNpy(out_dir + "/x.npy", DefaultAllocator());
  BOOST_REQUIRE(xn.ok());
  BOOST_TEST(xn->TypeString() == "f32[1, 3]");
  BOOST_TEST(xn->data_as<float>()[0] == 0.25f);
  r = Kiln("run " + path + " " + xp + " " + kp + " --output-format json");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "--output-format: wants npy|pb, got 'json'"), r.out);
}

// A TensorProto names the input it holds: given for another input (files swapped, or in the
// wrong order), it is an error naming both, not data run in the wrong place.
BOOST_AUTO_TEST_CASE(run_rejects_pb_inputs_named_for_another_input) {
  std::string path = WriteProgram();
  float x[3] = {1, 2, 3};
  float y[3] = {4, 5, 6};
  int64_t k = 2;
  std::string xp = WritePbFile("named_x.pb", onnx::TensorProto::FLOAT, {1, 3}, x, sizeof(x), "x");
  std::string kp = WritePbFile("named_k.pb", onnx::TensorProto::INT64, {}, &k, sizeof(k), "k");
  // Another input's name on a tensor of the right type and shape: only the name tells.
  std::string other =
      WritePbFile("named_y.pb", onnx::TensorProto::FLOAT, {1, 3}, y, sizeof(y), "y");
  Result r = Kiln("run " + path + " " + other + " " + kp);
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "input 0 'x' (" + other + "): the file holds tensor 'y', not 'x'"),
             r.out);
  r = Kiln("run " + path + " --input x=" + kp + " --input k=" + xp);
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "the file holds tensor 'k', not 'x': give each file for the input it "
                             "names (--input k=" + kp + ")"),
             r.out);
  // bench and profile read inputs the same way.
  r = Kiln("bench " + path + " --input x=" + other + " --input k=" + kp + " --iters 1");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "the file holds tensor 'y', not 'x'"), r.out);
  // Named right, or unnamed: accepted.
  r = Kiln("run " + path + " " + xp + " " + kp);
  BOOST_TEST(r.code == 0, r.out);
  std::string unnamed = WritePbFile("unnamed_y.pb", onnx::TensorProto::FLOAT, {1, 3}, y, sizeof(y));
  r = Kiln("run " + path + " " + unnamed + " " + kp);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "x: f32[1, 3] [4, 5, 6]"), r.out);
}

BOOST_AUTO_TEST_CASE(run_rejects_pb_inputs_that_do_not_match_naming_the_input) {
  std::string path = WriteProgram();
  int64_t k = 1;
  std::string kp = WritePbFile("bad_k.pb", onnx::TensorProto::INT64, {}, &k, sizeof(k));
  double xd[3] = {1, 2, 3};
  std::string wrong_dtype = WritePbFile("x_f64.pb", onnx::TensorProto::DOUBLE, {1, 3}, xd, sizeof(xd));
  Result r = Kiln("run " + path + " --input x=" + wrong_dtype + " --input k=" + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 0 'x' (" + wrong_dtype + "): dtype f64, expected x: f32[n, 3]"), r.out);
  float xf[3] = {1, 2, 3};
  std::string wrong_rank = WritePbFile("x_rank1.pb", onnx::TensorProto::FLOAT, {3}, xf, sizeof(xf));
  r = Kiln("run " + path + " --input x=" + wrong_rank + " --input k=" + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 0 'x' (" + wrong_rank + "): rank 1 (f32[3]), expected x: f32[n, 3]"), r.out);
  std::string wrong_dim = WritePbFile("x_dim.pb", onnx::TensorProto::FLOAT, {3, 1}, xf, sizeof(xf));
  r = Kiln("run " + path + " --input x=" + wrong_dim + " --input k=" + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 0 'x' (" + wrong_dim + "): dim 1 is 1, expected x: f32[n, 3]"), r.out);
  r = Kiln("run " + path + " --input z=" + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "no input named 'z' (inputs: x, k)"), r.out);
  // A truncated file: cut inside raw_data.
  std::string good = WritePbFile("x_full.pb", onnx::TensorProto::FLOAT, {1, 3}, xf, sizeof(xf));
  std::string cut = TmpDir() + "/x_cut.pb";
  BOOST_REQUIRE(std::system(("head -c -5 " + good + " > " + cut).c_str()) == 0);
  r = Kiln("run " + path + " " + cut + " " + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "INVALID_FORMAT: " + cut + ":"), r.out);
  r = Kiln("run " + path + " " + TmpDir() + "/missing.pb " + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "NOT_FOUND: " + TmpDir() + "/missing.pb: no such file"), r.out);
  // A string tensor has no kiln dtype.
  onnx::TensorProto s;
  s.set_data_type(onnx::TensorProto::STRING);
  s.add_dims(1);
  s.add_string_data("hi");
  std::string sp = TmpDir() + "/strings.pb";
  {
    std::ofstream out(sp, std::ios::binary);
    BOOST_REQUIRE(s.SerializeToOstream(&out));
  }
  r = Kiln("run " + path + " " + sp + " " + kp);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "UNSUPPORTED: " + sp), r.out);
}

// A model in ONNX text syntax written as a .onnx file.
std::string WriteModel(const std::string& name, const std::string& text) {
  onnx::ModelProto model;
  onnx::Status parsed = onnx::OnnxParser::Parse(model, text.c_str());
  BOOST_REQUIRE_MESSAGE(parsed.IsOK(), parsed.ErrorMessage());
  std::string path = TmpDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  BOOST_REQUIRE(model.SerializeToOstream(&out));
  return path;
}

BOOST_AUTO_TEST_CASE(compile_errors_print_the_compilers_message_and_exit_non_zero) {
  std::string out = TmpDir() + "/never.kiln";
  Result r = Kiln("compile " + TmpDir() + "/missing.onnx -o " + out);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "kiln compile: NOT_FOUND"), r.out);
  BOOST_TEST(Contains(r.out, "missing.onnx"), r.out);

  std::string junk = TmpDir() + "/junk.onnx";
  std::ofstream(junk) << "definitely not protobuf \xff\xff";
  r = Kiln("compile " + junk + " -o " + out);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "kiln compile: INVALID_FORMAT"), r.out);

  std::string lstm = WriteModel("unsupported.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[2] x) => (float[2] y) { t = Frobnicate(x) y = Blorp(t) })");
  r = Kiln("compile " + lstm + " -o " + out);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "kiln compile: UNSUPPORTED"), r.out);
  BOOST_TEST(Contains(r.out, "Frobnicate"), r.out);
  BOOST_TEST(Contains(r.out, "Blorp"), r.out);
  BOOST_TEST(Contains(r.out, "kiln compile: importing " + lstm), r.out);  // progress on stderr

  std::string relu = WriteModel("relu.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x) => (float[N, 3] y) { y = Relu(x) })");
  r = Kiln("compile " + relu + " -o " + out + " --external=nosuchvendor");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "nosuchvendor"), r.out);
  r = Kiln("compile " + relu + " -o " + out + " --dim M=4");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "'M'"), r.out);
  BOOST_TEST(std::ifstream(out).good() == false);  // no output on failure

  // Usage errors exit 2.
  BOOST_TEST(Kiln("compile " + relu).code == 2);
  BOOST_TEST(Kiln("compile -o " + out).code == 2);
  BOOST_TEST(Kiln("compile " + relu + " -o").code == 2);
  r = Kiln("compile " + relu + " -o " + out + " --dim N");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "--dim: "), r.out);
  r = Kiln("compile " + relu + " -o " + out + " --dim N=1 --dim N=2");
  BOOST_TEST(r.code == 2);
  r = Kiln("compile " + relu + " -o " + out + " --frobnicate");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "kiln compile: unknown flag --frobnicate"), r.out);
  // -o naming a directory is refused before compiling, saying what to give instead.
  r = Kiln("compile " + relu + " -o " + TmpDir());
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "kiln compile: -o " + TmpDir() + " is a directory; name the file to "
                             "write, e.g. " + TmpDir() + "/model.kiln"),
             r.out);
  // Files of the other kind say what they are.
  r = Kiln("run " + relu);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "this is an ONNX model; compile it first with `kiln compile"), r.out);
  r = Kiln("compile --help");
  BOOST_TEST(r.code == 0);
  BOOST_TEST(Contains(r.out, "usage: kiln compile MODEL.onnx -o OUT.kiln"), r.out);
}

// compile -> run: a dynamic-shape model compiled as is and with --dim, run on .pb inputs,
// its outputs written as .pb and checked against values computed here.
BOOST_AUTO_TEST_CASE(compile_then_run_end_to_end) {
  std::string model = WriteModel("add_relu.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x) => (float[N, 3] y) <float[3] b = {0.5, -1.0, 2.0}> {
        t = Add(x, b) y = Relu(t) })");
  std::string exe = TmpDir() + "/add_relu.kiln";
  Result r = Kiln("compile " + model + " -o " + exe);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, exe + ": 2 nodes"), r.out);
  BOOST_TEST(Contains(r.out, " kernels ("), r.out);
  BOOST_TEST(Contains(r.out, " external regions ("), r.out);
  BOOST_TEST(Contains(r.out, "1 constants (12 bytes)"), r.out);
  BOOST_TEST(Contains(r.out, "bytes written in "), r.out);
  BOOST_TEST(Contains(r.out, "kiln compile: importing " + model), r.out);
  r = Kiln("inspect " + exe);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "(x: f32[N, 3]) -> (y: f32[N, 3])"), r.out);

  float x[6] = {1, 2, -3, -0.25f, 0.5f, -1};
  float want[6];
  const float b[3] = {0.5f, -1, 2};
  for (int i = 0; i < 6; ++i) want[i] = std::max(0.0f, x[i] + b[i % 3]);
  std::string xp = WritePbFile("e2e_x.pb", onnx::TensorProto::FLOAT, {2, 3}, x, sizeof(x));
  std::string out_dir = TmpDir() + "/e2e_out";  // made by kiln run
  r = Kiln("run " + exe + " --input x=" + xp + " --output-dir " + out_dir + " --output-format pb");
  BOOST_TEST(r.code == 0, r.out);
  onnx::TensorProto y = ReadPbFile(out_dir + "/output_0.pb");
  BOOST_TEST(y.name() == "y");
  BOOST_TEST(y.dims_size() == 2);
  BOOST_TEST(y.dims(0) == 2);
  BOOST_REQUIRE(y.raw_data().size() == sizeof(want));
  float got[6];
  std::memcpy(got, y.raw_data().data(), sizeof(got));
  for (int i = 0; i < 6; ++i) BOOST_TEST(got[i] == want[i], "element " << i);

  // Pinned: N = 2 is now a fixed dim, and another batch size is an error naming the input.
  std::string pinned = TmpDir() + "/add_relu_n2.kiln";
  r = Kiln("compile " + model + " -o " + pinned + " --dim N=2 --quiet");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(!Contains(r.out, "importing"), r.out);
  r = Kiln("run " + pinned + " " + xp);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "y: f32[2, 3] [1.5, 1, 0, 0.25, 0, 1]"), r.out);
  std::string x3 = WritePbFile("e2e_x3.pb", onnx::TensorProto::FLOAT, {1, 3}, x, 3 * sizeof(float));
  r = Kiln("run " + pinned + " " + x3);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 0 'x' (" + x3 + "): dim 0 is 1, expected x: f32[2, 3]"), r.out);

  // Two inputs sharing the symbol N must agree on it.
  std::string two = WriteModel("add2.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x, float[N, 3] z) => (float[N, 3] y) { y = Add(x, z) })");
  std::string two_exe = TmpDir() + "/add2.kiln";
  r = Kiln("compile " + two + " -o " + two_exe);
  BOOST_TEST(r.code == 0, r.out);
  r = Kiln("run " + two_exe + " " + xp + " " + x3);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 1 'z': dim 0 ('N') is 1 but input 0 set 'N' = 2"), r.out);
  r = Kiln("run " + two_exe + " " + xp + " " + xp);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "y: f32[2, 3] [2, 4, -6, -0.5, 1, -2]"), r.out);
}

// --target compiles every kernel ahead of time: a run on a host of that target compiles
// nothing (--stats says where the code came from), computes what the JIT computes, and
// inspect lists each target; an unknown target is an error before anything is compiled.
BOOST_AUTO_TEST_CASE(compile_target_native_runs_with_no_jit_compile) {
  std::string model = WriteModel("aot.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x) => (float[N, 3] y) <float[3] b = {0.5, -1.0, 2.0}> {
        t = Add(x, b) e = Exp(t) y = Relu(e) })");
  std::string jit = TmpDir() + "/aot_jit.kiln", aot = TmpDir() + "/aot_native.kiln";
  Result r = Kiln("compile " + model + " -o " + jit + " -q --external none --target none");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(!Contains(r.out, "code ahead of time"), r.out);
  r = Kiln("compile " + model + " -o " + aot + " -q --external none --target native --target "
           "x86-64-v4");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "code ahead of time: 2 targets, "), r.out);
  r = Kiln("inspect " + aot);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "== code ahead of time (2 targets)"), r.out);
  BOOST_TEST(Contains(r.out, " cpu x86-64-v4, features "), r.out);
  BOOST_TEST(Contains(r.out, "avx512f"), r.out);
  BOOST_TEST(Contains(r.out, "AOT objects     "), r.out);

  float x[6] = {1, 2, -3, -0.25f, 0.5f, -1};
  std::string xp = WritePbFile("aot_x.pb", onnx::TensorProto::FLOAT, {2, 3}, x, sizeof(x));
  Result with_jit = Kiln("run " + jit + " " + xp + " --jit-cache off --stats");
  BOOST_TEST(with_jit.code == 0, with_jit.out);
  BOOST_TEST(Contains(with_jit.out, " 0 kernels linked from code compiled ahead of time"),
             with_jit.out);
  BOOST_TEST(!Contains(with_jit.out, "jit: 0 compilations"), with_jit.out);
  Result with_aot = Kiln("run " + aot + " " + xp + " --jit-cache off --stats");
  BOOST_TEST(with_aot.code == 0, with_aot.out);
  BOOST_TEST(Contains(with_aot.out, "kiln run: jit: 0 compilations"), with_aot.out);
  BOOST_TEST(!Contains(with_aot.out, " 0 kernels linked"), with_aot.out);
  size_t y = with_jit.out.find("y: f32[2, 3] [");
  BOOST_REQUIRE_MESSAGE(y != std::string::npos, with_jit.out);
  std::string values = with_jit.out.substr(y, with_jit.out.find('\n', y) - y);
  BOOST_TEST(Contains(with_aot.out, values), with_aot.out);  // the same values printed

  r = Kiln("compile " + model + " -o " + aot + " --target pentium-9000");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "code target 'pentium-9000' is not an x86-64 CPU LLVM knows"), r.out);
  BOOST_TEST(!Contains(r.out, "lowering"), r.out);
  r = Kiln("compile " + model + " -o " + aot + " --target none --target native");
  BOOST_TEST(r.code == 2, r.out);
  BOOST_TEST(Contains(r.out, "--target none cannot be combined with other targets"), r.out);
}

// Without --target, kiln compile embeds portable x86-64-v3 code (on x86-64): a host with AVX2,
// FMA and BMI2 runs the first call with no JIT compile, with the values the JIT computes.
BOOST_AUTO_TEST_CASE(compile_embeds_x86_64_v3_code_by_default) {
  std::string model = WriteModel("aot_default.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x) => (float[N, 3] y) <float[3] b = {0.5, -1.0, 2.0}> {
        t = Add(x, b) e = Exp(t) y = Relu(e) })");
  std::string exe = TmpDir() + "/aot_default.kiln", jit = TmpDir() + "/aot_default_jit.kiln";
  Result r = Kiln("compile " + model + " -o " + exe + " -q --external none");
  BOOST_TEST(r.code == 0, r.out);
#if defined(__x86_64__)
  BOOST_TEST(Contains(r.out, "code ahead of time: 1 targets, "), r.out);
  r = Kiln("inspect " + exe);
  BOOST_TEST(Contains(r.out, " cpu x86-64-v3, features "), r.out);
  r = Kiln("compile " + model + " -o " + jit + " -q --external none --target none");
  BOOST_TEST(r.code == 0, r.out);
  float x[6] = {1, 2, -3, -0.25f, 0.5f, -1};
  std::string xp = WritePbFile("aot_default_x.pb", onnx::TensorProto::FLOAT, {2, 3}, x, sizeof(x));
  Result linked = Kiln("run " + exe + " " + xp + " --jit-cache off --stats");
  BOOST_TEST(linked.code == 0, linked.out);
  Result compiled = Kiln("run " + jit + " " + xp + " --jit-cache off --stats");
  BOOST_TEST(compiled.code == 0, compiled.out);
  BOOST_TEST(!Contains(compiled.out, "jit: 0 compilations"), compiled.out);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("bmi2")) {
    BOOST_TEST(Contains(linked.out, "kiln run: jit: 0 compilations"), linked.out);
    BOOST_TEST(!Contains(linked.out, " 0 kernels linked"), linked.out);
  }
  size_t y = compiled.out.find("y: f32[2, 3] [");
  BOOST_REQUIRE_MESSAGE(y != std::string::npos, compiled.out);
  // exp through libmvec in both: the same values as printed.
  BOOST_TEST(Contains(linked.out, compiled.out.substr(y, compiled.out.find('\n', y) - y)),
             linked.out);
#else
  BOOST_TEST(!Contains(r.out, "code ahead of time"), r.out);
#endif
}

// Code for narrower vectors than the host's (x86-64-v2: SSE4.2, on a host with AVX2) is a
// first tier: the first run compiles nothing, and the kernels called again tier up to the
// JIT's code for the host in the background (bench's jit_compiles: one per kernel linked, at
// least).
// With --jit-tiering off such code is not linked: the JIT compiles the host's code at once.
BOOST_AUTO_TEST_CASE(narrower_code_is_a_first_tier_that_tiers_up) {
  std::string model = WriteModel("aot_v2.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x) => (float[N, 3] y) <float[3] b = {0.5, -1.0, 2.0}> {
        t = Add(x, b) e = Exp(t) y = Relu(e) })");
  std::string exe = TmpDir() + "/aot_v2.kiln";
  Result r = Kiln("compile " + model + " -o " + exe + " -q --external none --target x86-64-v2");
  BOOST_TEST(r.code == 0, r.out);
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2")) return;  // x86-64-v2 code is not narrower here
  float x[6] = {1, 2, -3, -0.25f, 0.5f, -1};
  std::string xp = WritePbFile("aot_v2_x.pb", onnx::TensorProto::FLOAT, {2, 3}, x, sizeof(x));
  Result first = Kiln("run " + exe + " " + xp + " --jit-cache off --stats");
  BOOST_TEST(first.code == 0, first.out);
  BOOST_TEST(Contains(first.out, "kiln run: jit: 0 compilations"), first.out);
  BOOST_TEST(!Contains(first.out, " 0 kernels linked"), first.out);
  Result pinned = Kiln("run " + exe + " " + xp + " --jit-cache off --jit-tiering off --stats");
  BOOST_TEST(pinned.code == 0, pinned.out);
  BOOST_TEST(!Contains(pinned.out, "jit: 0 compilations"), pinned.out);
  BOOST_TEST(Contains(pinned.out, " 0 kernels linked"), pinned.out);
  size_t y = pinned.out.find("y: f32[2, 3] [");
  BOOST_REQUIRE_MESSAGE(y != std::string::npos, pinned.out);
  // Elementwise (exp through libmvec's SSE and AVX2 variants): the same values as printed.
  BOOST_TEST(Contains(first.out, pinned.out.substr(y, pinned.out.find('\n', y) - y)), first.out);

  Result bench = Kiln("bench " + exe + " --dim N=2 --iters 3 --warmup 0 --jit-cache off --json");
  BOOST_TEST(bench.code == 0, bench.out);
  auto number = [&](const std::string& key) -> long long {
    size_t at = bench.out.find("\"" + key + "\": ");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, key << " not in: " << bench.out);
    return std::atoll(bench.out.c_str() + at + key.size() + 4);
  };
  BOOST_TEST(number("aot_kernels") > 0, bench.out);
  // Every kernel linked tiered up (the O3 compiles; specializations would add more).
  BOOST_TEST(number("jit_compiles") >= number("aot_kernels"), bench.out);
#endif
}

// The default external compiler (oneDNN) claims a convolution (a 1x1 one, the product
// computed here); kiln run binds the built-in oneDNN runtime. --external=none keeps it on the
// JIT. A MatMul (of run-time tensors, or with its weights an initializer, then prepacked) has
// no Conv to anchor a region and stays on the JIT by default. All give the product.
BOOST_AUTO_TEST_CASE(compile_with_and_without_onednn_regions) {
  std::string conv_model = WriteModel("conv1x1.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[1, 3, 2, 1] x) => (float[1, 2, 2, 1] y) <float[2, 3, 1, 1] w = {1, 3, 5, 2, 4, 6}> {
        y = Conv(x, w) })");
  std::string model = WriteModel("matmul.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[2, 3] x, float[3, 2] w) => (float[2, 2] y) {
        y = MatMul(x, w) })");
  std::string const_model = WriteModel("matmul_const.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[2, 3] x) => (float[2, 2] y) <float[3, 2] w = {1, 2, 3, 4, 5, 6}> {
        y = MatMul(x, w) })");
  float x[6] = {1, -1, 0.5f, 2, 0, -3};
  const float w[6] = {1, 2, 3, 4, 5, 6};
  std::string xp = WritePbFile("mm_x.pb", onnx::TensorProto::FLOAT, {2, 3}, x, sizeof(x));
  std::string wp = WritePbFile("mm_w.pb", onnx::TensorProto::FLOAT, {3, 2}, w, sizeof(w));
  // The product's elements as kiln run prints them (%g), in row-major order of y[i, j], or of
  // its transpose.
  auto printed = [&](bool transposed) {
    std::string out;
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 2; ++c) {
        int i = transposed ? c : r, j = transposed ? r : c;
        float acc = 0;
        for (int k = 0; k < 3; ++k) acc += x[i * 3 + k] * w[k * 2 + j];
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%g", acc);
        out += (out.empty() ? "" : ", ") + std::string(buf);
      }
    }
    return out;
  };
  std::string want = printed(false);
  // The conv's x[0, c, p, 0] is the MatMul's x[p, c] and its w[o, c] the MatMul's w[c, o]; its
  // y[0, o, p, 0] is the product's y[p, o].
  float xt[6] = {x[0], x[3], x[1], x[4], x[2], x[5]};
  std::string xtp = WritePbFile("conv_x.pb", onnx::TensorProto::FLOAT, {1, 3, 2, 1}, xt, sizeof(xt));
  std::string want_t = printed(true);
  for (std::string external : {"", " --external=none", " --external onednn"}) {
    bool on_jit = external == " --external=none";
    std::string exe = TmpDir() + "/conv1x1.kiln";
    Result r = Kiln("compile " + conv_model + " -o " + exe + external);
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(Contains(r.out, on_jit ? "0 external regions" : "1 external regions (1 nodes)"), r.out);
    r = Kiln("run " + exe + " " + xtp);
    BOOST_TEST(r.code == 0, external + ": " + r.out);
    BOOST_TEST(Contains(r.out, "y: f32[1, 2, 2, 1] [" + want_t + "]"), external + ": " + r.out);
    exe = TmpDir() + "/matmul.kiln";
    r = Kiln("compile " + model + " -o " + exe + external);
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(Contains(r.out, "0 external regions"), r.out);
    r = Kiln("run " + exe + " " + xp + " " + wp);
    BOOST_TEST(r.code == 0, external + ": " + r.out);
    BOOST_TEST(Contains(r.out, "y: f32[2, 2] [" + want + "]"), external + ": " + r.out);
  }
  std::string exe = TmpDir() + "/matmul_const.kiln";
  Result r = Kiln("compile " + const_model + " -o " + exe);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "0 external regions"), r.out);
  BOOST_TEST(Contains(r.out, "prepacked the weights of 1 MatMul / Gemm nodes"), r.out);
  r = Kiln("run " + exe + " " + xp);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "y: f32[2, 2] [" + want + "]"), r.out);
}

// A conv + relu, max pool and flatten (one oneDNN region) and a Gemm with constant weights (JIT,
// prepacked), compiled into `*exe`; returns the compile's result.
Result CompileConvnet(std::string* exe) {
  std::string model = WriteModel("convnet.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 1, 4, 4] x) => (float[N, 3] y)
        <float[2, 1, 3, 3] w = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0},
         float[3, 2] g = {1, 2, 3, 4, 5, 6}> {
        c = Conv <pads = [1, 1, 1, 1]> (x, w)
        r = Relu(c)
        p = MaxPool <kernel_shape = [4, 4]> (r)
        f = Flatten(p)
        y = Gemm <transB = 1> (f, g) })");
  *exe = TmpDir() + "/convnet.kiln";
  return Kiln("compile " + model + " -o " + *exe);
}

// kiln inspect lists the ops inside each oneDNN region: a conv with its window and fused relu,
// a max pool and a flatten; the table names the vendor and counts. The Gemm after them runs on
// the JIT with prepacked weights.
BOOST_AUTO_TEST_CASE(inspect_lists_the_ops_of_each_region) {
  std::string exe;
  Result r = CompileConvnet(&exe);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "1 external regions (4 nodes)"), r.out);  // the Gemm: JIT, prepacked
  r = Kiln("inspect " + exe);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "[0] onednn_0 vendor=onednn inputs=1 outputs=1 constants=1"), r.out);
  BOOST_TEST(Contains(r.out, "      inputs: in0 [?, 1, 4, 4]\n"), r.out);
  BOOST_TEST(Contains(r.out, "      constants: const0 [2, 1, 3, 3]\n"), r.out);
  BOOST_TEST(Contains(r.out, "      [0] Conv (in0, const0) -> t2  kernel=[3, 3]; strides=[1, 1]; "
                             "pads=[1, 1, 1, 1]; dilations=[1, 1]; post-ops: relu\n"),
             r.out);
  BOOST_TEST(Contains(r.out, "      [1] Pool (t2) -> t"), r.out);
  BOOST_TEST(Contains(r.out, "max; kernel=[4, 4]"), r.out);
  BOOST_TEST(Contains(r.out, "      [2] Flatten (t3) -> out0  axis=1\n"), r.out);
  BOOST_TEST(Contains(r.out, "invoke_kernel kernels[0] 'PackedMatMul_Gemm_4'"), r.out);
  // Its fallback: the region's nodes as JIT kernels, disassembled with the other functions.
  BOOST_TEST(Contains(r.out, "      fallback: @onednn_0/fallback (functions[1])\n"), r.out);
  BOOST_TEST(Contains(r.out, "func @onednn_0/fallback(x: f32[N, 1, 4, 4]) -> (f: f32[N, 2])"),
             r.out);
}

// --tune records in each region what its plan build measured, at the batch creation builds
// and --threads' team size; inspect shows the record and the tuned file runs like the other.
BOOST_AUTO_TEST_CASE(compile_tune_records_measurements_in_the_regions) {
  std::string exe;
  BOOST_REQUIRE_MESSAGE(CompileConvnet(&exe).code == 0, "untuned compile");
  std::string model = TmpDir() + "/convnet.onnx", tuned = TmpDir() + "/convnet_tuned.kiln";
  Result r = Kiln("compile " + model + " -o " + tuned + " --tune --threads 1");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "kiln compile: onednn_0: tuned at 1 threads: "), r.out);
  r = Kiln("inspect " + tuned);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "      tuned at [1, 1, 4, 4], 1 threads: "), r.out);
  Result plain = Kiln("inspect " + exe);
  BOOST_TEST(!Contains(plain.out, "tuned at"), plain.out);
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i % 5) - 2;
  std::string in = WriteNpyFile("tune_x.npy", Tensor::Wrap(x, DType::kF32, Shape{1, 1, 4, 4}));
  Result a = Kiln("run " + exe + " --threads 1 --input x=" + in);
  Result b = Kiln("run " + tuned + " --threads 1 --input x=" + in);
  BOOST_TEST(a.code == 0, a.out);
  BOOST_TEST(b.code == 0, b.out);
  auto y = [](const std::string& out) { return out.substr(std::min(out.find("y: "), out.size())); };
  BOOST_TEST(!y(a.out).empty(), a.out);
  BOOST_TEST(y(b.out) == y(a.out));
}

// kiln profile lists the oneDNN primitives of a region under it, sums time per op type, and
// --json carries the same rows.
BOOST_AUTO_TEST_CASE(profile_shows_the_primitives_inside_a_region) {
  std::string exe;
  Result r = CompileConvnet(&exe);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  r = Kiln("profile " + exe + " --dim N=1 --iters 2");
  BOOST_TEST(r.code == 0, r.out);
  size_t region = r.out.find("\n  onednn_0 (onednn) ");
  size_t conv = r.out.find("\n    #0 onednn:conv(");
  BOOST_TEST(region != std::string::npos, r.out);
  BOOST_TEST(conv > region, r.out);
  BOOST_TEST(Contains(r.out, "onednn:pool("), r.out);
  BOOST_TEST(Contains(r.out, "1x1x4x4:abcd, 2x1x3x3:"), r.out);  // the conv's operands
  BOOST_TEST(Contains(r.out, "    (outside steps)"), r.out);
  BOOST_TEST(Contains(r.out, "\nop type "), r.out);
  BOOST_TEST(Contains(r.out, "\n  onednn:conv "), r.out);
  BOOST_TEST(Contains(r.out, "\n  jit:PackedMatMul "), r.out);
  r = Kiln("profile " + exe + " --dim N=1 --iters 2 --json");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(r.out.rfind("{\"file\": \"" + exe + "\", \"function\": \"main\"", 0) == 0u, r.out);
  BOOST_TEST(Contains(r.out, "{\"step\": 0, \"calls\": 2, "), r.out);
  BOOST_TEST(Contains(r.out, "\"name\": \"onednn:conv("), r.out);
  BOOST_TEST(Contains(r.out, "\"op_types\": [{\"name\": "), r.out);
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
  Result r = Kiln("bench " + path + " --dim n=4 --iters 20 --warmup 2 --json");
  BOOST_TEST(r.code == 0, r.out);
  for (const char* key : {"first_ms", "p50_ms", "p90_ms", "p99_ms", "jit_compiles", "jit_ms",
                          "jit_cache_loads", "peak_rss_mb"}) {
    BOOST_TEST(!std::isnan(JsonNumber(r.out, key)), key);
  }
  BOOST_TEST(JsonNumber(r.out, "first_ms") > 0.0);
  BOOST_TEST(JsonNumber(r.out, "p50_ms") <= JsonNumber(r.out, "p90_ms"));
  BOOST_TEST(JsonNumber(r.out, "p90_ms") <= JsonNumber(r.out, "p99_ms"));
  BOOST_TEST(JsonNumber(r.out, "peak_rss_mb") > 1.0);
  BOOST_TEST(JsonNumber(r.out, "iters") == 20.0);
  r = Kiln("bench " + path + " --dim n=4 --iters 3");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "first call"));
  BOOST_TEST(Contains(r.out, "p99"));
}

BOOST_AUTO_TEST_CASE(bench_errors_name_what_is_missing_or_wrong) {
  std::string path = WriteProgram();
  Result r = Kiln("bench " + path);
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "input 'x' (x: f32[n, 3]): dim 0 is symbolic: give --dim n=N"), r.out);
  r = Kiln("bench " + path + " --dim n=-1");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "--dim: n=-1: '-1' is not a non-negative integer"), r.out);
  r = Kiln("bench " + path + " --iters 0");
  BOOST_TEST(r.code == 2);
  r = Kiln("bench " + path + " --function nope --dim n=1");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "no function named 'nope'"), r.out);
  r = Kiln("bench " + path + " --function spin --timeout-ms 50");  // loops forever
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "DEADLINE_EXCEEDED: in 'spin'"), r.out);
}

// y = Relu(x + b) over x: f32[N, 3], compiled with every op on the JIT; the executable's path.
std::string CompileAddReluOnJit(const std::string& name) {
  std::string model = WriteModel(name + ".onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x) => (float[N, 3] y) <float[3] b = {0.5, -1.0, 2.0}> {
        t = Add(x, b) y = Relu(t) })");
  std::string exe = TmpDir() + "/" + name + ".kiln";
  // Kernel IR only: these tests are about what the JIT compiles.
  Result r = Kiln("compile " + model + " -o " + exe + " --external=none --target none --quiet");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out);
  return exe;
}

// Shapes that come and go: every value gets its own p50, and the JIT keeps only the variants of
// the shapes it still tracks (32 per kernel by default), freeing the rest (with one variant per
// shape: --jit-bucketing exact, and every kernel specialized whatever its share of the run
// time: --jit-min-share 0). No first tier (--jit-tiering off): a first-tier kernel replaced by its
// optimized code is freed too, and whether that happens depends on the object cache (with an
// empty one, two more frees), which would hide the count of evictions this test is about.
BOOST_AUTO_TEST_CASE(bench_sweep_measures_each_shape_and_frees_evicted_variants) {
  std::string exe = CompileAddReluOnJit("sweep");
  Result r = Kiln("bench " + exe +
                  " --sweep N=1:40 --iters 1 --json --jit-bucketing exact --jit-min-share 0"
                  " --jit-tiering off");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "\"p50_ms\": [[1, "), r.out);
  BOOST_TEST(Contains(r.out, "[40, "), r.out);
  BOOST_TEST(!Contains(r.out, "[41, "), r.out);
  double alive = JsonNumber(r.out, "kernels_alive"), freed = JsonNumber(r.out, "kernels_freed");
  // Each kernel over N: 40 shapes specialized, the 8 least recent evicted and freed.
  BOOST_TEST(freed >= 8.0, r.out);
  BOOST_TEST(std::fmod(freed, 8.0) == 0.0, r.out);
  BOOST_TEST(alive <= freed / 8.0 * 33.0 + 2.0, r.out);  // + unspecialized kernels
  BOOST_TEST(JsonNumber(r.out, "rss_mb") > 1.0, r.out);
  double exact_compiles = JsonNumber(r.out, "llvm_compiles");
  // Power-of-two buckets (the default): exact variants for N = 1, 2, 4, ..., 32 only; every
  // other N shares its bucket's variant, one kernel to LLVM. Nothing needs evicting.
  r = Kiln("bench " + exe + " --sweep N=1:40 --iters 1 --json");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(JsonNumber(r.out, "llvm_compiles") < exact_compiles / 2, r.out);
  BOOST_TEST(JsonNumber(r.out, "kernels_freed") <= 2.0, r.out);  // the first tiers replaced
  r = Kiln("bench " + exe + " --sweep N=3:4 --iters 2");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "N=3 "), r.out);
  BOOST_TEST(Contains(r.out, "N=4 "), r.out);
  BOOST_TEST(Contains(r.out, "kernels alive"), r.out);
  r = Kiln("bench " + exe + " --sweep N=5:2");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "--sweep: N=5:2: HI is below LO"), r.out);
  r = Kiln("bench " + exe + " --sweep N");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "--sweep: wants SYMBOL=LO:HI, got 'N'"), r.out);
  r = Kiln("bench " + exe + " --sweep M=1:2");  // the model's symbol is N
  BOOST_TEST(r.code == 1);
  BOOST_TEST(
      Contains(r.out, "--sweep M: the inputs of 'main' have no symbolic dim 'M' (they have N)"),
      r.out);
}

// --versus runs a second runtime with other runtime flags beside the first, alternating their
// timed runs: each side reports its own p50s, calls and compiles (the versus side's as the ones
// a separate run with those flags reports).
BOOST_AUTO_TEST_CASE(bench_sweep_versus_measures_two_runtimes_side_by_side) {
  std::string exe = CompileAddReluOnJit("versus");
  const std::string exact = " --jit-bucketing exact --jit-min-share 0";
  const std::string sweep = "bench " + exe + " --jit-cache off --sweep N=1:12 --iters 2 --json";
  Result alone = Kiln(sweep + exact);
  BOOST_TEST(alone.code == 0, alone.out);
  Result r = Kiln(sweep + " --versus '" + exact + "'");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "\"versus\": \"" + exact + "\""), r.out);
  BOOST_TEST(Contains(r.out, "\"versus_p50_ms\": [[1, "), r.out);
  BOOST_TEST(Contains(r.out, "\"versus_timed_calls\": [[1, "), r.out);
  BOOST_TEST(Contains(r.out, "\"timed_calls\": [[1, "), r.out);
  double versus = JsonNumber(r.out, "versus_llvm_compiles");
  BOOST_TEST(versus == JsonNumber(alone.out, "llvm_compiles"), r.out + alone.out);
  // The default rules (power-of-two buckets, the share rule) compile fewer variants.
  BOOST_TEST(JsonNumber(r.out, "llvm_compiles") < versus, r.out);
  r = Kiln("bench " + exe +
           " --jit-cache off --sweep N=3:4 --iters 2 --versus '--jit-min-share 0'");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "(versus: --jit-min-share 0, runs alternating)"), r.out);
  BOOST_TEST(Contains(r.out, "jit versus"), r.out);
  r = Kiln("bench " + exe + " --jit-cache off --sweep N=3:4 --versus '--no-such-flag'");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "--versus '--no-such-flag': not runtime flags"), r.out);
}

BOOST_AUTO_TEST_CASE(profile_prints_tables_and_writes_a_chrome_trace) {
  std::string path = WriteProgram();
  std::string trace = TmpDir() + "/trace.json";
  Result r = Kiln("profile " + path + " --dim n=2 --iters 3 --trace " + trace);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "3 profiled runs after warm-up"), r.out);
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
  BOOST_TEST(Contains(r.out, "give --dim n=N"), r.out);
  r = Kiln("profile " + path + " --iters 0");
  BOOST_TEST(r.code == 2);
  r = Kiln("profile " + path + " --function spin --timeout-ms 50");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(Contains(r.out, "DEADLINE_EXCEEDED"), r.out);
}

// Every subcommand: -h / --help anywhere on the line prints its help (exit 0), even after a bad
// flag; an unknown flag is a usage error naming it (exit 2). kiln --version names kiln's, the
// executable format's and LLVM's versions, and how OpenMP threads wait.
BOOST_AUTO_TEST_CASE(help_version_and_unknown_flags_on_every_subcommand) {
  std::string path = WriteProgram();
  for (std::string cmd : {"compile", "inspect", "run", "bench", "profile"}) {
    Result r = Kiln(cmd + " -h");
    BOOST_TEST(r.code == 0, cmd + ": " + r.out);
    BOOST_TEST(Contains(r.out, "usage: kiln " + cmd + " "), r.out);
    BOOST_TEST(Contains(r.out, "  -h, --help  "), r.out);
    r = Kiln(cmd + " " + path + " --bogus=1 --help");
    BOOST_TEST(r.code == 0, cmd + ": " + r.out);
    BOOST_TEST(Contains(r.out, "usage: kiln " + cmd + " "), r.out);
    r = Kiln(cmd + " " + path + " --bogus");
    BOOST_TEST(r.code == 2, cmd + ": " + r.out);
    BOOST_TEST(Contains(r.out, "kiln " + cmd + ": unknown flag --bogus\n"), r.out);
    BOOST_TEST(Contains(r.out, "'kiln " + cmd + " --help' describes every flag"), r.out);
  }
  for (std::string cmd : {"run", "bench", "profile"}) {
    Result r = Kiln(cmd + " --help");
    BOOST_TEST(Contains(r.out, "  --threads N  "), r.out);
    BOOST_TEST(Contains(r.out, "  --dim NAME=VALUE  "), r.out);
    BOOST_TEST(Contains(r.out, "(default: the model's entry function)"), r.out);
    BOOST_TEST(!Contains(r.out, "--shape"), r.out);
  }
  Result r = Kiln("bench --help");
  BOOST_TEST(Contains(r.out, "  --warmup N  "), r.out);
  BOOST_TEST(Contains(r.out, "exactly N untimed runs"), r.out);
  BOOST_TEST(Contains(r.out, "(default: 8)"), r.out);
  BOOST_TEST(Contains(Kiln("compile --help").out, "  -o, --output OUT.kiln  "));
  BOOST_TEST(Contains(Kiln("compile --help").out, "  --threads N  "));
  r = Kiln("--version");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(Contains(r.out, "kiln 0."), r.out);
  BOOST_TEST(Contains(r.out, "executable format " + std::to_string(kFormatMajor) + "." +
                                 std::to_string(kFormatMinor)),
             r.out);
  BOOST_TEST(Contains(r.out, "LLVM 19."), r.out);
  // The test's environment sets no OpenMP wait variable: kiln's default is what libgomp read.
  BOOST_TEST(Contains(r.out, "OpenMP wait: GOMP_SPINCOUNT="), r.out);
  BOOST_TEST(Contains(r.out, " (kiln's default)\n"), r.out);
}

// Inputs of WriteProgram's @main as .npy files: x: f32[rows, 3] counting from 1, and k.
std::pair<std::string, std::string> WriteMainInputs(const std::string& prefix, int rows,
                                                    int64_t k) {
  std::vector<float> x(rows * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  return {WriteNpyFile(prefix + "_x.npy", Tensor::Wrap(x.data(), DType::kF32, Shape{rows, 3})),
          WriteNpyFile(prefix + "_k.npy", Tensor::Wrap(&k, DType::kI64, Shape()))};
}

// --flag=value and --flag value mean the same on every subcommand.
BOOST_AUTO_TEST_CASE(flag_values_with_equals_or_apart) {
  std::string path = WriteProgram();
  auto [xp, kp] = WriteMainInputs("eq", 2, 7);
  for (const char* eq : {"=", " "}) {
    std::string e = eq;
    Result r = Kiln("run " + path + " --input" + e + "x=" + xp + " --input" + e + "k=" + kp +
                    " --function" + e + "main --timeout-ms" + e + "5000");
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(Contains(r.out, "k: i64[] [7]"), r.out);
    r = Kiln("bench " + path + " --dim" + e + "n=4 --iters" + e + "3 --warmup" + e + "1 --json");
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(JsonNumber(r.out, "iters") == 3.0, r.out);
    BOOST_TEST(JsonNumber(r.out, "warmup") == 1.0, r.out);
    BOOST_TEST(Contains(r.out, "\"dims\": {\"n\": 4}"), r.out);
    r = Kiln("profile " + path + " --dim" + e + "n=2 --iters" + e + "2");
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(Contains(r.out, " 2 profiled runs after warm-up"), r.out);
  }
  std::string model = WriteModel("eq_relu.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
      g (float[N, 3] x) => (float[N, 3] y) { y = Relu(x) })");
  for (std::string flags : {" -o=" + TmpDir() + "/eq1.kiln --dim=N=2 --external=none",
                            " --output " + TmpDir() + "/eq1.kiln --dim N=2 --external none"}) {
    Result r = Kiln("compile " + model + flags + " --quiet");
    BOOST_TEST(r.code == 0, flags + ": " + r.out);
    r = Kiln("inspect " + TmpDir() + "/eq1.kiln");
    BOOST_TEST(Contains(r.out, "(x: f32[2, 3]) -> (y: f32[2, 3])"), flags + ": " + r.out);
  }
}

// --threads reaches the runtime (bench reports the team size) on run, bench and profile.
BOOST_AUTO_TEST_CASE(threads_flag_on_run_bench_and_profile) {
  std::string path = WriteProgram();
  auto [xp, kp] = WriteMainInputs("th", 1, 1);
  for (int threads : {1, 2}) {
    std::string t = std::to_string(threads);
    Result r = Kiln("bench " + path + " --dim n=2 --iters 2 --threads " + t + " --json");
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(JsonNumber(r.out, "threads") == threads, r.out);
    r = Kiln("bench " + path + " --dim n=2 --iters 2 --threads=" + t);
    BOOST_TEST(Contains(r.out, ", " + t + " threads, "), r.out);
    r = Kiln("profile " + path + " --dim n=2 --iters 1 --threads=" + t);
    BOOST_TEST(r.code == 0, r.out);
    BOOST_TEST(Contains(r.out, ", " + t + " threads, 1 profiled runs"), r.out);
    r = Kiln("run " + path + " " + xp + " " + kp + " --threads " + t);
    BOOST_TEST(r.code == 0, r.out);
  }
  Result r = Kiln("run " + path + " " + xp + " " + kp + " --threads -1");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(Contains(r.out, "--threads: wants an integer from 0 to 1024, got '-1'"), r.out);
}

// A --dim naming no symbolic dim of the function's inputs is an error naming the flag; run
// checks the input files against --dim.
BOOST_AUTO_TEST_CASE(dim_symbols_are_checked) {
  std::string path = WriteProgram();
  for (std::string cmd : {"bench", "profile"}) {
    Result r = Kiln(cmd + " " + path + " --dim n=4 --dim m=2 --iters 1");
    BOOST_TEST(r.code == 1, r.out);
    BOOST_TEST(
        Contains(r.out, "--dim m=2: the inputs of 'main' have no symbolic dim 'm' (they have n)"),
        r.out);
  }
  auto [xp, kp] = WriteMainInputs("dim", 2, 0);
  Result r = Kiln("run " + path + " " + xp + " " + kp + " --dim q=1");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "--dim q=1: the inputs of 'main' have no symbolic dim 'q'"), r.out);
  r = Kiln("run " + path + " " + xp + " " + kp + " --dim n=3");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "input 0 'x' (" + xp + "): dim 0 is 2, but --dim n=3"), r.out);
  r = Kiln("run " + path + " " + xp + " " + kp + " --dim n=2");
  BOOST_TEST(r.code == 0, r.out);
  r = Kiln("bench " + path + " --input x=" + xp + " --input k=" + kp + " --dim n=5 --iters 1");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "dim 0 is 2, but --dim n=5"), r.out);
  r = Kiln("bench " + path + " --dim n=4 --dim n=5");
  BOOST_TEST(r.code == 2, r.out);
  BOOST_TEST(Contains(r.out, "--dim: n=5: 'n' is given twice"), r.out);
  r = Kiln("bench " + path + " --input y=" + xp + " --dim n=2 --iters 1");
  BOOST_TEST(r.code == 1, r.out);
  BOOST_TEST(Contains(r.out, "--input y=" + xp + ": 'main' has no input named 'y'"), r.out);
}

// bench --json records threads, warm-up runs and dims; --warmup N is exactly N runs: with 0 no
// shape is seen often enough to get a specialized variant, with the default (8) every one is.
BOOST_AUTO_TEST_CASE(bench_json_records_the_setup_and_warmup_is_exact) {
  std::string exe = CompileAddReluOnJit("warm");
  // Compile counts are compared: no JIT cache.
  Result r = Kiln("bench " + exe + " --dim N=4 --iters 1 --warmup 0 --threads 1 --json --jit-cache off");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(JsonNumber(r.out, "warmup") == 0.0, r.out);
  BOOST_TEST(JsonNumber(r.out, "threads") == 1.0, r.out);
  BOOST_TEST(Contains(r.out, "\"dims\": {\"N\": 4}"), r.out);
  double cold = JsonNumber(r.out, "jit_compiles");
  r = Kiln("bench " + exe + " --dim N=4 --iters 1 --threads 1 --json --jit-cache=off");
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(JsonNumber(r.out, "warmup") == 8.0, r.out);
  BOOST_TEST(JsonNumber(r.out, "jit_compiles") > cold, r.out);
  r = Kiln("bench " + exe + " --dim N=4 --iters 1 --warmup 2");
  BOOST_TEST(Contains(r.out, exe + " @main, N=4, "), r.out);
  BOOST_TEST(Contains(r.out, "1 iterations after 2 warm-up"), r.out);
  r = Kiln("bench " + exe + " --sweep N=2:3 --iters 1 --threads 1 --json");
  BOOST_TEST(JsonNumber(r.out, "threads") == 1.0, r.out);
  BOOST_TEST(Contains(r.out, "\"dims\": {}"), r.out);
}

// kiln run / bench bind the JIT: a kernel stored as kernel IR is compiled on first use.
BOOST_AUTO_TEST_CASE(run_and_bench_jit_compile_kernel_payloads) {
  ExecutableBuilder b;
  jit::testing::AddTwicePlusProgram(b);
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

// Two kiln processes fill one JIT cache directory at once; both answer right, and a third
// process loads the kernels they wrote.
BOOST_AUTO_TEST_CASE(processes_share_one_jit_cache_directory) {
  std::string exe = CompileAddReluOnJit("shared_cache");
  std::string dir = TmpDir() + "/shared_jit_cache";
  float xs[6] = {1, -2, 3, -4, 5, -6};
  std::string xp = WriteNpyFile("shared_x.npy", Tensor::Wrap(xs, DType::kF32, Shape{2, 3}));
  std::string cmd = "tools/kiln run " + exe + " " + xp + " --jit-cache " + dir + " 2>&1";
  FILE* first = popen(cmd.c_str(), "r");
  FILE* second = popen(cmd.c_str(), "r");
  BOOST_REQUIRE(first != nullptr && second != nullptr);
  for (FILE* p : {first, second}) {
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    int status = pclose(p);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), out);
    BOOST_TEST(Contains(out, "y: f32[2, 3] [1.5, 0, 5, 0, 4, 0]"), out);
  }
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    BOOST_TEST(e.path().extension() == ".o", e.path());  // no temporary file left behind
    ++entries;
  }
  BOOST_TEST(entries >= 1);
  Result r = Kiln("bench " + exe + " --dim N=2 --iters 1 --warmup 0 --json --jit-cache " + dir);
  BOOST_TEST(r.code == 0, r.out);
  BOOST_TEST(JsonNumber(r.out, "jit_cache_loads") == static_cast<double>(entries), r.out);
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
