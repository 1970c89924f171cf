#include "tests/compiler/e2e_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "jit/engine.h"
#include "jit/kernel_provider.h"

namespace kiln::compiler::testing {

StatusOr<std::shared_ptr<const Executable>> LoadWithJit(
    const std::vector<uint8_t>& bytes, std::shared_ptr<ExternalProvider> externals) {
  LoadOptions options;
  options.externals = std::move(externals);
  return LoadWithJit(bytes, std::move(options));
}

StatusOr<std::shared_ptr<const Executable>> LoadWithJit(const std::vector<uint8_t>& bytes,
                                                        LoadOptions options) {
  // Leaked on purpose: destroying the JIT during static destruction races LLVM's own statics.
  static auto* provider = new std::shared_ptr<jit::JitKernelProvider>([] {
    StatusOr<std::unique_ptr<jit::Engine>> e = jit::Engine::Create();
    if (!e.ok()) {
      std::fprintf(stderr, "engine: %s\n", e.status().message().c_str());
      std::abort();
    }
    // No first tier: its replacement compiles on the provider's background thread, which a
    // leaked provider leaves running into exit, where LLVM's lazily made statics (codegen's
    // EVT tables) are destroyed under it (a segfault after the last test, seen 2 runs in 4).
    // The first tier's numerics are tested by dispatch_test and the conformance runner.
    jit::JitProviderOptions options;
    options.dispatch.tiering = false;
    return std::make_shared<jit::JitKernelProvider>(std::shared_ptr<jit::Engine>(std::move(*e)),
                                                    options);
  }());
  options.kernels = *provider;
  return Executable::LoadBytes(bytes.data(), bytes.size(), options);
}

Tensor ToTensor(const TensorData& t) {
  static Allocator* allocator = new Allocator();
  StatusOr<Shape> shape = Shape::Make(t.dims().data(), static_cast<int>(t.dims().size()));
  StatusOr<Tensor> out = Tensor::Allocate(*allocator, t.dtype(), *shape);
  if (!out.ok()) {
    std::fprintf(stderr, "ToTensor: %s\n", out.status().message().c_str());
    std::abort();
  }
  if (t.size_bytes()) std::memcpy(out->data(), t.data(), t.size_bytes());
  return *out;
}

TensorDataRef FromTensor(const Tensor& t) {
  std::vector<int64_t> dims(t.shape().data(), t.shape().data() + t.rank());
  StatusOr<TensorDataRef> d = TensorData::Copy(t.dtype(), dims, t.data(), t.NumBytes());
  if (!d.ok()) {
    std::fprintf(stderr, "FromTensor: %s\n", d.status().message().c_str());
    std::abort();
  }
  return *d;
}

StatusOr<std::vector<TensorDataRef>> RunExecutable(const std::shared_ptr<const Executable>& exe,
                                                   const std::vector<TensorDataRef>& inputs,
                                                   Context* ctx) {
  std::unique_ptr<Context> own;
  if (ctx == nullptr) {
    ASSIGN_OR_RETURN(own, Context::Create(exe));
    ctx = own.get();
  }
  std::vector<Tensor> in;
  for (const TensorDataRef& t : inputs) in.push_back(ToTensor(*t));
  ASSIGN_OR_RETURN(std::vector<Tensor> out, ctx->Invoke(exe->entry_function(), in));
  std::vector<TensorDataRef> result;
  for (const Tensor& t : out) result.push_back(FromTensor(t));
  return result;
}

}  // namespace kiln::compiler::testing
