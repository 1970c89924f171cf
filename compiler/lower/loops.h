// Loop nests the lowerings share: row-major nests whose outer dims are flattened into one
// parallel loop, so a leading dim of 1 never serializes a kernel, with the flat index
// decomposed once per outer iteration (never per element).
#ifndef KILN_COMPILER_LOWER_LOOPS_H_
#define KILN_COMPILER_LOWER_LOOPS_H_

#include <functional>
#include <vector>

#include "jit/kernel_ir.h"

namespace kiln::compiler {

using IndexBody = std::function<jit::Stmt(const std::vector<jit::Expr>& index)>;

/// body(index) over `extents`: dims [0, rank - 1) flattened into one parallel loop, the
/// innermost loop of kind `inner` (vectorized for an elementwise body). Rank 0 runs body({})
/// once; rank 1 is one parallel loop.
jit::Stmt ParallelNest(const std::vector<jit::Expr>& extents, const IndexBody& body,
                       jit::ForKind inner = jit::ForKind::kVectorized);

/// body(index) with every dim of `extents` flattened into one parallel loop (for a body that
/// loops itself, e.g. a reduction). Rank 0 runs body({}) once.
jit::Stmt ParallelFlat(const std::vector<jit::Expr>& extents, const IndexBody& body);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_LOWER_LOOPS_H_
