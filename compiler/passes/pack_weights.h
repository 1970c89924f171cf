// Weight prepacking for the JIT's GEMM: MatMul and Gemm nodes whose B is a constant matrix
// become kiln::PackedMatMul, with B stored once, at compile time, in the column panels the GEMM
// tiles read (TVM's dense_pack; ONNX Runtime prepacks its MLAS weights at session start). A call
// then streams each panel contiguously instead of gathering it from B's rows (one 4 KiB page per
// row of a 1024-wide f32 B), which makes small-M products 1.5-2x faster once weights come from
// memory rather than cache.
#ifndef KILN_COMPILER_PASSES_PACK_WEIGHTS_H_
#define KILN_COMPILER_PASSES_PACK_WEIGHTS_H_

#include <cstdint>
#include <set>

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler {

struct PackWeightsStats {
  int matmuls = 0;             // MatMul nodes rewritten
  int gemms = 0;               // Gemm nodes rewritten
  int64_t packed_bytes = 0;    // bytes of the packed constants created
};

/// Runs on an inferred main graph and, recursively, on the subgraphs of its nodes (Loop and
/// Scan bodies, If branches). Rewrites, in place (same node, same output value and shape):
///   MatMul(A, B)          A f32 of rank >= 2, B a 2-D f32 matrix known at compile time
///                         (an initializer, a folded value, or in a subgraph a capture of
///                         either: a loop body's recurrent weights) [K, N], N >= 2
///   Gemm(A, B, C?)        transA = 0, B a 2-D f32 constant, alpha folded into the packing,
///                         C kept when beta = 1, dropped when beta = 0 (else not rewritten)
/// into PackedMatMul(A, Bp, C?) <n = N> with Bp = [ceil(N / cols), K, cols] (columns past N are
/// zero). A constant shared by several nodes is packed once per (transB, alpha); a subgraph gets
/// its own constant value holding the same packed data, so a body's product streams panels
/// packed once at compile time instead of packing B on every iteration (the capture it no
/// longer reads is dropped from the body's parameters by the emitter). Nodes in `skip` (main
/// graph ids claimed by an external region) are left alone, their subgraphs too. Adds the
/// "kiln" opset import to each graph it rewrites anything in. `cols` must be the GEMM's panel width
/// (lower/nn_internal.h GemmPanelCols).
Status PackMatMulWeights(Graph& graph, int64_t cols, const std::set<NodeId>& skip,
                         PackWeightsStats* stats = nullptr);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_PACK_WEIGHTS_H_
