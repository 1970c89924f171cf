// The interfaces through which the VM runs code it does not interpret itself: kernels and shape
// functions (a KernelProvider; the JIT implements it) and external regions (an
// ExternalProvider; the vendor-runtime registry in external/ implements it).
#ifndef KILN_VM_PROVIDERS_H_
#define KILN_VM_PROVIDERS_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln {

/// A destination-passing operation bound at load time: reads args[0 .. num_inputs) and writes
/// args[num_inputs .. num_inputs + num_outputs), which the VM has already allocated with the
/// shapes the program computed. The VM has checked arity and each argument's dtype against the
/// table entry before calling; the implementation checks anything else it relies on (ranks,
/// dims) and returns an error rather than reading or writing out of bounds.
/// Run is called concurrently from many VM contexts and must be thread-safe.
class TensorFunction {
 public:
  virtual ~TensorFunction() = default;
  virtual Status Run(const Tensor* const* args, int num_inputs, int num_outputs) = 0;
};

/// Bucket values the compiler declared for a symbolic dim (`symbol`, a kernel dim name):
/// a provider may pre-specialize the kernel for them. Views into the executable.
struct DispatchHintSpec {
  std::string_view symbol;
  std::vector<int64_t> buckets;
};

/// A kernel table entry as the provider sees it (views into the executable; valid for the
/// executable's lifetime).
struct KernelSpec {
  int index = 0;
  std::string_view name;
  std::vector<DType> input_dtypes;
  std::vector<DType> output_dtypes;
  std::string_view payload_format;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
  std::vector<DispatchHintSpec> dispatch_hints;
};

/// What a shape function writes into an output slot when its inputs have no valid result: a
/// negative value. kShapeTooLarge says a tensor's byte size would pass the format's limit (the
/// inputs are too large); any other negative value (usually -1) that the input shapes do not
/// fit together. The VM fails the call with a message saying which.
inline constexpr int64_t kShapeTooLarge = -2;

/// A shape function entry. Outputs are i64 1-D tensors.
struct ShapeFunctionSpec {
  int index = 0;
  std::string_view name;
  int num_inputs = 0;
  int num_outputs = 0;
  std::vector<bool> data_dependent;  // per input
  std::string_view payload_format;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
};

/// An external region entry; `constants` are views of the executable's constant bytes (no copy;
/// valid for the executable's lifetime).
struct ExternalRegionSpec {
  int index = 0;
  std::string_view name;
  std::string_view vendor;
  const uint8_t* blob = nullptr;
  size_t blob_size = 0;
  std::vector<Tensor> constants;
  int num_inputs = 0;
  int num_outputs = 0;
};

/// Binds kernel and shape-function entries to runnable code. Called once per entry when an
/// executable is loaded (a provider may compile lazily on first Run). Thread-safe.
class KernelProvider {
 public:
  virtual ~KernelProvider() = default;
  virtual StatusOr<std::unique_ptr<TensorFunction>> PrepareKernel(const KernelSpec& spec) = 0;
  virtual StatusOr<std::unique_ptr<TensorFunction>> PrepareShapeFunction(
      const ShapeFunctionSpec& spec) = 0;
};

/// Creates the runtime of an external region (vendor Init with blob and constants), once per
/// region at load. NotFound naming the vendor if no runtime is registered for it. Thread-safe.
class ExternalProvider {
 public:
  virtual ~ExternalProvider() = default;
  virtual StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(
      const ExternalRegionSpec& spec) = 0;
};

}  // namespace kiln

#endif  // KILN_VM_PROVIDERS_H_
