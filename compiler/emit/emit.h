// Emission: an inferred (and optionally simplified and folded) graph -> .kiln bytes through the
// ExecutableBuilder. One VM function "main" per graph: parameters are the graph inputs in order
// (those with a default are still parameters), results the graph outputs.
//
// Per node in topological order: a view (reshape_tensor) or one invoke_kernel of the node's
// lowered kernel. Static-shaped intermediates share one storage planned by liveness; dynamic
// ones get alloc_storage/alloc_tensor_reg sized by shape functions and kill_register after
// their last use. Dynamic dims are computed by batched shape functions (kernel IR over the
// symbols): one at entry binding every symbol from the inputs' dims and checking that inputs
// agree (a contradiction stops with a `fatal` naming the dims), and one after each
// data-dependent node, whose own shape function defines the dims it introduces.
#ifndef KILN_COMPILER_EMIT_EMIT_H_
#define KILN_COMPILER_EMIT_EMIT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/lower.h"
#include "base/status.h"
#include "vm/builder.h"

namespace kiln::compiler {

/// A region an external compiler claimed (compiler/passes/partition.h and the vendor's codegen):
/// emitted as one invoke_external in place of its nodes.
struct ExternalRegionToEmit {
  std::string vendor;
  std::string name;
  std::vector<NodeId> nodes;
  std::vector<ValueId> inputs;   // the VM passes these, in order
  std::vector<ValueId> outputs;  // pre-allocated by the VM with their inferred shapes
  std::vector<uint8_t> blob;
  /// Constant i of the blob: a graph value with data (stored once in the constant section,
  /// shared with any kernel reading it) or new bytes the codegen made.
  struct Constant {
    ValueId value = kNoValue;
    TensorDataRef data;
  };
  std::vector<Constant> constants;
};

struct EmitOptions {
  const LoweringTable* table = nullptr;  // required (LoweringTable::Global() for every op)
  std::string producer = "kiln compile";
  std::string doc;
  /// Fuse elementwise chains into one kernel and into the epilogues of the kernels producing
  /// their inputs (compiler/lower/fusion.h).
  bool fuse = true;
  /// Convex, disjoint regions (PartitionGraph guarantees both).
  std::vector<ExternalRegionToEmit> regions;
  /// Called once every table is complete, just before the bytes are produced: may add to the
  /// builder what is derived from its tables (code compiled ahead of time). Its error is
  /// EmitExecutable's.
  std::function<Status(ExecutableBuilder&)> before_finish;
  /// Give every region a fallback function: its nodes lowered to JIT kernels as without the
  /// external compiler, run when the vendor declines the region at load or is absent.
  bool fallbacks = true;
};

struct EmitStats {
  int kernels = 0;  // distinct kernels (identical kernels stored once)
  int fused_kernels = 0;  // kernels made of several nodes
  int fused_nodes = 0;    // nodes that disappeared into them
  int shape_functions = 0;
  int external_regions = 0;
  int constants = 0;
  int64_t constant_bytes = 0;
  int64_t planned_bytes = 0;  // the static arena
  int instructions = 0;
  int fallback_functions = 0;  // regions with a fallback function
  /// Kernels and shape functions the entry function (and its If / Loop functions) use: the
  /// first ones of their tables. Fallback functions, emitted after, add theirs at the end.
  int main_kernels = 0;
  int main_shape_functions = 0;
  /// Regions left without one, each "region 'onednn_0' (onednn): why" (e.g. an op the JIT
  /// lacks): such a region needs its vendor at load.
  std::vector<std::string> fallback_failures;
};

/// Emits `graph` (shape inference run). If branches and Loop bodies become VM functions named
/// after their node ("If_0/then", "Loop_3/body"), unique in the executable: a name already
/// taken (nodes are named per graph, so two branches may both hold an "If_0") gets the path of
/// the calling function in front. Errors from lowering name the node; Scan is Unsupported.
/// `stats` may be null.
StatusOr<std::vector<uint8_t>> EmitExecutable(const Graph& graph, const EmitOptions& options,
                                              EmitStats* stats = nullptr);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_EMIT_EMIT_H_
