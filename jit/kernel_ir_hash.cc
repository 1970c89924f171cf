// Structural hashing and equality of kernels through one canonical token stream.
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/kernel_ir.h"

namespace kiln::jit {
namespace {

// Vars and local buffers become numbers in binding order, so names and object identity vanish.
class Canonicalizer {
 public:
  /// CheckIndex site names in the order Run numbered them.
  std::vector<std::string> Sites() const {
    std::vector<std::string> out(sites_.size());
    for (const auto& [name, number] : sites_) out[number] = name;
    return out;
  }

  std::vector<uint64_t> Run(const Kernel& k) {
    Put(k.buffers.size());
    for (const Buffer& b : k.buffers) {
      if (!b) {
        Put(~0ull);
        continue;
      }
      Put(static_cast<uint64_t>(b->dtype), static_cast<uint64_t>(b->rank), b->contiguous);
      buffers_[b.get()] = next_buffer_++;
    }
    Put(k.dims.size());
    for (const Var& v : k.dims) Bind(v);
    PutStmt(k.body.get());
    return std::move(tokens_);
  }

 private:
  template <typename... T>
  void Put(T... values) {
    (tokens_.push_back(static_cast<uint64_t>(values)), ...);
  }

  void Bind(const Var& v) {
    Put(static_cast<uint64_t>(v.dtype()));
    vars_[v.get()] = next_var_++;
  }

  void PutVar(const ExprNode* node) {
    auto it = vars_.find(node);
    if (it == vars_.end()) it = vars_.emplace(node, next_var_++).first;  // unbound (invalid IR)
    Put(it->second);
  }

  void PutBuffer(const Buffer& b) {
    auto it = buffers_.find(b.get());
    Put(it == buffers_.end() ? ~0ull : it->second);
  }

  void PutExpr(const Expr& e) {
    Depth depth(&depth_);
    if (depth_ > kMaxDepth) return Put(~3ull);  // invalid IR: ValidateKernel rejects it
    if (!e) {
      Put(~1ull);
      return;
    }
    const ExprNode& n = *e;
    Put(static_cast<uint64_t>(n.op), static_cast<uint64_t>(n.dtype), n.args.size());
    switch (n.op) {
      case ExprOp::kIntImm:
        Put(n.int_value);
        break;
      case ExprOp::kFloatImm: {
        uint64_t bits;
        std::memcpy(&bits, &n.float_value, sizeof(bits));
        Put(bits);
        break;
      }
      case ExprOp::kVar:
        PutVar(e.get());
        break;
      case ExprOp::kLoad:
        PutBuffer(n.buffer);
        break;
      case ExprOp::kDim:
        PutBuffer(n.buffer);
        Put(n.int_value);
        break;
      case ExprOp::kReduce:
        return PutReduce(n);
      case ExprOp::kCheckIndex: {
        // The site's number, not its name: kernels equal up to node names share code.
        auto it = sites_.emplace(n.name, sites_.size()).first;
        Put(it->second);
        break;
      }
      default:
        break;
    }
    for (const Expr& arg : n.args) PutExpr(arg);
  }

  void PutReduce(const ExprNode& n) {
    Put(static_cast<uint64_t>(n.reduce_op), n.axes.size());
    for (size_t i = 1; i < n.args.size(); ++i) PutExpr(n.args[i]);
    for (const Var& axis : n.axes) Bind(axis);
    if (!n.args.empty()) PutExpr(n.args[0]);
  }

  void PutStmt(const StmtNode* s) {
    Depth depth(&depth_);
    if (depth_ > kMaxDepth) return Put(~3ull);
    if (!s) {
      Put(~2ull);
      return;
    }
    Put(static_cast<uint64_t>(s->op), static_cast<uint64_t>(s->for_kind), s->exprs.size(),
        s->body.size());
    if (s->op == StmtOp::kStore) PutBuffer(s->buffer);
    for (const Expr& e : s->exprs) PutExpr(e);
    if (s->op == StmtOp::kFor || s->op == StmtOp::kLet) Bind(s->var);
    if (s->op == StmtOp::kAllocate && s->buffer) {
      Put(static_cast<uint64_t>(s->buffer->dtype), s->buffer->local_shape.size());
      for (int64_t d : s->buffer->local_shape) Put(d);
      buffers_[s->buffer.get()] = next_buffer_++;
    }
    for (const auto& child : s->body) PutStmt(child.get());
  }

  // Counts nesting for the duration of one PutExpr/PutStmt call.
  struct Depth {
    explicit Depth(int* d) : d(d) { ++*d; }
    ~Depth() { --*d; }
    int* d;
  };

  std::vector<uint64_t> tokens_;
  int depth_ = 0;
  std::unordered_map<const ExprNode*, uint64_t> vars_;
  std::unordered_map<const BufferNode*, uint64_t> buffers_;
  std::unordered_map<std::string, uint64_t> sites_;
  uint64_t next_var_ = 0;
  uint64_t next_buffer_ = 0;
};

uint64_t Mix(uint64_t h, uint64_t v) {
  // splitmix64 finalizer over a running combination.
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<uint64_t> CanonicalForm(const Kernel& kernel) { return Canonicalizer().Run(kernel); }

std::vector<std::string> IndexCheckSites(const Kernel& kernel) {
  Canonicalizer c;
  c.Run(kernel);
  return c.Sites();
}

uint64_t HashCanonicalForm(const std::vector<uint64_t>& form) {
  uint64_t h = 0x6b696c6e;  // "kiln"
  for (uint64_t t : form) h = Mix(h, t);
  return h;
}

uint64_t HashKernel(const Kernel& kernel) { return HashCanonicalForm(CanonicalForm(kernel)); }

bool StructurallyEqual(const Kernel& a, const Kernel& b) {
  return CanonicalForm(a) == CanonicalForm(b);
}

}  // namespace kiln::jit
