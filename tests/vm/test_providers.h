// Small host implementations of the provider interfaces, for VM tests (the JIT and vendor
// runtimes replace them in real use).
#ifndef KILN_TESTS_VM_TEST_PROVIDERS_H_
#define KILN_TESTS_VM_TEST_PROVIDERS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "vm/providers.h"

namespace kiln::testing {

using KernelBody = std::function<Status(const Tensor* const* args, int num_inputs, int num_outputs)>;

/// Kernels by name. Built in: "add" (elementwise, i64 or f32, same shapes), "less" (i64
/// scalars -> bool scalar), "empty" (does nothing), "fail" (returns Internal). Shape functions:
/// "same_shape" (output = shape of input 0). Unknown names fail PrepareKernel with NotFound.
class TestKernelProvider : public KernelProvider {
 public:
  TestKernelProvider();
  void Add(const std::string& name, KernelBody body) { bodies_[name] = std::move(body); }
  StatusOr<std::unique_ptr<TensorFunction>> PrepareKernel(const KernelSpec& spec) override;
  StatusOr<std::unique_ptr<TensorFunction>> PrepareShapeFunction(const ShapeFunctionSpec& spec) override;
  std::atomic<int> prepared{0};

 private:
  std::map<std::string, KernelBody> bodies_;
};

/// External regions of vendor "test": the blob is a decimal float; the region writes
/// input0 * scale + sum(constant 0) to output 0 (f32). The blob "decline" declines the region
/// (Declined) when spec.may_decline, else is scale 2. Other vendors: NotFound, and HasVendor
/// says no.
class TestExternalProvider : public ExternalProvider {
 public:
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override;
  bool HasVendor(std::string_view vendor) const override { return vendor == "test"; }
  std::atomic<int> created{0};
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_VM_TEST_PROVIDERS_H_
