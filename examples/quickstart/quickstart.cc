// Quickstart: build a small executable, save it, load it back (verified), run it.
//
// The program computes sum_{i<n} i*i + bias with a loop in @main that calls @step. Its kernels
// are three tiny host implementations registered through the KernelProvider interface — the
// way an embedder adds custom operators. (Model kernels are JIT-compiled; see README.)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "vm/builder.h"
#include "vm/context.h"
#include "vm/disassembler.h"

namespace {

using kiln::DType;
using kiln::Status;
using kiln::Tensor;

// ---- Host kernels for the example: i64 scalars in, one scalar out. ------------------------

class ScalarKernel : public kiln::TensorFunction {
 public:
  explicit ScalarKernel(int64_t (*op)(int64_t, int64_t)) : op_(op) {}
  Status Run(const Tensor* const* args, int, int) override {
    for (int i = 0; i < 3; ++i) {
      if (args[i]->NumElements() != 1) return kiln::InvalidArgument("expects scalars");
    }
    *args[2]->data_as<int64_t>() = op_(*args[0]->data_as<int64_t>(), *args[1]->data_as<int64_t>());
    return Status::Ok();
  }

 private:
  int64_t (*op_)(int64_t, int64_t);
};

class HostKernels : public kiln::KernelProvider {
 public:
  kiln::StatusOr<std::unique_ptr<kiln::TensorFunction>> PrepareKernel(
      const kiln::KernelSpec& spec) override {
    int64_t (*op)(int64_t, int64_t) = nullptr;
    if (spec.name == "add") op = [](int64_t a, int64_t b) { return a + b; };
    if (spec.name == "mul") op = [](int64_t a, int64_t b) { return a * b; };
    if (spec.name == "less") op = [](int64_t a, int64_t b) -> int64_t { return a < b; };
    if (op == nullptr) return kiln::NotFound("no host kernel '" + std::string(spec.name) + "'");
    return std::unique_ptr<kiln::TensorFunction>(new ScalarKernel(op));
  }
  kiln::StatusOr<std::unique_ptr<kiln::TensorFunction>> PrepareShapeFunction(
      const kiln::ShapeFunctionSpec& spec) override {
    return kiln::NotFound("no shape functions in this example");
  }
};

// dst := fresh i64 scalar (scratch registers s, s + 1).
void AllocScalar(kiln::FunctionBuilder& f, int dst, int s) {
  f.LoadConsti(s, 8);
  f.AllocStorage(s + 1, s);
  f.AllocTensor(dst, s + 1, 0, DType::kI64, {});
}

kiln::ValueSpec I64(const char* name) { return {name, DType::kI64, {}, false}; }

Status BuildExecutable(const std::string& path) {
  kiln::ExecutableBuilder b("kiln quickstart");
  int add = b.AddKernel({"add", {DType::kI64, DType::kI64}, {DType::kI64}});
  int mul = b.AddKernel({"mul", {DType::kI64, DType::kI64}, {DType::kI64}});
  int less = b.AddKernel({"less", {DType::kI64, DType::kI64}, {DType::kI64}});
  int64_t bias = 1000;
  int bias_const = b.AddConstant("bias", DType::kI64, {}, &bias, sizeof(bias));

  // @step(acc, i) -> acc + i * i
  kiln::FunctionBuilder& step = b.AddFunction("step");
  step.AddParam(I64("acc"));
  step.AddParam(I64("i"));
  step.AddResult(I64("acc"));
  step.SetSourceNode("square");
  AllocScalar(step, 2, 10);
  step.InvokeKernel(mul, {1, 1}, {2});
  step.SetSourceNode("accumulate");
  AllocScalar(step, 3, 10);
  step.InvokeKernel(add, {0, 2}, {3});
  step.Ret({3});

  // @main(n) -> bias + sum_{i<n} step
  kiln::FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(I64("n"));
  main.AddResult(I64("result"));
  kiln::Label loop = main.NewLabel(), body = main.NewLabel(), done = main.NewLabel();
  main.LoadConsti(1, 0);  // acc
  main.LoadConsti(2, 0);  // i
  main.LoadConsti(3, 1);
  main.Bind(loop);
  AllocScalar(main, 4, 10);
  main.InvokeKernel(less, {2, 0}, {4});
  main.If(4, body, done);
  main.Bind(body);
  main.Invoke(step.index(), {1, 2}, {1});
  AllocScalar(main, 5, 10);
  main.InvokeKernel(add, {2, 3}, {5});
  main.Move(2, 5);
  main.Goto(loop);
  main.Bind(done);
  main.LoadConst(6, bias_const);
  AllocScalar(main, 7, 10);
  main.InvokeKernel(add, {1, 6}, {7});
  main.Ret({7});

  kiln::MetadataDef meta;
  meta.entry = "main";
  meta.inputs = {I64("n")};
  meta.outputs = {I64("result")};
  b.SetMetadata(meta);
  return b.WriteFile(path);
}

int Fail(const char* step, const Status& s) {
  std::fprintf(stderr, "quickstart: %s: %s\n", step, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = argc > 1 ? argv[1] : std::string(tmp ? tmp : "/tmp") + "/quickstart.kiln";

  // (1) Build an executable with the builder and save it.
  std::printf("(1) building %s\n", path.c_str());
  if (Status s = BuildExecutable(path); !s.ok()) return Fail("build", s);

  // (2) Load it back: mmap, then the FlatBuffers, semantic and bytecode verifiers.
  kiln::LoadOptions options;
  options.kernels = std::make_shared<HostKernels>();
  auto exe = kiln::Executable::LoadFile(path, options);
  if (!exe.ok()) return Fail("load", exe.status());
  std::printf("(2) loaded and verified: format %d.%d, %d functions, %zu bytes\n",
              (*exe)->version_major(), (*exe)->version_minor(), (*exe)->num_functions(),
              (*exe)->file_size());

  // (3) Look at the code.
  std::printf("(3) disassembly:\n%s", kiln::DisassembleFunction(**exe, (*exe)->FindFunction("main")).c_str());

  // (4) Create a context and run @main at a few inputs.
  auto ctx = kiln::Context::Create(*exe);
  if (!ctx.ok()) return Fail("context", ctx.status());
  for (int64_t n : {0, 1, 10, 100, 1000}) {
    auto input = Tensor::Allocate(kiln::DefaultAllocator(), DType::kI64, kiln::Shape());
    *input->data_as<int64_t>() = n;
    auto start = std::chrono::steady_clock::now();
    auto out = (*ctx)->Invoke("main", {*input});
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (!out.ok()) return Fail("run", out.status());
    int64_t got = *(*out)[0].data_as<int64_t>();
    int64_t want = 1000 + (n - 1) * n * (2 * n - 1) / 6;
    std::printf("(4) main(%lld) = %lld  [%llu instructions, %.1f us]\n", static_cast<long long>(n),
                static_cast<long long>(got),
                static_cast<unsigned long long>((*ctx)->instructions_executed()), us);
    if (got != want) {
      std::fprintf(stderr, "quickstart: main(%lld) = %lld, expected %lld\n", static_cast<long long>(n),
                   static_cast<long long>(got), static_cast<long long>(want));
      return 1;
    }
  }
  std::printf("(5) all results match the closed form sum_{i<n} i^2 + 1000\n");
  return 0;
}
