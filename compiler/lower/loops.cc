#include "compiler/lower/loops.h"

#include <string>

namespace kiln::compiler {
namespace {

using jit::Expr;
using jit::ForKind;
using jit::Stmt;
using jit::Var;

std::vector<Var> IndexVars(size_t rank, std::vector<Expr>* index) {
  std::vector<Var> vars;
  for (size_t d = 0; d < rank; ++d) {
    vars.emplace_back("i" + std::to_string(d));
    index->push_back(vars.back());
  }
  return vars;
}

// `inner` inside one parallel loop over dims [0, flat) of `extents`, binding vars[0..flat).
Stmt FlattenOuter(const std::vector<Var>& vars, const std::vector<Expr>& extents, int flat,
                  Stmt inner) {
  if (flat == 1) return jit::For(vars[0], extents[0], ForKind::kParallel, std::move(inner));
  Var outer("outer");
  Expr count = extents[0];
  for (int d = 1; d < flat; ++d) count = count * extents[d];
  Expr rest = outer;
  for (int d = flat - 1; d >= 1; --d) {
    inner = jit::Let(vars[d], jit::FloorMod(rest, extents[d]), inner);
    rest = jit::FloorDiv(rest, extents[d]);
  }
  inner = jit::Let(vars[0], rest, inner);
  return jit::For(outer, count, ForKind::kParallel, inner);
}

}  // namespace

Stmt ParallelNest(const std::vector<Expr>& extents, const IndexBody& body, ForKind inner) {
  int rank = static_cast<int>(extents.size());
  std::vector<Expr> index;
  std::vector<Var> vars = IndexVars(extents.size(), &index);
  if (rank == 0) return body({});
  if (rank == 1) return jit::For(vars[0], extents[0], ForKind::kParallel, body(index));
  Stmt s = jit::For(vars[rank - 1], extents[rank - 1], inner, body(index));
  return FlattenOuter(vars, extents, rank - 1, s);
}

Stmt ParallelFlat(const std::vector<Expr>& extents, const IndexBody& body) {
  int rank = static_cast<int>(extents.size());
  std::vector<Expr> index;
  std::vector<Var> vars = IndexVars(extents.size(), &index);
  if (rank == 0) return body({});
  return FlattenOuter(vars, extents, rank, body(index));
}

}  // namespace kiln::compiler
