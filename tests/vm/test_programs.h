// Helpers that assemble small VM programs for tests and benchmarks.
#ifndef KILN_TESTS_VM_TEST_PROGRAMS_H_
#define KILN_TESTS_VM_TEST_PROGRAMS_H_

#include <memory>
#include <vector>

#include "tests/vm/test_providers.h"
#include "vm/builder.h"
#include "vm/context.h"

namespace kiln::testing {

inline ValueSpec Scalar(const std::string& name, DType t) { return ValueSpec{name, t, {}, false}; }

/// Emits `dst := new tensor<dtype>[shape]` in a fresh storage, using `scratch` and
/// `scratch + 1` for the size and the storage.
inline void EmitAlloc(FunctionBuilder& f, int dst, int scratch, DType dtype,
                      const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  f.LoadConsti(scratch, n * static_cast<int64_t>(DTypeSize(dtype)));
  f.AllocStorage(scratch + 1, scratch);
  f.AllocTensor(dst, scratch + 1, 0, dtype, shape);
}

/// Load options binding the test kernel and external providers.
inline LoadOptions TestLoadOptions() {
  LoadOptions options;
  options.kernels = std::make_shared<TestKernelProvider>();
  options.externals = std::make_shared<TestExternalProvider>();
  return options;
}

/// Loads builder output with the test providers; fails the test on error.
inline std::shared_ptr<const Executable> LoadOrDie(ExecutableBuilder& b) {
  auto bytes = b.Finish();
  if (!bytes.ok()) throw std::runtime_error(bytes.status().ToString());
  LoadOptions options;
  options.kernels = std::make_shared<TestKernelProvider>();
  options.externals = std::make_shared<TestExternalProvider>();
  auto exe = Executable::LoadBytes(bytes->data(), bytes->size(), options);
  if (!exe.ok()) throw std::runtime_error(exe.status().ToString());
  return *exe;
}

/// Adds the kernels "add" (i64) and "less" (i64 -> bool); returns their indices.
struct LoopKernels {
  int add, less;
};
inline LoopKernels AddLoopKernels(ExecutableBuilder& b) {
  LoopKernels k;
  k.add = b.AddKernel({"add", {DType::kI64, DType::kI64}, {DType::kI64}});
  k.less = b.AddKernel({"less", {DType::kI64, DType::kI64}, {DType::kBool}});
  return k;
}

/// main(n: i64[]) -> i64[]: returns 0 + 1 + ... + (n - 1), with a loop.
inline void BuildSumLoop(ExecutableBuilder& b, const LoopKernels& k, const std::string& name = "main") {
  FunctionBuilder& f = b.AddFunction(name);
  f.AddParam(Scalar("n", DType::kI64));
  f.AddResult(Scalar("sum", DType::kI64));
  Label loop = f.NewLabel(), body = f.NewLabel(), done = f.NewLabel();
  f.LoadConsti(1, 0);  // sum
  f.LoadConsti(2, 0);  // i
  f.LoadConsti(3, 1);  // one
  f.Bind(loop);
  EmitAlloc(f, 4, 10, DType::kBool, {});
  f.InvokeKernel(k.less, {2, 0}, {4});
  f.If(4, body, done);
  f.Bind(body);
  EmitAlloc(f, 5, 10, DType::kI64, {});
  f.InvokeKernel(k.add, {1, 2}, {5});
  f.Move(1, 5);
  EmitAlloc(f, 6, 10, DType::kI64, {});
  f.InvokeKernel(k.add, {2, 3}, {6});
  f.Move(2, 6);
  f.Goto(loop);
  f.Bind(done);
  f.Ret({1});
}

inline Tensor I64Scalar(int64_t v) {
  auto t = Tensor::Allocate(DefaultAllocator(), DType::kI64, Shape());
  *t->data_as<int64_t>() = v;
  return *t;
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_VM_TEST_PROGRAMS_H_
