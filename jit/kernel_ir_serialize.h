// Binary serialization of kernel IR ("kiln-kir-1"): the payload of JIT kernels in a .kiln file.
#ifndef KILN_JIT_KERNEL_IR_SERIALIZE_H_
#define KILN_JIT_KERNEL_IR_SERIALIZE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "jit/kernel_ir.h"

namespace kiln::jit {

/// The KernelDef::payload_format of serialized kernel IR.
inline constexpr const char* kPayloadFormat = "kiln-kir-1";
/// Format version written; a reader loads the same major and any minor up to its own.
inline constexpr uint16_t kKirMajorVersion = 1;
// 1.1 added preconditions, 1.2 check_index, 1.3 check_index with a position (CheckInRange),
// 1.4 team loops (ForKind::kTeam) with team_size and team_barrier.
inline constexpr uint16_t kKirMinorVersion = 4;

/// How a kernel's symbolic dim gets its value at run time: the size of dim `axis` of the
/// kernel parameter `buffer` (an index into Kernel::buffers).
struct DimBinding {
  int buffer = 0;
  int axis = 0;
};

/// A kernel plus one binding per entry of Kernel::dims, and the shape facts its indexing relies
/// on (jit/precondition.h; checked by the kernel provider before every call).
struct KernelPayload {
  Kernel kernel;
  std::vector<DimBinding> dim_bindings;
  std::vector<Expr> preconditions;
};

/// Encodes `kernel` and `dim_bindings` (one per kernel dim; may be empty only when the kernel
/// has no dims). Layout: magic "KKIR", u16 major, u16 minor, then LEB128 tables of buffers,
/// vars, expression nodes and statement nodes (children always refer to earlier entries, so
/// shared sub-expressions are stored once), params, dims, body, bindings, and (since 1.1)
/// preconditions as expression ids. The kernel should
/// pass ValidateKernel; nothing is checked here. Thread-safe.
std::vector<uint8_t> SerializeKernel(const Kernel& kernel,
                                     const std::vector<DimBinding>& dim_bindings = {},
                                     const std::vector<Expr>& preconditions = {});

/// Decodes untrusted bytes. Every read is bounds-checked, nesting is limited to kMaxDepth and the
/// expanded tree size to kMaxKirTreeNodes, bindings are range-checked and the result passes
/// ValidateKernel. Errors: kInvalidFormat saying what is wrong and where (never a crash);
/// kUnsupported for another major version or a newer minor. Thread-safe.
StatusOr<KernelPayload> DeserializeKernelPayload(const uint8_t* data, size_t size);
/// DeserializeKernelPayload without the bindings.
StatusOr<Kernel> DeserializeKernel(const uint8_t* data, size_t size);

/// Largest tree (shared nodes counted once per use) a payload may expand to: IR walks are
/// recursive over the tree, so a small DAG must not stand for an exponential one.
inline constexpr int64_t kMaxKirTreeNodes = int64_t{1} << 22;

}  // namespace kiln::jit

#endif  // KILN_JIT_KERNEL_IR_SERIALIZE_H_
