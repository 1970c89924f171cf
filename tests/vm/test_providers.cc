// Test providers: host kernels for VM tests.
#include "tests/vm/test_providers.h"

#include <string>

namespace kiln::testing {
namespace {

class BodyFunction : public TensorFunction {
 public:
  explicit BodyFunction(KernelBody body) : body_(std::move(body)) {}
  Status Run(const Tensor* const* args, int num_inputs, int num_outputs) override {
    return body_(args, num_inputs, num_outputs);
  }

 private:
  KernelBody body_;
};

template <typename T>
void AddAs(const Tensor& a, const Tensor& b, const Tensor& out) {
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    out.data_as<T>()[i] = a.data_as<T>()[i] + b.data_as<T>()[i];
  }
}

// The bodies check what they rely on beyond the table entry's arity and dtypes (which the VM
// checks against the entry), since a test executable's entry may declare anything.
Status CheckArity(const char* name, int num_inputs, int num_outputs, int want_in, int want_out) {
  if (num_inputs == want_in && num_outputs == want_out) return Status::Ok();
  return InvalidArgument(std::string(name) + ": takes " + std::to_string(want_in) + " inputs and " +
                         std::to_string(want_out) + " outputs");
}

Status AddKernel(const Tensor* const* args, int num_inputs, int num_outputs) {
  RETURN_IF_ERROR(CheckArity("add", num_inputs, num_outputs, 2, 1));
  const Tensor &a = *args[0], &b = *args[1], &out = *args[2];
  if (a.dtype() != b.dtype() || a.dtype() != out.dtype()) return InvalidArgument("add: dtypes differ");
  if (a.shape() != b.shape() || a.shape() != out.shape()) {
    return InvalidArgument("add: shapes " + a.shape().ToString() + ", " + b.shape().ToString() +
                           " -> " + out.shape().ToString());
  }
  if (a.dtype() == DType::kI64) {
    AddAs<int64_t>(a, b, out);
  } else if (a.dtype() == DType::kF32) {
    AddAs<float>(a, b, out);
  } else {
    return Unsupported("add: dtype");
  }
  return Status::Ok();
}

Status Less(const Tensor* const* args, int num_inputs, int num_outputs) {
  RETURN_IF_ERROR(CheckArity("less", num_inputs, num_outputs, 2, 1));
  for (int i = 0; i < 3; ++i) {
    if (args[i]->dtype() != (i < 2 ? DType::kI64 : DType::kBool) || args[i]->NumElements() != 1) {
      return InvalidArgument("less: takes i64 scalars and writes a bool scalar");
    }
  }
  *args[2]->data_as<bool>() = *args[0]->data_as<int64_t>() < *args[1]->data_as<int64_t>();
  return Status::Ok();
}

Status SameShape(const Tensor* const* args, int num_inputs, int num_outputs) {
  RETURN_IF_ERROR(CheckArity("same_shape", num_inputs, num_outputs, 1, 1));
  const Tensor& in = *args[0];
  const Tensor& out = *args[1];
  if (out.dim(0) != in.rank()) return InvalidArgument("same_shape: output has the wrong rank");
  for (int i = 0; i < in.rank(); ++i) out.data_as<int64_t>()[i] = in.dim(i);
  return Status::Ok();
}

}  // namespace

TestKernelProvider::TestKernelProvider() {
  Add("add", AddKernel);
  Add("less", Less);
  Add("empty", [](const Tensor* const*, int, int) { return Status::Ok(); });
  Add("fail", [](const Tensor* const*, int, int) { return Internal("kernel failed on purpose"); });
  Add("same_shape", SameShape);
}

StatusOr<std::unique_ptr<TensorFunction>> TestKernelProvider::PrepareKernel(const KernelSpec& spec) {
  auto it = bodies_.find(std::string(spec.name));
  if (it == bodies_.end()) return NotFound("no test kernel named '" + std::string(spec.name) + "'");
  ++prepared;
  return std::unique_ptr<TensorFunction>(new BodyFunction(it->second));
}

StatusOr<std::unique_ptr<TensorFunction>> TestKernelProvider::PrepareShapeFunction(
    const ShapeFunctionSpec& spec) {
  auto it = bodies_.find(std::string(spec.name));
  if (it == bodies_.end()) return NotFound("no test shape function named '" + std::string(spec.name) + "'");
  ++prepared;
  return std::unique_ptr<TensorFunction>(new BodyFunction(it->second));
}

StatusOr<std::unique_ptr<TensorFunction>> TestExternalProvider::CreateRegion(
    const ExternalRegionSpec& spec) {
  if (spec.vendor != "test") {
    return NotFound("no runtime registered for vendor '" + std::string(spec.vendor) + "'");
  }
  std::string text(reinterpret_cast<const char*>(spec.blob), spec.blob_size);
  if (text == "decline") {
    if (spec.may_decline) {
      return Declined("region '" + std::string(spec.name) + "': the test vendor declines it");
    }
    text = "2";
  }
  char* end = nullptr;
  float scale = std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    return InvalidArgument("blob '" + text + "' is not a number");
  }
  float bias = 0;
  for (const Tensor& c : spec.constants) {
    if (c.dtype() != DType::kF32) return InvalidArgument("constant is not f32");
    for (int64_t i = 0; i < c.NumElements(); ++i) bias += c.data_as<float>()[i];
  }
  ++created;
  return std::unique_ptr<TensorFunction>(new BodyFunction(
      [scale, bias](const Tensor* const* args, int num_inputs, int num_outputs) {
        RETURN_IF_ERROR(CheckArity("region", num_inputs, num_outputs, 1, 1));
        const Tensor &in = *args[0], &out = *args[1];
        if (in.dtype() != DType::kF32 || out.dtype() != DType::kF32) {
          return InvalidArgument("region: takes and writes f32");
        }
        if (in.NumElements() != out.NumElements()) return InvalidArgument("region: size mismatch");
        for (int64_t i = 0; i < in.NumElements(); ++i) {
          out.data_as<float>()[i] = in.data_as<float>()[i] * scale + bias;
        }
        return Status::Ok();
      }));
}

}  // namespace kiln::testing
