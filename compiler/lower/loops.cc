// Loop nests, hoisted lets and broadcast nests shared by the lowerings (see loops.h).
#include "compiler/lower/loops.h"

#include <string>

namespace kiln::compiler {
namespace {

using jit::Expr;
using jit::ForKind;
using jit::Stmt;
using jit::Var;

std::vector<Var> IndexVars(size_t rank, std::vector<Expr>* index, const std::string& prefix = "i") {
  std::vector<Var> vars;
  for (size_t d = 0; d < rank; ++d) {
    vars.emplace_back(prefix + std::to_string(d));
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

Stmt SerialNest(const std::vector<Expr>& extents, const IndexBody& body, ForKind inner,
                int parallel_dim, const std::string& var_prefix) {
  int rank = static_cast<int>(extents.size());
  std::vector<Expr> index;
  std::vector<Var> vars = IndexVars(extents.size(), &index, var_prefix);
  Stmt s = body(index);
  for (int d = rank - 1; d >= 0; --d) {
    if (d != parallel_dim)
      s = jit::For(vars[d], extents[d], d == rank - 1 ? inner : ForKind::kSerial, s);
  }
  if (parallel_dim >= 0)
    s = jit::For(vars[parallel_dim], extents[parallel_dim], ForKind::kParallel, s);
  return s;
}

// ---- Lets -------------------------------------------------------------------------------------

Expr Lets::Bind(Expr value) {
  Var v(prefix_ + std::to_string(lets_.size()), value.dtype());
  lets_.emplace_back(v, std::move(value));
  return v;
}

Expr Lets::Hoist(Expr value) {
  if (value->op == jit::ExprOp::kIntImm || value->op == jit::ExprOp::kFloatImm) return value;
  return Bind(std::move(value));
}

Stmt Lets::Wrap(Stmt body) const {
  for (auto it = lets_.rbegin(); it != lets_.rend(); ++it)
    body = jit::Let(it->first, it->second, body);
  return body;
}

// ---- Broadcasting -----------------------------------------------------------------------------

std::vector<jit::BroadcastDim> BroadcastHints(const SymbolicShape& in, const SymbolicShape& out) {
  std::vector<jit::BroadcastDim> hints;
  size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == DimExpr(1)) {
      hints.push_back(jit::BroadcastDim::kOne);
    } else if (in[d] == out[offset + d]) {
      hints.push_back(jit::BroadcastDim::kSame);
    } else {
      hints.push_back(jit::BroadcastDim::kUnknown);
    }
  }
  return hints;
}

Stmt BroadcastNest(const std::vector<Expr>& dims, const std::vector<jit::Buffer>& inputs,
                   std::vector<std::vector<jit::BroadcastDim>> hints, const BroadcastBody& body) {
  using jit::BroadcastDim;
  std::vector<size_t> versioned;
  for (size_t k = 0; k < hints.size() && versioned.size() < 2; ++k) {
    if (!hints[k].empty() && hints[k].back() == BroadcastDim::kUnknown) versioned.push_back(k);
  }
  std::function<Stmt(size_t)> version = [&](size_t level) -> Stmt {
    if (level == versioned.size()) {
      return ParallelNest(dims, [&](const std::vector<Expr>& index) { return body(index, hints); });
    }
    size_t k = versioned[level];
    hints[k].back() = BroadcastDim::kOne;
    Stmt repeated = version(level + 1);
    hints[k].back() = BroadcastDim::kSame;
    Stmt matching = version(level + 1);
    hints[k].back() = BroadcastDim::kUnknown;
    const jit::Buffer& in = inputs[k];
    return jit::If(jit::Eq(jit::DimOf(in, in->rank - 1), jit::IntImm(1)), repeated, matching);
  };
  return version(0);
}

}  // namespace kiln::compiler
