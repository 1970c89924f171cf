// Semantics of every opcode, calls and recursion, tuples, and run-time errors with context.
#define BOOST_TEST_MODULE interpreter_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstring>

#include "base/deadline.h"
#include "tests/vm/test_programs.h"

namespace kiln::testing {
namespace {

int64_t RunScalar(std::shared_ptr<const Executable> exe, const std::string& fn, int64_t arg) {
  auto ctx = Context::Create(exe);
  BOOST_REQUIRE(ctx.ok());
  auto out = (*ctx)->Invoke(fn, {I64Scalar(arg)});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_REQUIRE_EQUAL(out->size(), 1u);
  return *(*out)[0].data_as<int64_t>();
}

BOOST_AUTO_TEST_CASE(loop_sums_with_kernels_and_branches) {
  ExecutableBuilder b;
  BuildSumLoop(b, AddLoopKernels(b));
  auto exe = LoadOrDie(b);
  BOOST_TEST(RunScalar(exe, "main", 0) == 0);
  BOOST_TEST(RunScalar(exe, "main", 1) == 0);
  BOOST_TEST(RunScalar(exe, "main", 10) == 45);
  BOOST_TEST(RunScalar(exe, "main", 1000) == 499500);
}

// fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2), by recursive invoke.
void BuildFib(ExecutableBuilder& b) {
  LoopKernels k = AddLoopKernels(b);
  FunctionBuilder& f = b.AddFunction("fib");
  f.AddParam(Scalar("n", DType::kI64));
  f.AddResult(Scalar("r", DType::kI64));
  Label base = f.NewLabel(), rec = f.NewLabel();
  f.LoadConsti(1, 2);
  EmitAlloc(f, 2, 20, DType::kBool, {});
  f.InvokeKernel(k.less, {0, 1}, {2});
  f.If(2, base, rec);
  f.Bind(base);
  f.Ret({0});
  f.Bind(rec);
  f.LoadConsti(3, -1);
  f.LoadConsti(4, -2);
  EmitAlloc(f, 5, 20, DType::kI64, {});
  f.InvokeKernel(k.add, {0, 3}, {5});
  EmitAlloc(f, 6, 20, DType::kI64, {});
  f.InvokeKernel(k.add, {0, 4}, {6});
  f.Invoke(f.index(), {5}, {7});
  f.Invoke(f.index(), {6}, {8});
  EmitAlloc(f, 9, 20, DType::kI64, {});
  f.InvokeKernel(k.add, {7, 8}, {9});
  f.Ret({9});
}

BOOST_AUTO_TEST_CASE(recursion_computes_fibonacci) {
  ExecutableBuilder b;
  BuildFib(b);
  auto exe = LoadOrDie(b);
  const int64_t expect[] = {0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610};
  for (int n = 0; n < 16; ++n) BOOST_TEST(RunScalar(exe, "fib", n) == expect[n]);
}

BOOST_AUTO_TEST_CASE(invoke_passes_arguments_and_multiple_results) {
  ExecutableBuilder b;
  FunctionBuilder& swap = b.AddFunction("swap");
  swap.AddParam(Scalar("x", DType::kI64));
  swap.AddParam(Scalar("y", DType::kI64));
  swap.AddResult(Scalar("y", DType::kI64));
  swap.AddResult(Scalar("x", DType::kI64));
  swap.Ret({1, 0});
  FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(Scalar("a", DType::kI64));
  main.AddParam(Scalar("b", DType::kI64));
  main.Invoke(swap.index(), {0, 1}, {2, 3});
  main.AddResult(Scalar("p", DType::kI64));
  main.AddResult(Scalar("q", DType::kI64));
  main.Ret({2, 3});
  auto ctx = *Context::Create(LoadOrDie(b));
  auto out = ctx->Invoke("main", {I64Scalar(7), I64Scalar(9)});
  BOOST_REQUIRE(out.ok());
  BOOST_TEST(*(*out)[0].data_as<int64_t>() == 9);
  BOOST_TEST(*(*out)[1].data_as<int64_t>() == 7);
}

BOOST_AUTO_TEST_CASE(tuples_hold_and_return_fields) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(Scalar("a", DType::kI64));
  f.AddResult(Scalar("a", DType::kI64));
  f.AddResult(Scalar("c", DType::kI64));
  f.LoadConsti(1, 42);
  f.AllocTuple(2, {0, 1});
  f.AllocTuple(3, {2, 0});  // nested
  f.KillRegister(0);
  f.KillRegister(1);
  f.KillRegister(2);
  f.GetField(4, 3, 0);
  f.GetField(5, 4, 1);
  f.GetField(6, 3, 1);
  f.Ret({6, 5});
  auto ctx = *Context::Create(LoadOrDie(b));
  auto out = ctx->Invoke("main", {I64Scalar(5)});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST(*(*out)[0].data_as<int64_t>() == 5);
  BOOST_TEST(*(*out)[1].data_as<int64_t>() == 42);
}

BOOST_AUTO_TEST_CASE(load_const_views_the_executable_bytes_without_copy) {
  ExecutableBuilder b;
  float w[6] = {1, 2, 3, 4, 5, 6};
  int c = b.AddConstant("w", DType::kF32, {2, 3}, w, sizeof(w));
  FunctionBuilder& f = b.AddFunction("main");
  f.AddResult(ValueSpec{"w", DType::kF32, {{2, ""}, {3, ""}}, false});
  f.LoadConst(0, c);
  f.Ret({0});
  auto exe = LoadOrDie(b);
  auto out = (*Context::Create(exe))->Invoke("main", {});
  BOOST_REQUIRE(out.ok());
  const Tensor& t = (*out)[0];
  BOOST_TEST(t.TypeString() == "f32[2, 3]");
  BOOST_TEST(std::memcmp(t.data(), w, sizeof(w)) == 0);
  auto* p = static_cast<const uint8_t*>(t.data());
  BOOST_TEST((p >= exe->bytes() && p < exe->bytes() + exe->file_size()));
  BOOST_TEST(reinterpret_cast<uintptr_t>(p) % 64 == 0);
}

BOOST_AUTO_TEST_CASE(shape_of_reshape_and_alloc_tensor_reg) {
  ExecutableBuilder b;
  int same = b.AddShapeFunction({"same_shape", 1, 1, {false}});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{-1, "n"}, {4, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{-1, ""}}, false});
  f.AddResult(ValueSpec{"s", DType::kI64, {{2, ""}}, false});
  f.AddResult(ValueSpec{"z", DType::kF32, {{-1, "n"}, {4, ""}}, false});
  f.ShapeOf(1, 0);                          // [n, 4]
  EmitAlloc(f, 2, 10, DType::kI64, {1});    // new shape [n * 4]
  f.Move(3, 2);
  b.AddKernel({"unused", {}, {}});
  f.AllocTuple(4, {});                      // empty tuple, dropped
  f.KillRegister(4);
  // Use the shape function to compute [n, 4] again, then allocate a tensor of that shape.
  EmitAlloc(f, 5, 10, DType::kI64, {2});
  f.InvokeShapeFunc(same, {0}, {5});
  f.LoadConsti(6, 1024);
  f.AllocStorage(7, 6);
  f.AllocTensorReg(8, 7, 64, DType::kF32, 5);
  f.Ret({0, 1, 8});
  // The "unused" kernel must bind, so register it.
  auto kernels = std::make_shared<TestKernelProvider>();
  kernels->Add("unused", [](const Tensor* const*, int, int) { return Status::Ok(); });
  auto bytes = *b.Finish();
  LoadOptions options;
  options.kernels = kernels;
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  auto ctx = *Context::Create(*exe);
  float x[12] = {};
  auto out = ctx->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{3, 4})});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST((*out)[1].TypeString() == "i64[2]");
  BOOST_TEST((*out)[1].data_as<int64_t>()[0] == 3);
  BOOST_TEST((*out)[1].data_as<int64_t>()[1] == 4);
  BOOST_TEST((*out)[2].TypeString() == "f32[3, 4]");
  BOOST_TEST((*out)[2].byte_offset() == 64);
}

BOOST_AUTO_TEST_CASE(reshape_tensor_keeps_storage) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{2, ""}, {6, ""}}, false});
  f.AddParam(ValueSpec{"shape", DType::kI64, {{3, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{3, ""}, {2, ""}, {2, ""}}, false});
  f.ReshapeTensor(2, 0, 1);
  f.Ret({2});
  auto ctx = *Context::Create(LoadOrDie(b));
  float x[12];
  int64_t shape[3] = {3, 2, 2}, bad[3] = {3, 2, 3};
  auto out = ctx->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{2, 6}),
                                  Tensor::Wrap(shape, DType::kI64, Shape{3})});
  BOOST_REQUIRE(out.ok());
  BOOST_TEST((*out)[0].TypeString() == "f32[3, 2, 2]");
  BOOST_TEST((*out)[0].data() == static_cast<void*>(x));
  out = ctx->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{2, 6}),
                             Tensor::Wrap(bad, DType::kI64, Shape{3})});
  BOOST_REQUIRE(!out.ok());
  BOOST_TEST(out.status().message().find("cannot reshape f32[2, 6] to [3, 2, 3]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(external_region_runs_with_constants_by_reference) {
  ExecutableBuilder b;
  float bias[2] = {0.25f, 0.25f};
  int c = b.AddConstant("bias", DType::kF32, {2}, bias, sizeof(bias));
  std::string blob = "3";
  int region = b.AddExternalRegion({"test_0", "test", {blob.begin(), blob.end()}, {uint32_t(c)}, 1, 1});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{4, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{4, ""}}, false});
  EmitAlloc(f, 1, 5, DType::kF32, {4});
  f.InvokeExternal(region, {0}, {1});
  f.Ret({1});
  auto ctx = *Context::Create(LoadOrDie(b));
  float x[4] = {1, 2, 3, 4};
  auto out = ctx->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{4})});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  for (int i = 0; i < 4; ++i) BOOST_TEST((*out)[0].data_as<float>()[i] == x[i] * 3 + 0.5f);
}

BOOST_AUTO_TEST_CASE(errors_name_function_pc_and_source_node) {
  ExecutableBuilder b;
  int fail = b.AddKernel({"fail", {}, {}});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddResult(Scalar("r", DType::kI64));
  f.LoadConsti(0, 1);
  f.SetSourceNode("Conv_7");
  f.InvokeKernel(fail, {}, {});
  f.Ret({0});
  auto out = (*Context::Create(LoadOrDie(b)))->Invoke("main", {});
  BOOST_REQUIRE(!out.ok());
  BOOST_TEST(out.status().code() == StatusCode::kInternal);
  BOOST_TEST(out.status().message() ==
             "in 'main' at pc 1 (invoke_kernel, node 'Conv_7'): kernel 'fail': kernel failed on purpose");
}

BOOST_AUTO_TEST_CASE(fatal_aborts_with_its_message) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  f.Fatal(b.AddString("unreachable branch taken"));
  auto out = (*Context::Create(LoadOrDie(b)))->Invoke("main", {});
  BOOST_TEST(out.status().code() == StatusCode::kAborted);
  BOOST_TEST(out.status().message().find("unreachable branch taken") != std::string::npos);
}

// Clocks that move only when a test says so (ScopedDeadlineClockForTesting): deadline tests
// then do not race the wall clock on a loaded machine. FakeNow moves when a test kernel
// advances it; TickingNow advances 1 ms per read.
std::atomic<int64_t> fake_clock_ms{0};
Clock::time_point FakeNow() {
  return Clock::time_point(std::chrono::milliseconds(fake_clock_ms.load()));
}
Clock::time_point TickingNow() {
  return Clock::time_point(std::chrono::milliseconds(fake_clock_ms.fetch_add(1) + 1));
}

BOOST_AUTO_TEST_CASE(infinite_loop_stops_at_the_deadline) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  Label top = f.NewLabel();
  f.Bind(top);
  f.Move(1, 0);
  f.Goto(top);
  f.set_register_count(2);
  auto ctx = *Context::Create(LoadOrDie(b));
  // Each read of the clock "takes" 1 ms: the loop reads it once per 256 instructions, so it
  // must run thousands of them before the 50 ms pass, however loaded the machine is.
  ScopedDeadlineClockForTesting clock(&TickingNow);
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(50);
  int64_t start_ms = fake_clock_ms.load();
  auto out = ctx->Invoke("main", {}, options);
  BOOST_TEST(out.status().code() == StatusCode::kDeadlineExceeded);
  BOOST_TEST(out.status().message().find("in 'main' at pc 1 (goto)") != std::string::npos);
  BOOST_TEST(fake_clock_ms.load() - start_ms >= 50);
  BOOST_TEST(ctx->instructions_executed() > 1000u);
}

// Straight-line code (no backward jump, no call) of kernels that each take 20 ms (of the fake
// clock): the deadline is checked after every kernel call, so a 30 ms timeout stops the run
// after exactly the second kernel instead of letting all ten run. Each kernel also sees the
// run's deadline on its thread.
BOOST_AUTO_TEST_CASE(deadline_fires_between_kernels_without_loops) {
  ExecutableBuilder b;
  int slow = b.AddKernel({"slow", {}, {}});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddResult(Scalar("r", DType::kI64));
  f.LoadConsti(0, 1);
  for (int i = 0; i < 10; ++i) f.InvokeKernel(slow, {}, {});
  f.Ret({0});
  f.set_register_count(1);
  auto bytes = b.Finish();
  BOOST_REQUIRE(bytes.ok());
  auto kernels = std::make_shared<TestKernelProvider>();
  std::atomic<int> calls{0};
  std::atomic<bool> saw_deadline{true};
  kernels->Add("slow", [&](const Tensor* const*, int, int) {
    ++calls;
    if (CurrentDeadline() == Clock::time_point::max()) saw_deadline = false;
    fake_clock_ms += 20;
    return Status::Ok();
  });
  LoadOptions lo;
  lo.kernels = kernels;
  lo.externals = std::make_shared<TestExternalProvider>();
  auto exe = Executable::LoadBytes(bytes->data(), bytes->size(), lo);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  auto ctx = *Context::Create(*exe);
  ScopedDeadlineClockForTesting clock(&FakeNow);
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(30);
  auto out = ctx->Invoke("main", {}, options);
  BOOST_TEST(out.status().code() == StatusCode::kDeadlineExceeded);
  BOOST_TEST(out.status().message().find("invoke_kernel") != std::string::npos);
  // Two calls reach 30 ms; a run that ignored the deadline would make all ten.
  BOOST_TEST(calls.load() == 2);
  BOOST_TEST(saw_deadline.load());
  // Outside a run the thread has no deadline again.
  BOOST_TEST((CurrentDeadline() == Clock::time_point::max()));
  // Without a deadline the same program runs to the end.
  calls = 0;
  auto full = ctx->Invoke("main", {});
  BOOST_REQUIRE_MESSAGE(full.ok(), full.status().ToString());
  BOOST_TEST(calls.load() == 10);
}

BOOST_AUTO_TEST_CASE(unbounded_recursion_is_an_error_not_a_stack_overflow) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("forever");
  f.AddParam(Scalar("x", DType::kI64));
  f.AddResult(Scalar("x", DType::kI64));
  f.Invoke(0, {0}, {1});
  f.Ret({1});
  ContextOptions options;
  options.max_call_depth = 1000;
  auto ctx = *Context::Create(LoadOrDie(b), options);
  auto out = ctx->Invoke("forever", {I64Scalar(1)});
  BOOST_TEST(out.status().code() == StatusCode::kOutOfRange);
  BOOST_TEST(out.status().message().find("call depth exceeds 1000") != std::string::npos);
  // The context is reusable after the error.
  out = ctx->Invoke("forever", {I64Scalar(1)});
  BOOST_TEST(out.status().code() == StatusCode::kOutOfRange);
}

BOOST_AUTO_TEST_CASE(value_errors_in_verified_code_are_reported) {
  ExecutableBuilder b;
  LoopKernels k = AddLoopKernels(b);
  FunctionBuilder& f = b.AddFunction("empty_reg");
  f.AddResult(Scalar("r", DType::kI64));
  f.InvokeKernel(k.add, {1, 2}, {3});  // registers never written
  f.Ret({3});
  FunctionBuilder& g = b.AddFunction("wrong_dtype");
  g.AddParam(ValueSpec{"x", DType::kF32, {}, false});
  g.AddResult(Scalar("r", DType::kI64));
  g.InvokeKernel(k.add, {0, 0}, {0});
  g.Ret({0});
  FunctionBuilder& h = b.AddFunction("not_storage");
  h.AddResult(Scalar("r", DType::kI64));
  h.LoadConsti(0, 8);
  h.AllocTensor(1, 0, 0, DType::kI64, {});
  h.Ret({1});
  FunctionBuilder& t = b.AddFunction("too_big");
  t.AddResult(Scalar("r", DType::kI64));
  t.LoadConsti(0, 8);
  t.AllocStorage(1, 0);
  t.AllocTensor(2, 1, 0, DType::kI64, {2});
  t.Ret({2});
  auto ctx = *Context::Create(LoadOrDie(b));
  auto out = ctx->Invoke("empty_reg", {});
  BOOST_TEST(out.status().message().find("operand 0 (r1) is empty") != std::string::npos);
  float x = 1;
  out = ctx->Invoke("wrong_dtype", {Tensor::Wrap(&x, DType::kF32, Shape())});
  BOOST_TEST(out.status().message().find("operand 0 is f32[], expected i64") != std::string::npos);
  out = ctx->Invoke("not_storage", {});
  BOOST_TEST(out.status().message().find("storage r0 does not hold a storage") != std::string::npos);
  out = ctx->Invoke("too_big", {});
  BOOST_TEST(out.status().message().find("does not fit in storage of 8 bytes") != std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
