// Kernel fusion over lowered nodes: chains of elementwise ops become one kernel, and such a
// chain becomes the epilogue of the kernel producing its input (matmul, conv, reduction, ...),
// so intermediate tensors are never written to memory.
#ifndef KILN_COMPILER_LOWER_FUSION_H_
#define KILN_COMPILER_LOWER_FUSION_H_

#include <optional>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/lower.h"
#include "jit/kernel_ir.h"
#include "base/status.h"

namespace kiln::compiler {

/// An elementwise node of a fusion group (LoweredNode::element_fn / element_slots).
struct ElementwiseMember {
  NodeId node = kNoNode;
  std::vector<int> slots;
  ElementFn fn;
};

/// A kernel made of several nodes: buffers are `inputs` (graph values, in order) then `output`.
struct FusedKernel {
  jit::Kernel kernel;
  std::vector<ValueId> inputs;
  ValueId output = kNoValue;
  std::vector<NodeId> nodes;  // the nodes it computes (an epilogue's anchor last)
};

/// One kernel for `members` (topological order). Preconditions (the caller's fusion rules):
/// every member's output 0 has the last member's output shape; every member output except the
/// last is read only by later members. Values computed in the group are rounded to their dtype
/// exactly as the unfused kernels would store them, so results are bit-identical.
/// Unsupported when the kernel would exceed what the JIT loads (jit/dispatch.h's limits).
StatusOr<FusedKernel> FuseElementwise(const Graph& graph,
                                      const std::vector<ElementwiseMember>& members);

/// `anchor` (a kernel whose buffers are `anchor_inputs` then ONE output holding `anchor_value`)
/// with `members` applied where it stores each element: the group reads `anchor_value` (which
/// must have the group output's shape) from the stored value instead of memory. nullopt when
/// the anchor kernel reads its own output (a value it stores is not final), the result does
/// not validate or exceeds what the JIT loads; the caller then emits the kernels unfused.
std::optional<FusedKernel> FuseEpilogue(const Graph& graph, const jit::Kernel& anchor,
                                        const std::vector<ValueId>& anchor_inputs,
                                        ValueId anchor_value,
                                        const std::vector<ElementwiseMember>& members);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_LOWER_FUSION_H_
