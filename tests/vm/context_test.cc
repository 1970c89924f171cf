// Context (vm/context.cc): input checking names the input and what is wrong, a context stays
// usable after every error, many contexts run one executable concurrently, and lifetimes: a
// context keeps its executable alive, outputs outlive the context.
#define BOOST_TEST_MODULE context_test
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/vm/test_programs.h"

namespace kiln::testing {
namespace {

ValueSpec Batch4(const std::string& name) {
  return ValueSpec{name, DType::kF32, {{-1, "batch"}, {4, ""}}, false};
}

// main(a: f32[batch, 4], b: f32[batch, 4]) -> f32[batch, 4] = a + b, with a dynamic shape;
// free(x: f32[?, ?]) -> x; pair(t: tuple) -> nothing.
std::shared_ptr<const Executable> BuildAdder() {
  ExecutableBuilder b;
  int add = b.AddKernel({"add", {DType::kF32, DType::kF32}, {DType::kF32}, "", {}, {}});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(Batch4("a"));
  f.AddParam(Batch4("b"));
  f.AddResult(Batch4("sum"));
  f.LoadConsti(2, 1 << 16);
  f.AllocStorage(3, 2);
  f.ShapeOf(4, 0);
  f.AllocTensorReg(5, 3, 0, DType::kF32, 4);
  f.InvokeKernel(add, {0, 1}, {5});
  f.Ret({5});
  FunctionBuilder& g = b.AddFunction("free");
  g.AddParam(ValueSpec{"x", DType::kF32, {{-1, ""}, {-1, ""}}, false});
  g.AddResult(ValueSpec{"x", DType::kF32, {{-1, ""}, {-1, ""}}, false});
  g.Ret({0});
  FunctionBuilder& h = b.AddFunction("pair");
  h.AddParam(ValueSpec{"t", DType::kInvalid, {}, true});
  h.Ret({});
  return LoadOrDie(b);
}

// A [rows, 4] f32 tensor holding start, start + 1, ...
Tensor Iota(int64_t rows, float start, int64_t cols = 4) {
  Tensor t = *Tensor::Allocate(DefaultAllocator(), DType::kF32, Shape{rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) t.data_as<float>()[i] = start + static_cast<float>(i);
  return t;
}

// Runs main on [rows, 4] inputs and checks every element of the sum.
void ExpectSum(Context& ctx, int64_t rows) {
  auto out = ctx.Invoke("main", {Iota(rows, 1), Iota(rows, 100)});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_REQUIRE_EQUAL(out->size(), 1u);
  const Tensor& sum = (*out)[0];
  BOOST_TEST(sum.TypeString() == "f32[" + std::to_string(rows) + ", 4]");
  for (int64_t i = 0; i < rows * 4; ++i) {
    BOOST_REQUIRE(sum.data_as<float>()[i] == 101.0f + 2 * static_cast<float>(i));
  }
}

struct BadInputs {
  const char* what;
  std::string function;
  std::vector<Tensor> inputs;
  StatusCode code;
  std::string message;
};

BOOST_AUTO_TEST_CASE(inputs_are_checked_and_the_context_stays_usable) {
  auto ctx = *Context::Create(BuildAdder());
  ExpectSum(*ctx, 2);
  int64_t i64s[8] = {};
  float flat[4] = {};
  const BadInputs cases[] = {
      {"too few inputs",
       "main",
       {Iota(2, 0)},
       StatusCode::kInvalidArgument,
       "'main' takes 2 inputs, got 1"},
      {"too many inputs",
       "main",
       {Iota(2, 0), Iota(2, 0), Iota(2, 0)},
       StatusCode::kInvalidArgument,
       "'main' takes 2 inputs, got 3"},
      {"wrong dtype",
       "main",
       {Iota(2, 0), Tensor::Wrap(i64s, DType::kI64, Shape{2, 4})},
       StatusCode::kInvalidArgument,
       "input 1 'b': dtype i64, expected f32"},
      {"wrong rank",
       "main",
       {Tensor::Wrap(flat, DType::kF32, Shape{4}), Iota(2, 0)},
       StatusCode::kInvalidArgument,
       "input 0 'a': rank 1 (shape [4]), expected a: f32[batch, 4]"},
      {"wrong fixed dim",
       "main",
       {Iota(2, 0, 5), Iota(2, 0)},
       StatusCode::kInvalidArgument,
       "input 0 'a': dim 1 is 5, expected 4 (a: f32[batch, 4])"},
      {"symbolic dim contradicts another input",
       "main",
       {Iota(2, 0), Iota(3, 0)},
       StatusCode::kInvalidArgument,
       "input 1 'b': dim 0 ('batch') is 3 but input 0 set 'batch' = 2"},
      {"empty tensor",
       "main",
       {Tensor(), Iota(2, 0)},
       StatusCode::kInvalidArgument,
       "input 0 'a': empty tensor"},
      {"tuple parameter",
       "pair",
       {Iota(1, 0)},
       StatusCode::kInvalidArgument,
       "input 0 't': tuple parameters cannot be passed from the API"},
      {"unknown function", "nope", {}, StatusCode::kNotFound, "no function named 'nope'"},
  };
  for (const BadInputs& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      auto out = ctx->Invoke(c.function, c.inputs);
      BOOST_TEST(out.status().code() == c.code);
      BOOST_TEST(out.status().message() == c.message);
      ExpectSum(*ctx, 3);  // reusable after the error
    }
  }
  auto out = ctx->Invoke(99, {});
  BOOST_TEST(out.status().code() == StatusCode::kNotFound);
  BOOST_TEST(out.status().message() == "no function with index 99");
  ExpectSum(*ctx, 1);
}

BOOST_AUTO_TEST_CASE(symbols_bind_per_call_and_unnamed_dims_are_free) {
  auto ctx = *Context::Create(BuildAdder());
  ExpectSum(*ctx, 5);  // batch = 5 here does not constrain the next call
  ExpectSum(*ctx, 2);
  ExpectSum(*ctx, 0);  // zero rows is a valid batch
  auto out = ctx->Invoke("free", {Iota(3, 0, 7)});
  BOOST_REQUIRE(out.ok());
  BOOST_TEST((*out)[0].TypeString() == "f32[3, 7]");
}

BOOST_AUTO_TEST_CASE(runtime_error_leaves_the_context_usable) {
  auto ctx = *Context::Create(BuildAdder());
  // Rows 20000 * 4 * 4 bytes exceed the 64 KiB storage main allocates: a run-time error.
  auto out = ctx->Invoke("main", {Iota(20000, 0), Iota(20000, 0)});
  BOOST_TEST(out.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(out.status().message().find("in 'main' at pc 3 (alloc_tensor_reg)") == 0u);
  BOOST_TEST(out.status().message().find("does not fit in storage of 65536 bytes") !=
             std::string::npos);
  ExpectSum(*ctx, 4);
}

BOOST_AUTO_TEST_CASE(create_refuses_a_null_executable) {
  auto ctx = Context::Create(nullptr);
  BOOST_TEST(ctx.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(ctx.status().message() == "Context::Create: null executable");
}

int64_t Triangle(int64_t n) { return n * (n - 1) / 2; }

BOOST_AUTO_TEST_CASE(one_executable_many_threads_each_with_a_context) {
  ExecutableBuilder b;
  BuildSumLoop(b, AddLoopKernels(b));
  std::shared_ptr<const Executable> exe = LoadOrDie(b);
  constexpr int kThreads = 8, kRuns = 200;
  std::vector<int> wrong(kThreads, 0), failed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto ctx = Context::Create(exe);
      if (!ctx.ok()) {
        failed[t] = kRuns;
        return;
      }
      for (int i = 0; i < kRuns; ++i) {
        int64_t n = 10 * t + i % 17;  // different n per thread and per run
        auto out = (*ctx)->Invoke("main", {I64Scalar(n)});
        if (!out.ok()) {
          ++failed[t];
        } else if (*(*out)[0].data_as<int64_t>() != Triangle(n)) {
          ++wrong[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    BOOST_TEST_INFO("thread " << t);
    BOOST_TEST(failed[t] == 0);
    BOOST_TEST_INFO("thread " << t);
    BOOST_TEST(wrong[t] == 0);
  }
  BOOST_TEST(exe.use_count() == 1);  // the contexts are gone and released it
}

BOOST_AUTO_TEST_CASE(context_keeps_its_executable_alive) {
  ExecutableBuilder b;
  BuildSumLoop(b, AddLoopKernels(b));
  std::shared_ptr<const Executable> exe = LoadOrDie(b);
  std::weak_ptr<const Executable> weak = exe;
  auto ctx = *Context::Create(exe);
  exe.reset();
  BOOST_TEST(!weak.expired());
  auto out = ctx->Invoke("main", {I64Scalar(100)});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST(*(*out)[0].data_as<int64_t>() == 4950);
  BOOST_TEST(&ctx->executable() == weak.lock().get());
  ctx.reset();
  BOOST_TEST(weak.expired());
}

BOOST_AUTO_TEST_CASE(outputs_outlive_the_context_and_the_executable) {
  // A mapped file: were a constant output not to keep the mapping alive, reading it after the
  // executable is gone would fault.
  ExecutableBuilder b;
  float w[16];
  for (int i = 0; i < 16; ++i) w[i] = 0.5f * static_cast<float>(i);
  int c = b.AddConstant("w", DType::kF32, {4, 4}, w, sizeof(w));
  LoopKernels k = AddLoopKernels(b);
  BuildSumLoop(b, k, "sum");
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(Scalar("n", DType::kI64));
  f.AddResult(ValueSpec{"w", DType::kF32, {{4, ""}, {4, ""}}, false});
  f.AddResult(Scalar("sum", DType::kI64));
  f.AddResult(Scalar("n", DType::kI64));
  f.LoadConst(1, c);
  f.Invoke(0, {0}, {2});
  f.Ret({1, 2, 0});
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path =
      std::string(dir ? dir : "/tmp") + "/" + std::to_string(getpid()) + "_outlive.kiln";
  BOOST_REQUIRE(b.WriteFile(path).ok());
  auto loaded = Executable::LoadFile(path, TestLoadOptions());
  BOOST_REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
  std::shared_ptr<const Executable> exe = std::move(*loaded);
  std::weak_ptr<const Executable> weak = exe;
  std::vector<Tensor> outputs;
  {
    auto ctx = *Context::Create(exe);
    exe.reset();
    Tensor n = I64Scalar(30);
    auto out = ctx->Invoke("main", {n});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    outputs = *out;
    BOOST_TEST(outputs[2].data() == n.data());  // an input returned as is: the same storage
  }
  ::unlink(path.c_str());
  BOOST_TEST(weak.expired());
  BOOST_REQUIRE_EQUAL(outputs.size(), 3u);
  BOOST_TEST(outputs[0].TypeString() == "f32[4, 4]");
  BOOST_TEST(std::memcmp(outputs[0].data(), w, sizeof(w)) == 0);
  BOOST_TEST(*outputs[1].data_as<int64_t>() == Triangle(30));
  BOOST_TEST(*outputs[2].data_as<int64_t>() == 30);
}

BOOST_AUTO_TEST_CASE(a_constant_cannot_be_an_output) {
  // Constants are mapped read-only and shared by every context: a verified program that
  // passes one as a kernel, shape-function or region output gets an error, not a fault.
  ExecutableBuilder b;
  float w[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  int cw = b.AddConstant("w", DType::kF32, {4}, w, sizeof(w));
  int cs = b.AddConstant("shape", DType::kI64, {1}, dims, sizeof(dims));
  int add = b.AddKernel({"add", {DType::kF32, DType::kF32}, {DType::kF32}, "", {}, {}});
  int same = b.AddShapeFunction({"same_shape", 1, 1, {false}, "", {}});
  ExternalRegionDef region;
  region.name = "test_0";
  region.vendor = "test";
  region.blob = {'2'};
  region.num_inputs = region.num_outputs = 1;
  int r = b.AddExternalRegion(region);
  const ValueSpec f32x4{"w", DType::kF32, {{4, ""}}, false};
  FunctionBuilder& k = b.AddFunction("kernel");
  k.AddResult(f32x4);
  k.LoadConst(0, cw);
  k.LoadConst(2, cs);
  k.ReshapeTensor(1, 0, 2);  // a reshaped constant is still the constant's bytes
  k.InvokeKernel(add, {0, 0}, {1});
  k.Ret({1});
  FunctionBuilder& s = b.AddFunction("shape");
  s.AddParam(f32x4);
  s.AddResult(ValueSpec{"s", DType::kI64, {{1, ""}}, false});
  s.LoadConst(1, cs);
  s.InvokeShapeFunc(same, {0}, {1});
  s.Ret({1});
  FunctionBuilder& e = b.AddFunction("region");
  e.AddParam(f32x4);
  e.AddResult(f32x4);
  e.LoadConst(1, cw);
  e.InvokeExternal(r, {0}, {1});
  e.Ret({1});
  FunctionBuilder& ok = b.AddFunction("input");  // reading a constant is fine
  ok.AddResult(f32x4);
  ok.LoadConst(0, cw);
  EmitAlloc(ok, 1, 2, DType::kF32, {4});
  ok.InvokeKernel(add, {0, 0}, {1});
  ok.Ret({1});
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path =
      std::string(dir ? dir : "/tmp") + "/" + std::to_string(getpid()) + "_const.kiln";
  BOOST_REQUIRE(b.WriteFile(path).ok());
  auto exe = Executable::LoadFile(path, TestLoadOptions());
  ::unlink(path.c_str());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  auto ctx = *Context::Create(*exe);
  float x[4] = {1, 1, 1, 1};
  Tensor in = Tensor::Wrap(x, DType::kF32, Shape{4});
  auto out = ctx->Invoke("kernel", {});
  BOOST_TEST(out.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(out.status().message() ==
             "in 'kernel' at pc 3 (invoke_kernel): operand 2 (r1) is a constant, which cannot be "
             "an output");
  out = ctx->Invoke("shape", {in});
  BOOST_TEST(out.status().message() ==
             "in 'shape' at pc 1 (invoke_shape_func): operand 1 (r1) is a constant, which cannot "
             "be an output");
  out = ctx->Invoke("region", {in});
  BOOST_TEST(out.status().message() ==
             "in 'region' at pc 1 (invoke_external): operand 1 (r1) is a constant, which cannot be "
             "an output");
  out = ctx->Invoke("input", {});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST((*out)[0].data_as<float>()[3] == 8.0f);
  BOOST_TEST((*exe)->constant(cw).data_as<float>()[3] == 4.0f);  // unchanged
}

}  // namespace
}  // namespace kiln::testing
