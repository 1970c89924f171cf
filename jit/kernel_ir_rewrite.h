// Rewrites of kernel IR used by fusion: buffer substitution, store rewriting, load queries.
// Shared sub-expressions stay shared (rewrites are memoized per node).
#ifndef KILN_JIT_KERNEL_IR_REWRITE_H_
#define KILN_JIT_KERNEL_IR_REWRITE_H_

#include <functional>
#include <vector>

#include "jit/kernel_ir.h"

namespace kiln::jit {

/// `stmt` with every Load, DimOf and Store of `from` referring to `to` instead (same dtype and
/// rank required; the caller checks).
Stmt ReplaceBuffer(const Stmt& stmt, const Buffer& from, const Buffer& to);
Expr ReplaceBuffer(const Expr& expr, const Buffer& from, const Buffer& to);

/// `stmt` with every `Store(target, indices, value)` replaced by `rewrite(indices, value)`.
Stmt RewriteStores(const Stmt& stmt, const Buffer& target,
                   const std::function<Stmt(const std::vector<Expr>&, const Expr&)>& rewrite);

/// True when `stmt` (or expression `expr`) loads from `buffer` anywhere.
bool LoadsFrom(const Stmt& stmt, const Buffer& buffer);
bool LoadsFrom(const Expr& expr, const Buffer& buffer);

/// `expr` with every Load of `buffer` replaced by `replace(indices)`; nullopt-like failure is
/// signalled by `replace` returning a null Expr, which makes the whole result null.
Expr ReplaceLoads(const Expr& expr, const Buffer& buffer,
                  const std::function<Expr(const std::vector<Expr>&)>& replace);

}  // namespace kiln::jit

#endif  // KILN_JIT_KERNEL_IR_REWRITE_H_
