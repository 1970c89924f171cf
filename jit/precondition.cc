// Kernel preconditions: validation, flattening for cheap checks, and messages when one fails.
#include "jit/precondition.h"

#include <algorithm>
#include <functional>
#include <map>

namespace kiln::jit {
namespace {

bool Allowed(ExprOp op) {
  switch (op) {
    case ExprOp::kIntImm: case ExprOp::kDim: case ExprOp::kAdd: case ExprOp::kSub:
    case ExprOp::kMul: case ExprOp::kFloorDiv: case ExprOp::kFloorMod: case ExprOp::kMin:
    case ExprOp::kMax: case ExprOp::kEq: case ExprOp::kNe: case ExprOp::kLt: case ExprOp::kLe:
    case ExprOp::kGt: case ExprOp::kGe: case ExprOp::kAnd: case ExprOp::kOr: case ExprOp::kNot:
    case ExprOp::kSelect:
      return true;
    default:
      return false;
  }
}

// The d and c of `min(c, d) == 1 || min(c, d) == d`, else a null Expr.
Expr ClampedTableDim(const Expr& e, int64_t* rows) {
  auto is = [](const Expr& x, ExprOp op) { return x && x->op == op && x->args.size() >= 2; };
  if (!is(e, ExprOp::kOr) || !is(e->args[0], ExprOp::kEq) || !is(e->args[1], ExprOp::kEq)) {
    return Expr();
  }
  const Expr& one = e->args[0]->args[1];
  const Expr& m = e->args[0]->args[0];
  if (one->op != ExprOp::kIntImm || one->int_value != 1 || !is(m, ExprOp::kMin) ||
      e->args[1]->args[0].get() != m.get()) {
    return Expr();
  }
  const Expr& d = e->args[1]->args[1];
  for (int k = 0; k < 2; ++k) {
    const Expr& c = m->args[k];
    if (c->op == ExprOp::kIntImm && m->args[1 - k].get() == d.get()) {
      *rows = c->int_value;
      return d;
    }
  }
  return Expr();
}

}  // namespace

Status ValidatePreconditions(const Kernel& kernel, const std::vector<Expr>& pre) {
  std::map<const BufferNode*, int> params;
  for (size_t i = 0; i < kernel.buffers.size(); ++i) params[kernel.buffers[i].get()] = static_cast<int>(i);
  for (size_t i = 0; i < pre.size(); ++i) {
    std::string where = "kernel '" + kernel.name + "' precondition " + std::to_string(i);
    if (!pre[i] || pre[i].dtype() != DType::kBool) return InvalidFormat(where + " is not bool");
    std::vector<const ExprNode*> work = {pre[i].get()};
    int visited = 0;
    while (!work.empty()) {
      const ExprNode* n = work.back();
      work.pop_back();
      if (++visited > 100000) return InvalidFormat(where + " is too large");
      if (!Allowed(n->op)) {
        return InvalidFormat(where + " uses '" + ExprOpName(n->op) + "', which is not allowed");
      }
      if (n->op == ExprOp::kDim) {
        auto it = params.find(n->buffer.get());
        if (it == params.end()) return InvalidFormat(where + " reads a dim of a non-parameter");
        if (n->int_value < 0 || n->int_value >= n->buffer->rank) {
          return InvalidFormat(where + " reads dim " + std::to_string(n->int_value) + " of a rank " +
                               std::to_string(n->buffer->rank) + " buffer");
        }
      }
      for (const Expr& a : n->args) work.push_back(a.get());
    }
  }
  return Status::Ok();
}

StatusOr<PreconditionProgram> PreconditionProgram::Compile(const Kernel& kernel,
                                                           const std::vector<Expr>& pre) {
  RETURN_IF_ERROR(ValidatePreconditions(kernel, pre));
  PreconditionProgram p;
  std::map<const BufferNode*, int> params;
  for (size_t i = 0; i < kernel.buffers.size(); ++i) params[kernel.buffers[i].get()] = static_cast<int>(i);
  std::map<const ExprNode*, int> ids;
  std::function<int(const ExprNode*)> flatten = [&](const ExprNode* n) -> int {
    auto it = ids.find(n);
    if (it != ids.end()) return it->second;
    Node node;
    node.op = n->op;
    node.value = n->int_value;
    if (n->op == ExprOp::kDim) node.buffer = params.at(n->buffer.get());
    for (size_t a = 0; a < n->args.size() && a < 3; ++a) node.args[a] = flatten(n->args[a].get());
    int id = static_cast<int>(p.nodes_.size());
    p.nodes_.push_back(node);
    ids[n] = id;
    return id;
  };
  for (const Expr& e : pre) {
    p.roots_.push_back(flatten(e.get()));
    p.text_.push_back(ToText(e));
    ClampedTable table;
    if (Expr d = ClampedTableDim(e, &table.rows)) {
      table.dim = ids.at(d.get());
      table.dim_text = ToText(d);
    }
    p.tables_.push_back(std::move(table));
    Equality eq;
    if (e->op == ExprOp::kEq && e->args.size() == 2) {
      eq.lhs = ids.at(e->args[0].get());
      eq.rhs = ids.at(e->args[1].get());
      eq.lhs_text = ToText(e->args[0]);
      eq.rhs_text = ToText(e->args[1]);
    }
    p.equalities_.push_back(std::move(eq));
  }
  return p;
}

std::string PreconditionProgram::Explain(int i, const int64_t* const* shapes) const {
  const ClampedTable& t = tables_[i];
  if (t.dim < 0) {
    const Equality& eq = equalities_[i];
    if (eq.lhs < 0) return "";
    std::string lhs = eq.lhs_text + " is " + std::to_string(Eval(eq.lhs, shapes));
    if (nodes_[eq.rhs].op == ExprOp::kIntImm) return lhs + ", not " + eq.rhs_text;
    return lhs + ", " + eq.rhs_text + " is " + std::to_string(Eval(eq.rhs, shapes));
  }
  int64_t d = Eval(t.dim, shapes);
  if (d <= t.rows) return "";
  return "dim " + t.dim_text + " is " + std::to_string(d) + ", more than the " +
         std::to_string(t.rows) + " rows of a table sliced to it (min(" + std::to_string(t.rows) +
         ", " + t.dim_text + ")): this model takes at most " + std::to_string(t.rows) +
         " there (e.g. a sequence longer than its position table)";
}

int64_t PreconditionProgram::Eval(int i, const int64_t* const* shapes) const {
  const Node& n = nodes_[i];
  auto a = [&] { return Eval(n.args[0], shapes); };
  auto b = [&] { return Eval(n.args[1], shapes); };
  switch (n.op) {
    case ExprOp::kIntImm: return n.value;
    case ExprOp::kDim: return shapes[n.buffer][n.value];
    case ExprOp::kAdd: return static_cast<int64_t>(static_cast<uint64_t>(a()) + static_cast<uint64_t>(b()));
    case ExprOp::kSub: return static_cast<int64_t>(static_cast<uint64_t>(a()) - static_cast<uint64_t>(b()));
    case ExprOp::kMul: return static_cast<int64_t>(static_cast<uint64_t>(a()) * static_cast<uint64_t>(b()));
    case ExprOp::kFloorDiv: {
      int64_t x = a(), y = b();
      if (y == 0) return 0;
      if (y == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(x));
      int64_t q = x / y;
      return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
    }
    case ExprOp::kFloorMod: {
      int64_t x = a(), y = b();
      if (y == 0 || y == -1) return 0;
      int64_t r = x % y;
      return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
    }
    case ExprOp::kMin: return std::min(a(), b());
    case ExprOp::kMax: return std::max(a(), b());
    case ExprOp::kEq: return a() == b();
    case ExprOp::kNe: return a() != b();
    case ExprOp::kLt: return a() < b();
    case ExprOp::kLe: return a() <= b();
    case ExprOp::kGt: return a() > b();
    case ExprOp::kGe: return a() >= b();
    case ExprOp::kAnd: return a() && b();
    case ExprOp::kOr: return a() || b();
    case ExprOp::kNot: return !a();
    case ExprOp::kSelect: return a() ? b() : Eval(n.args[2], shapes);
    default: return 0;
  }
}

int PreconditionProgram::Check(const int64_t* const* shapes) const {
  for (size_t i = 0; i < roots_.size(); ++i) {
    if (!Eval(roots_[i], shapes)) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace kiln::jit
