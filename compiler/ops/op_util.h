// Helpers the op families share: broadcasting, dim merging, dtype checks, def builders.
// Internal to compiler/ops.
#ifndef KILN_COMPILER_OPS_OP_UTIL_H_
#define KILN_COMPILER_OPS_OP_UTIL_H_

#include <string>
#include <vector>

#include "compiler/ops/registry.h"

namespace kiln::compiler::ops {

// One registration function per family file; OpRegistry::Global() calls them all.
void RegisterElementwiseOps(OpRegistry& registry);  // elementwise.cc
void RegisterNnOps(OpRegistry& registry);           // nn.cc
void RegisterShapeOps(OpRegistry& registry);        // shape_ops.cc
void RegisterIndexingOps(OpRegistry& registry);     // indexing.cc
void RegisterReduceOps(OpRegistry& registry);       // reduce.cc
void RegisterControlFlowOps(OpRegistry& registry);  // control_flow.cc
void RegisterQuantizeOps(OpRegistry& registry);     // quantize.cc
void RegisterSignalOps(OpRegistry& registry);       // signal.cc

/// A def with the common fields; callers adjust the rest.
OpDef MakeDef(std::string op_type, int since, int until, ShapeRule rule, int min_inputs = 1,
              int max_inputs = 1, int min_outputs = 1, int max_outputs = 1);
/// Registers and asserts success (a failure is a bug in the family's table).
void MustRegister(OpRegistry& registry, OpDef def);

/// Numpy (multidirectional) broadcast of two shapes. Per dim: equal -> that dim; a constant 1
/// -> the other; two different constants -> Error "cannot broadcast [..] with [..]"; a symbol
/// against a constant k != 1 -> k; s against min(s, c) with a constant c >= 1 -> s; two other
/// symbolic dims -> a fresh dim (computed from the input shapes at run time). What it cannot
/// compare it records with ctx.Assume (each input dim broadcasts to the result).
StatusOr<SymbolicShape> Broadcast(InferenceContext& ctx, const SymbolicShape& a,
                                  const SymbolicShape& b);
/// Broadcast of every present input in [first, num_inputs).
StatusOr<SymbolicShape> BroadcastInputs(InferenceContext& ctx, int first = 0);
/// Unidirectional broadcast: `from` must broadcast to `to` (Error naming `what` otherwise).
/// Symbolic pairs are recorded with ctx.Assume.
Status CheckUnidirectional(InferenceContext& ctx, const SymbolicShape& to,
                           const SymbolicShape& from, std::string_view what);
/// Two dims that must be equal: the constant one if only one is constant, Error if both are
/// different constants ("<what>: 3 vs 4"), else `a`; a pair it cannot compare is recorded with
/// ctx.Assume (kEqual).
StatusOr<DimExpr> MergeDim(InferenceContext& ctx, const DimExpr& a, const DimExpr& b,
                           std::string_view what);
/// Product of dims [begin, end).
DimExpr Product(const SymbolicShape& shape, int begin, int end);
/// Inputs i and j have the same dtype, else Error naming both.
Status CheckSameDType(const InferenceContext& ctx, int i, int j);
/// Input i has rank `rank`, else Error.
Status CheckRank(const InferenceContext& ctx, int i, int rank, std::string_view what);
/// Input i's rank is at least `rank`, else Error.
Status CheckMinRank(const InferenceContext& ctx, int i, int rank, std::string_view what);
/// Integer list from an attribute (opsets before the input form) or from constant input
/// `input`; nullopt when the input is present but not known at compile time, or when neither
/// the attribute nor the input is present.
StatusOr<std::optional<std::vector<int64_t>>> IntsFromAttrOrInput(const InferenceContext& ctx,
                                                                  std::string_view attr, int input);
/// Normalises every axis (Error on a repeat or an out-of-range one). Sorted ascending.
StatusOr<std::vector<int>> NormalizeAxes(const InferenceContext& ctx,
                                         const std::vector<int64_t>& axes, int rank);
/// A shape of `rank` fresh dims (for outputs whose dims depend on run-time values).
SymbolicShape FreshShape(InferenceContext& ctx, int rank);
/// Sets output 0 to input 0's dtype and shape.
Status SameAsInput0(InferenceContext& ctx);
/// "[1, 2, 3]"
std::string IntsToString(const std::vector<int64_t>& v);

}  // namespace kiln::compiler::ops

#endif  // KILN_COMPILER_OPS_OP_UTIL_H_
