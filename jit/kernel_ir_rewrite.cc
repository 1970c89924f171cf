#include "jit/kernel_ir_rewrite.h"

#include <map>
#include <memory>

namespace kiln::jit {
namespace {

// A memoized bottom-up expression rewriter: `leaf` may return a replacement for a node (or null
// to rewrite its children).
class ExprRewriter {
 public:
  using Leaf = std::function<Expr(const Expr&)>;
  explicit ExprRewriter(Leaf leaf) : leaf_(std::move(leaf)) {}

  Expr Rewrite(const Expr& e) {
    if (!e) return e;
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    Expr out = leaf_(e);
    if (!out) {
      if (failed_) return Expr();
      ExprNode copy = *e;
      bool changed = false;
      for (Expr& a : copy.args) {
        Expr r = Rewrite(a);
        if (failed_) return Expr();
        changed |= r.get() != a.get();
        a = r;
      }
      out = changed ? Expr(std::make_shared<const ExprNode>(std::move(copy))) : e;
    }
    memo_[e.get()] = out;
    return out;
  }
  void Fail() { failed_ = true; }
  bool failed() const { return failed_; }

 private:
  Leaf leaf_;
  std::map<const ExprNode*, Expr> memo_;
  bool failed_ = false;
};

Stmt RewriteStmt(const Stmt& s, ExprRewriter& exprs,
                 const std::function<Stmt(const StmtNode&, ExprRewriter&)>& store_hook) {
  if (!s) return s;
  if (s->op == StmtOp::kStore && store_hook) {
    Stmt r = store_hook(*s.get(), exprs);
    if (r) return r;
  }
  StmtNode copy = *s.get();
  for (Expr& e : copy.exprs) e = exprs.Rewrite(e);
  for (std::shared_ptr<const StmtNode>& b : copy.body) {
    b = RewriteStmt(Stmt(b), exprs, store_hook).node();
  }
  return Stmt(std::make_shared<const StmtNode>(std::move(copy)));
}

}  // namespace

Expr ReplaceBuffer(const Expr& expr, const Buffer& from, const Buffer& to) {
  ExprRewriter rw([&](const Expr&) { return Expr(); });
  ExprRewriter* self = &rw;
  ExprRewriter buf([&](const Expr& e) -> Expr {
    if ((e->op == ExprOp::kLoad || e->op == ExprOp::kDim) && e->buffer.get() == from.get()) {
      ExprNode copy = *e;
      copy.buffer = to;
      for (Expr& a : copy.args) a = self->Rewrite(a);
      return Expr(std::make_shared<const ExprNode>(std::move(copy)));
    }
    return Expr();
  });
  self = &buf;
  return buf.Rewrite(expr);
}

Stmt ReplaceBuffer(const Stmt& stmt, const Buffer& from, const Buffer& to) {
  ExprRewriter* self = nullptr;
  ExprRewriter buf([&](const Expr& e) -> Expr {
    if ((e->op == ExprOp::kLoad || e->op == ExprOp::kDim) && e->buffer.get() == from.get()) {
      ExprNode copy = *e;
      copy.buffer = to;
      for (Expr& a : copy.args) a = self->Rewrite(a);
      return Expr(std::make_shared<const ExprNode>(std::move(copy)));
    }
    return Expr();
  });
  self = &buf;
  return RewriteStmt(stmt, buf, [&](const StmtNode& n, ExprRewriter& ex) -> Stmt {
    if (n.buffer.get() != from.get()) return Stmt();
    StmtNode copy = n;
    copy.buffer = to;
    for (Expr& e : copy.exprs) e = ex.Rewrite(e);
    return Stmt(std::make_shared<const StmtNode>(std::move(copy)));
  });
}

Stmt RewriteStores(const Stmt& stmt, const Buffer& target,
                   const std::function<Stmt(const std::vector<Expr>&, const Expr&)>& rewrite) {
  ExprRewriter none([](const Expr&) { return Expr(); });
  return RewriteStmt(stmt, none, [&](const StmtNode& n, ExprRewriter&) -> Stmt {
    if (n.buffer.get() != target.get()) return Stmt();
    std::vector<Expr> indices(n.exprs.begin(), n.exprs.end() - 1);
    return rewrite(indices, n.exprs.back());
  });
}

bool LoadsFrom(const Expr& expr, const Buffer& buffer) {
  bool found = false;
  ExprRewriter rw([&](const Expr& e) -> Expr {
    if (e->op == ExprOp::kLoad && e->buffer.get() == buffer.get()) found = true;
    return Expr();
  });
  rw.Rewrite(expr);
  return found;
}

bool LoadsFrom(const Stmt& stmt, const Buffer& buffer) {
  bool found = false;
  ExprRewriter rw([&](const Expr& e) -> Expr {
    if (e->op == ExprOp::kLoad && e->buffer.get() == buffer.get()) found = true;
    return Expr();
  });
  RewriteStmt(stmt, rw, nullptr);
  return found;
}

Expr ReplaceLoads(const Expr& expr, const Buffer& buffer,
                  const std::function<Expr(const std::vector<Expr>&)>& replace) {
  ExprRewriter* self = nullptr;
  ExprRewriter rw([&](const Expr& e) -> Expr {
    if (e->op != ExprOp::kLoad || e->buffer.get() != buffer.get()) return Expr();
    std::vector<Expr> idx;
    for (const Expr& a : e->args) idx.push_back(self->Rewrite(a));
    Expr r = replace(idx);
    if (!r) self->Fail();
    return r;
  });
  self = &rw;
  Expr out = rw.Rewrite(expr);
  return rw.failed() ? Expr() : out;
}

}  // namespace kiln::jit
