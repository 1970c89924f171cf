// Tests for jit/kernel_provider: executables whose kernels are serialized kernel IR, run by the VM.
#define BOOST_TEST_MODULE kernel_provider_test
#include "jit/kernel_provider.h"

#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jit/compute.h"
#include "jit/kernel_ir_serialize.h"
#include "tests/jit/test_programs.h"
#include "tests/jit/test_util.h"
#include "vm/builder.h"
#include "vm/context.h"

namespace kiln::jit {
namespace {

using testing::KirKernel;
using testing::KirShapeFunction;
using testing::RowSumKernel;
using testing::RowsShapeKernel;

constexpr int64_t kStorageBytes = 1 << 20;  // every output in these programs fits

// Leaked on purpose (as tests/jit/test_util.cc does): destroying an LLJIT during static
// destruction races with LLVM's own static teardown.
std::shared_ptr<Engine> SharedEngineForProvider() {
  static auto* engine = [] {
    auto e = Engine::Create();
    if (!e.ok()) throw std::runtime_error(e.status().ToString());
    return new std::shared_ptr<Engine>(std::move(*e));
  }();
  return *engine;
}

DimSpec Sym(const char* s) { return DimSpec{-1, s}; }

// Kernels of the test executable, in table order.
Kernel AddKernel() {
  return ElementwiseBinary("add", {DType::kF32, 2, {}}, {DType::kF32, 1, {}}, DType::kF32,
                           [](Expr a, Expr b) { return a + b; });
}
// Shape functions as kernels writing i64[rank].
Kernel MatmulShapeKernel() {
  Buffer a = Buffer::Param("a", DType::kF32, 2), b = Buffer::Param("b", DType::kF32, 2);
  Buffer out = Buffer::Param("shape", DType::kI64, 1);
  return Kernel{"mm_shape",
                {a, b, out},
                {},
                Seq({Store(out, {IntImm(0)}, DimOf(a, 0)), Store(out, {IntImm(1)}, DimOf(b, 1))})};
}


// Emits: storage of kStorageBytes in `reg`+1, then tensor `dst` of `dtype` shaped by `shape_reg`.
void EmitAllocShaped(FunctionBuilder& f, int dst, int reg, DType dtype, int shape_reg) {
  f.LoadConsti(reg, kStorageBytes);
  f.AllocStorage(reg + 1, reg);
  f.AllocTensorReg(dst, reg + 1, 0, dtype, shape_reg);
}
void EmitAllocFixed(FunctionBuilder& f, int dst, int reg, DType dtype, std::vector<int64_t> shape) {
  f.LoadConsti(reg, kStorageBytes);
  f.AllocStorage(reg + 1, reg);
  f.AllocTensor(dst, reg + 1, 0, dtype, shape);
}

// add(a: f32[n, m], b: f32[m]) -> f32[n, m]; row_sum(a: f32[n, m]) -> f32[n];
// mm(a: f32[m, k], b: f32[k, n]) -> f32[m, n].
void BuildProgram(ExecutableBuilder& b) {
  int k_add = b.AddKernel(KirKernel(AddKernel(), {DType::kF32, DType::kF32}, {DType::kF32}));
  int k_sum = b.AddKernel(KirKernel(RowSumKernel(), {DType::kF32}, {DType::kF32}));
  int k_mm =
      b.AddKernel(KirKernel(MatmulKernel("matmul"), {DType::kF32, DType::kF32}, {DType::kF32}));
  int s_rows = b.AddShapeFunction(KirShapeFunction(RowsShapeKernel(), 1, 1));
  int s_mm = b.AddShapeFunction(KirShapeFunction(MatmulShapeKernel(), 2, 1));
  {
    FunctionBuilder& f = b.AddFunction("add");
    f.AddParam(ValueSpec{"a", DType::kF32, {Sym("n"), Sym("m")}, false});
    f.AddParam(ValueSpec{"b", DType::kF32, {Sym("m")}, false});
    f.AddResult(ValueSpec{"y", DType::kF32, {Sym("n"), Sym("m")}, false});
    f.ShapeOf(2, 0);
    EmitAllocShaped(f, 3, 10, DType::kF32, 2);
    f.InvokeKernel(k_add, {0, 1}, {3});
    f.Ret({3});
  }
  {
    FunctionBuilder& f = b.AddFunction("row_sum");
    f.AddParam(ValueSpec{"a", DType::kF32, {Sym("n"), Sym("m")}, false});
    f.AddResult(ValueSpec{"y", DType::kF32, {Sym("n")}, false});
    EmitAllocFixed(f, 1, 10, DType::kI64, {1});
    f.InvokeShapeFunc(s_rows, {0}, {1});
    EmitAllocShaped(f, 2, 12, DType::kF32, 1);
    f.InvokeKernel(k_sum, {0}, {2});
    f.Ret({2});
  }
  {
    FunctionBuilder& f = b.AddFunction("mm");
    f.AddParam(ValueSpec{"a", DType::kF32, {Sym("m"), Sym("k")}, false});
    f.AddParam(ValueSpec{"b", DType::kF32, {Sym("k"), Sym("n")}, false});
    f.AddResult(ValueSpec{"c", DType::kF32, {Sym("m"), Sym("n")}, false});
    EmitAllocFixed(f, 2, 10, DType::kI64, {2});
    f.InvokeShapeFunc(s_mm, {0, 1}, {2});
    EmitAllocShaped(f, 3, 12, DType::kF32, 2);
    f.InvokeKernel(k_mm, {0, 1}, {3});
    f.Ret({3});
  }
}

LoadOptions JitLoadOptions(std::shared_ptr<JitKernelProvider>* provider = nullptr) {
  auto p = std::make_shared<JitKernelProvider>(SharedEngineForProvider());
  if (provider) *provider = p;
  LoadOptions options;
  options.kernels = p;
  return options;
}

std::shared_ptr<const Executable> LoadProgram() {
  ExecutableBuilder b;
  BuildProgram(b);
  auto bytes = b.Finish();
  BOOST_REQUIRE(bytes.ok());
  auto exe = Executable::LoadBytes(bytes->data(), bytes->size(), JitLoadOptions());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  return *exe;
}

// Small integer values: every sum and product below is exact in f32, so any summation order
// (vectorized, tiled) must give the reference bit for bit.
std::vector<float> Values(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 13) % 11 - 5);
  return v;
}

Tensor Wrap(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  std::vector<int64_t> d(dims);
  auto shape = Shape::Make(d.data(), static_cast<int>(d.size()));
  return Tensor::Wrap(v.data(), DType::kF32, *shape);
}

std::vector<float> Read(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<float>(p, p + t.NumElements());
}

void CheckAdd(Context& ctx, int64_t n, int64_t m) {
  BOOST_TEST_CONTEXT("add n=" << n << " m=" << m) {
    std::vector<float> a = Values(n * m, 1), b = Values(m, 2);
    auto out = ctx.Invoke("add", {Wrap(a, {n, m}), Wrap(b, {m})});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    BOOST_REQUIRE((*out)[0].shape() == Shape({n, m}));
    std::vector<float> want(n * m);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) want[i * m + j] = a[i * m + j] + b[j];
    }
    BOOST_TEST(Read((*out)[0]) == want, boost::test_tools::per_element());
  }
}

void CheckRowSum(Context& ctx, int64_t n, int64_t m) {
  BOOST_TEST_CONTEXT("row_sum n=" << n << " m=" << m) {
    std::vector<float> a = Values(n * m, 3);
    auto out = ctx.Invoke("row_sum", {Wrap(a, {n, m})});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    BOOST_REQUIRE((*out)[0].shape() == Shape({n}));
    std::vector<float> want(n, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) want[i] += a[i * m + j];
    }
    BOOST_TEST(Read((*out)[0]) == want, boost::test_tools::per_element());
  }
}

void CheckMatmul(Context& ctx, int64_t m, int64_t k, int64_t n) {
  BOOST_TEST_CONTEXT("mm m=" << m << " k=" << k << " n=" << n) {
    std::vector<float> a = Values(m * k, 4), b = Values(k * n, 5);
    auto out = ctx.Invoke("mm", {Wrap(a, {m, k}), Wrap(b, {k, n})});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    BOOST_REQUIRE((*out)[0].shape() == Shape({m, n}));
    std::vector<float> want(m * n, 0.0f);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t p = 0; p < k; ++p) want[i * n + j] += a[i * k + p] * b[p * n + j];
      }
    }
    BOOST_TEST(Read((*out)[0]) == want, boost::test_tools::per_element());
  }
}

void RunAllShapes(const std::shared_ptr<const Executable>& exe) {
  auto ctx = Context::Create(exe);
  BOOST_REQUIRE(ctx.ok());
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 5}, {7, 33}, {16, 64}, {2, 129}, {0, 4}, {5, 1}}) {
    CheckAdd(**ctx, n, m);
    CheckRowSum(**ctx, n, m);
  }
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {4, 4, 4}, {5, 7, 3}, {17, 9, 33}, {64, 32, 48}, {3, 0, 2}}) {
    CheckMatmul(**ctx, m, k, n);
  }
}

BOOST_AUTO_TEST_CASE(runs_compute_kernels_through_the_vm_at_several_shapes) {
  RunAllShapes(LoadProgram());
}

BOOST_AUTO_TEST_CASE(kernel_table_round_trips_through_a_saved_file) {
  ExecutableBuilder b;
  BuildProgram(b);
  std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                     "/kernel_provider_test_" + std::to_string(getpid()) + ".kiln";
  BOOST_REQUIRE(b.WriteFile(path).ok());
  auto exe = Executable::LoadFile(path, JitLoadOptions());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  RunAllShapes(*exe);
  std::remove(path.c_str());
}

Status LoadWithKernel(KernelDef def) {
  ExecutableBuilder b;
  b.AddKernel(std::move(def));
  FunctionBuilder& f = b.AddFunction("main");
  f.Ret({});
  auto bytes = b.Finish();
  BOOST_REQUIRE(bytes.ok());
  return Executable::LoadBytes(bytes->data(), bytes->size(), JitLoadOptions()).status();
}

void ExpectLoadError(KernelDef def, StatusCode code, const std::string& part) {
  Status s = LoadWithKernel(std::move(def));
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.code() == code, s.ToString());
  BOOST_TEST(s.message().find("kernel 'add'") != std::string::npos, s.ToString());
  BOOST_TEST(s.message().find(part) != std::string::npos, s.ToString());
}

BOOST_AUTO_TEST_CASE(bad_payloads_fail_at_load_naming_the_kernel) {
  const std::vector<DType> ins = {DType::kF32, DType::kF32}, outs = {DType::kF32};
  KernelDef good = KirKernel(AddKernel(), ins, outs);
  BOOST_TEST(LoadWithKernel(good).ok());

  KernelDef wrong_format = good;
  wrong_format.payload_format = "tvm-relay-1";
  ExpectLoadError(wrong_format, StatusCode::kUnsupported, "payload format 'tvm-relay-1'");

  KernelDef corrupt = good;
  corrupt.payload.resize(corrupt.payload.size() / 2);
  ExpectLoadError(corrupt, StatusCode::kInvalidFormat, "kernel IR payload at byte");
  corrupt = good;
  corrupt.payload[0] ^= 0xff;
  ExpectLoadError(corrupt, StatusCode::kInvalidFormat, "bad magic");

  KernelDef dtype_mismatch = KirKernel(AddKernel(), {DType::kF32, DType::kF16}, outs);
  ExpectLoadError(dtype_mismatch, StatusCode::kInvalidArgument,
                  "buffer 1 ('in1') is f32 but the table says f16");

  KernelDef arity_mismatch = KirKernel(AddKernel(), {DType::kF32}, outs);
  ExpectLoadError(arity_mismatch, StatusCode::kInvalidArgument,
                  "has 3 buffers, the table declares 2");
}

BOOST_AUTO_TEST_CASE(bad_shape_function_outputs_fail_at_load) {
  // rows_shape's buffers are (a: f32[2], shape: i64[1]); declaring both as outputs makes `a` an
  // output, which a shape function may not have.
  ExecutableBuilder b;
  b.AddShapeFunction(KirShapeFunction(RowsShapeKernel(), 0, 2));
  b.AddFunction("main").Ret({});
  auto bytes = b.Finish();
  BOOST_REQUIRE(bytes.ok());
  Status s = Executable::LoadBytes(bytes->data(), bytes->size(), JitLoadOptions()).status();
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("shape function 'rows_shape'") != std::string::npos, s.ToString());
  BOOST_TEST(s.message().find("output buffer 'a' must be i64 of rank 1") != std::string::npos,
             s.ToString());
}

BOOST_AUTO_TEST_CASE(run_rejects_tensors_that_do_not_match_the_kernel) {
  auto provider = std::make_shared<JitKernelProvider>(SharedEngineForProvider());
  std::vector<uint8_t> payload = SerializeKernel(AddKernel());
  KernelSpec spec;
  spec.name = "add";
  spec.input_dtypes = {DType::kF32, DType::kF32};
  spec.output_dtypes = {DType::kF32};
  spec.payload_format = kPayloadFormat;
  spec.payload = payload.data();
  spec.payload_size = payload.size();
  auto fn = provider->PrepareKernel(spec);
  BOOST_REQUIRE(fn.ok());
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30}, y(6, -1.0f);
  Tensor ta = Wrap(a, {2, 3}), tb = Wrap(b, {3}), ty = Wrap(y, {2, 3});
  Tensor bad_rank = Wrap(b, {1, 3});
  const Tensor* args[] = {&ta, &bad_rank, &ty};
  Status s = (*fn)->Run(args, 2, 1);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(
      s.message().find("argument 1 ('in1') is f32[1, 3], the kernel expects f32 of rank 1") !=
          std::string::npos,
      s.ToString());
  BOOST_TEST((y == std::vector<float>(6, -1.0f)), "a rejected call wrote its output");
  const Tensor* good[] = {&ta, &tb, &ty};
  BOOST_REQUIRE((*fn)->Run(good, 2, 1).ok());
  // y[i, j] = a[i, j] + b[j], exact in f32.
  BOOST_TEST((y == std::vector<float>{11, 22, 33, 14, 25, 36}));
}

BOOST_AUTO_TEST_CASE(preconditions_stop_mismatched_shapes_before_the_kernel_runs) {
  // An output smaller than the input: without the precondition the add kernel would read and
  // write out of bounds.
  auto provider = std::make_shared<JitKernelProvider>(SharedEngineForProvider());
  Kernel k = AddKernel();
  std::vector<Expr> pre;
  for (int a = 0; a < 2; ++a) pre.push_back(Eq(DimOf(k.buffers[2], a), DimOf(k.buffers[0], a)));
  pre.push_back(Eq(DimOf(k.buffers[1], 0), DimOf(k.buffers[0], 1)));
  std::vector<uint8_t> payload = SerializeKernel(k, {}, pre);
  KernelSpec spec;
  spec.name = "add";
  spec.input_dtypes = {DType::kF32, DType::kF32};
  spec.output_dtypes = {DType::kF32};
  spec.payload_format = kPayloadFormat;
  spec.payload = payload.data();
  spec.payload_size = payload.size();
  auto fn = provider->PrepareKernel(spec);
  BOOST_REQUIRE_MESSAGE(fn.ok(), fn.status().ToString());
  std::vector<float> a(64, 1.0f), b(8, 2.0f), y(64, 0.0f);
  Tensor ta = Wrap(a, {8, 8}), tb = Wrap(b, {8}), small = Wrap(y, {1, 8}), ty = Wrap(y, {8, 8});
  const Tensor* bad[] = {&ta, &tb, &small};
  Status s = (*fn)->Run(bad, 2, 1);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("violate its precondition") != std::string::npos, s.ToString());
  BOOST_TEST(y[8] == 0.0f);  // nothing was written
  Tensor tb_short = Wrap(b, {4});
  const Tensor* bad2[] = {&ta, &tb_short, &ty};
  Status s2 = (*fn)->Run(bad2, 2, 1);
  BOOST_TEST(!s2.ok());
  // An equality that fails is explained with both sides' values.
  BOOST_TEST(s2.message().find("(in1.shape[0] == in0.shape[1]): in1.shape[0] is 4, "
                               "in0.shape[1] is 8") != std::string::npos,
             s2.ToString());
  const Tensor* good[] = {&ta, &tb, &ty};
  BOOST_TEST((*fn)->Run(good, 2, 1).ok());
  BOOST_TEST(y[63] == 3.0f);
}

// The provider remembers the last shapes that passed a kernel's preconditions, to skip checking
// them again: other shapes must still be checked, after any number of good calls, from any
// number of threads at once.
BOOST_AUTO_TEST_CASE(remembered_good_shapes_never_let_a_mismatched_call_through) {
  auto provider = std::make_shared<JitKernelProvider>(SharedEngineForProvider());
  Kernel k = AddKernel();
  std::vector<Expr> pre;
  for (int a = 0; a < 2; ++a) pre.push_back(Eq(DimOf(k.buffers[2], a), DimOf(k.buffers[0], a)));
  pre.push_back(Eq(DimOf(k.buffers[1], 0), DimOf(k.buffers[0], 1)));
  std::vector<uint8_t> payload = SerializeKernel(k, {}, pre);
  KernelSpec spec;
  spec.name = "add";
  spec.input_dtypes = {DType::kF32, DType::kF32};
  spec.output_dtypes = {DType::kF32};
  spec.payload_format = kPayloadFormat;
  spec.payload = payload.data();
  spec.payload_size = payload.size();
  auto prepared = provider->PrepareKernel(spec);
  BOOST_REQUIRE_MESSAGE(prepared.ok(), prepared.status().ToString());
  TensorFunction* fn = prepared->get();

  // One thread's calls: `rounds` times a good [8, 8] call, then calls whose output, or whose
  // second input, has other dims than the good call's (each passes alone as far as ranks and
  // dtypes go); the good one writes a[i, j] + b[j], the others nothing.
  auto calls = [fn](int rounds, float base, std::string* failure) {
    std::vector<float> a(64), b(8), y(64), small(8, -1.0f), wide(72, -1.0f);
    for (int i = 0; i < 64; ++i) a[i] = base + static_cast<float>(i);
    for (int j = 0; j < 8; ++j) b[j] = static_cast<float>(100 * j);
    Tensor ta = Wrap(a, {8, 8}), tb = Wrap(b, {8}), ty = Wrap(y, {8, 8});
    Tensor t_small = Wrap(small, {1, 8}), t_wide = Wrap(wide, {8, 9}), tb_short = Wrap(b, {4});
    const Tensor* good[] = {&ta, &tb, &ty};
    const Tensor* bad_rows[] = {&ta, &tb, &t_small};
    const Tensor* bad_cols[] = {&ta, &tb, &t_wide};
    const Tensor* bad_b[] = {&ta, &tb_short, &ty};
    for (int r = 0; r < rounds && failure->empty(); ++r) {
      std::fill(y.begin(), y.end(), 0.0f);
      Status s = fn->Run(good, 2, 1);
      if (!s.ok()) *failure = "good call failed: " + s.ToString();
      for (int i = 0; i < 64 && failure->empty(); ++i) {
        if (y[i] != a[i] + b[i % 8]) *failure = "good call wrote y[" + std::to_string(i) + "]";
      }
      for (const Tensor* const* bad : {bad_rows, bad_cols, bad_b}) {
        std::fill(y.begin(), y.end(), -1.0f);
        Status b2 = fn->Run(bad, 2, 1);
        if (b2.code() != StatusCode::kInvalidArgument ||
            b2.message().find("violate its precondition") == std::string::npos) {
          *failure = "a mismatched call returned " + b2.ToString();
        }
      }
      if (failure->empty() && (small != std::vector<float>(8, -1.0f) ||
                               wide != std::vector<float>(72, -1.0f) ||
                               y != std::vector<float>(64, -1.0f))) {
        *failure = "a mismatched call wrote its output";
      }
    }
  };
  std::string failure;
  calls(3, 0.0f, &failure);
  BOOST_REQUIRE_MESSAGE(failure.empty(), failure);

  constexpr int kThreads = 4;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(calls, 200, static_cast<float>(1000 * t), &failures[t]);
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) BOOST_TEST(f.empty(), f);
}

BOOST_AUTO_TEST_CASE(dispatch_hints_in_the_executable_reach_the_provider) {
  // A kernel with a symbolic dim `n` bound to x's dim 0: y[i] = x[i] * 2 for i < n.
  Buffer x = Buffer::Param("x", DType::kF32, 1), y = Buffer::Param("y", DType::kF32, 1);
  Var n("n"), i("i");
  Kernel k{"double", {x, y}, {n}, For(i, n, ForKind::kSerial, Store(y, {i}, Load(x, {i}) * 2.0f))};
  ExecutableBuilder b;
  KernelDef def{"double",
                {DType::kF32},
                {DType::kF32},
                kPayloadFormat,
                SerializeKernel(k, {{0, 0}}),
                {{"n", {4, 16}}, {"unknown_symbol", {3}}}};
  b.AddKernel(def);
  b.AddFunction("main").Ret({});
  auto bytes = b.Finish();
  BOOST_REQUIRE(bytes.ok());
  std::shared_ptr<JitKernelProvider> provider;
  auto exe = Executable::LoadBytes(bytes->data(), bytes->size(), JitLoadOptions(&provider));
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  provider->WaitForBackgroundCompiles();
  BOOST_TEST(provider->stats().specializations == 2);  // both buckets of n; the unknown is ignored
}

}  // namespace
}  // namespace kiln::jit
