// End-to-end helpers for compiler tests: compile a graph to .kiln bytes, load it with the JIT
// kernel provider and run it in a VM context; convert between TensorData and vm Tensors.
#ifndef KILN_TESTS_COMPILER_E2E_UTIL_H_
#define KILN_TESTS_COMPILER_E2E_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "vm/context.h"
#include "vm/executable.h"
#include "vm/providers.h"
#include "base/tensor.h"

namespace kiln::compiler::testing {

/// Loads .kiln bytes with a process-wide JIT kernel provider (and `externals` for regions).
StatusOr<std::shared_ptr<const Executable>> LoadWithJit(
    const std::vector<uint8_t>& bytes, std::shared_ptr<ExternalProvider> externals = nullptr);
/// As above with `options` (its `kernels` replaced by the JIT provider).
StatusOr<std::shared_ptr<const Executable>> LoadWithJit(const std::vector<uint8_t>& bytes,
                                                        LoadOptions options);
/// A vm Tensor owning a copy of `t`.
Tensor ToTensor(const TensorData& t);
/// TensorData owning a copy of `t`.
TensorDataRef FromTensor(const Tensor& t);
/// Runs the entry function of `exe` on `inputs` in `ctx` (a new context when null).
StatusOr<std::vector<TensorDataRef>> RunExecutable(const std::shared_ptr<const Executable>& exe,
                                                   const std::vector<TensorDataRef>& inputs,
                                                   Context* ctx = nullptr);

}  // namespace kiln::compiler::testing

#endif  // KILN_TESTS_COMPILER_E2E_UTIL_H_
