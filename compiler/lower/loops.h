// Kernel IR building blocks the lowerings share: loop nests (parallel ones flatten their outer
// dims into one parallel loop, so a leading dim of 1 never serializes a kernel, with the flat
// index decomposed once per outer iteration, never per element), hoisted lets, and the
// broadcast hints and per-case nests of elementwise kernels (unfused and fused alike).
#ifndef KILN_COMPILER_LOWER_LOOPS_H_
#define KILN_COMPILER_LOWER_LOOPS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "jit/compute.h"
#include "jit/kernel_ir.h"

namespace kiln::compiler {

using IndexBody = std::function<jit::Stmt(const std::vector<jit::Expr>& index)>;

// ---- Loop nests -------------------------------------------------------------------------------

/// body(index) over `extents`: dims [0, rank - 1) flattened into one parallel loop, the
/// innermost loop of kind `inner` (vectorized for an elementwise body). Rank 0 runs body({})
/// once; rank 1 is one parallel loop.
jit::Stmt ParallelNest(const std::vector<jit::Expr>& extents, const IndexBody& body,
                       jit::ForKind inner = jit::ForKind::kVectorized);

/// body(index) with every dim of `extents` flattened into one parallel loop (for a body that
/// loops itself, e.g. a reduction). Rank 0 runs body({}) once.
jit::Stmt ParallelFlat(const std::vector<jit::Expr>& extents, const IndexBody& body);

/// body(index) over `extents` in row-major order, one loop per dim, for loops inside a parallel
/// one and for order-dependent updates (scatters, running counters): every loop is serial but
/// the innermost, of kind `inner`. Dim `parallel_dim` (-1 for none) instead becomes the
/// outermost loop and runs in parallel. Index variables are named `var_prefix` + dim. Rank 0
/// runs body({}) once.
jit::Stmt SerialNest(const std::vector<jit::Expr>& extents, const IndexBody& body,
                     jit::ForKind inner = jit::ForKind::kVectorized, int parallel_dim = -1,
                     const std::string& var_prefix = "i");

// ---- Hoisted lets -----------------------------------------------------------------------------

/// Values computed once and bound by Lets around a body: per element in an elementwise kernel
/// (element functions bind every value they reuse), or per kernel call around a loop nest
/// (parameters loaded from small inputs, clamped bounds). The kernel IR has no common-
/// subexpression elimination, so an Expr used twice, or left inside a nest, is computed again
/// each time. Not thread-safe; cheap to create.
class Lets {
 public:
  /// Bound variables are named `prefix` + their index.
  explicit Lets(std::string prefix = "e") : prefix_(std::move(prefix)) {}
  /// A new variable bound to `value`, to use in its place.
  jit::Expr Bind(jit::Expr value);
  /// Like Bind, but a constant is returned as it is (a Let of a constant buys nothing).
  jit::Expr Hoist(jit::Expr value);
  /// `body` inside the Lets of every value bound so far, in binding order.
  jit::Stmt Wrap(jit::Stmt body) const;

 private:
  std::string prefix_;
  std::vector<std::pair<jit::Var, jit::Expr>> lets_;
};

// ---- Broadcasting -----------------------------------------------------------------------------

/// What shape inference proved about each dim of `in` against `out` (numpy alignment, `in`'s
/// rank <= `out`'s): a constant 1 repeats (kOne), an equal dim matches (kSame), else kUnknown.
std::vector<jit::BroadcastDim> BroadcastHints(const SymbolicShape& in, const SymbolicShape& out);

/// An elementwise body over `dims` in a ParallelNest, given `hints[k]` for input `inputs[k]`.
/// The first two inputs whose innermost dim is kUnknown get one nest per case (size 1 or not,
/// tested at run time on the input's innermost dim) so each nest's inner loop vectorizes;
/// `body` then sees the hints of its case.
using BroadcastBody = std::function<jit::Stmt(
    const std::vector<jit::Expr>& index, const std::vector<std::vector<jit::BroadcastDim>>& hints)>;
jit::Stmt BroadcastNest(const std::vector<jit::Expr>& dims, const std::vector<jit::Buffer>& inputs,
                        std::vector<std::vector<jit::BroadcastDim>> hints,
                        const BroadcastBody& body);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_LOWER_LOOPS_H_
