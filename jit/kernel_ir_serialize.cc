// Binary serialization of kernel IR: a compact, versioned node table with a fully checked reader.
#include "jit/kernel_ir_serialize.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "jit/precondition.h"

namespace kiln::jit {
namespace {

constexpr char kMagic[4] = {'K', 'K', 'I', 'R'};
constexpr int kNumExprOps = static_cast<int>(ExprOp::kTeamBarrier) + 1;
constexpr int kNumReduceOps = static_cast<int>(ReduceOp::kArgMin) + 1;
constexpr int kNumStmtOps = static_cast<int>(StmtOp::kSeq) + 1;
constexpr int kNumForKinds = static_cast<int>(ForKind::kTeam) + 1;

// ---- Writer. ----

class Writer {
 public:
  std::vector<uint8_t> Write(const Kernel& k, const std::vector<DimBinding>& bindings,
                             const std::vector<Expr>& preconditions) {
    for (const Buffer& b : k.buffers) BufferId(b);
    for (const Var& v : k.dims) VarId(v);
    int body = k.body ? StmtId(k.body.node()) : -1;
    std::vector<int> pre;
    for (const Expr& e : preconditions) pre.push_back(ExprId(e));
    out_.insert(out_.end(), kMagic, kMagic + 4);
    U16(kKirMajorVersion);
    U16(kKirMinorVersion);
    Str(k.name);
    U(buffers_.size());
    for (const BufferNode* b : buffers_) {
      Str(b->name);
      Byte(static_cast<uint8_t>(b->dtype));
      U(b->rank);
      Byte(static_cast<uint8_t>(b->scope));
      Byte(b->contiguous ? 1 : 0);
      U(b->local_shape.size());
      for (int64_t d : b->local_shape) S(d);
    }
    U(vars_.size());
    for (const ExprNode* v : vars_) {
      Str(v->name);
      Byte(static_cast<uint8_t>(v->dtype));
    }
    U(num_exprs_);
    out_.insert(out_.end(), exprs_body_.begin(), exprs_body_.end());
    U(num_stmts_);
    out_.insert(out_.end(), stmts_body_.begin(), stmts_body_.end());
    U(k.buffers.size());
    for (const Buffer& b : k.buffers) U(buffer_ids_[b.get()]);
    U(k.dims.size());
    for (const Var& v : k.dims) U(var_ids_[v.get()]);
    S(body);
    U(bindings.size());
    for (const DimBinding& d : bindings) {
      U(d.buffer);
      U(d.axis);
    }
    U(pre.size());  // since 1.1
    for (int id : pre) U(id);
    return std::move(out_);
  }

 private:
  // Expressions and statements are encoded into their own streams as they are first reached
  // (post-order, so children precede parents); Write puts the counts in front.
  int BufferId(const Buffer& b) {
    auto it = buffer_ids_.find(b.get());
    if (it != buffer_ids_.end()) return it->second;
    int id = static_cast<int>(buffers_.size());
    buffers_.push_back(b.get());
    buffer_ids_[b.get()] = id;
    return id;
  }
  int VarId(const Var& v) { return VarNodeId(v.get()); }
  int VarNodeId(const ExprNode* v) {
    auto it = var_ids_.find(v);
    if (it != var_ids_.end()) return it->second;
    int id = static_cast<int>(vars_.size());
    vars_.push_back(v);
    var_ids_[v] = id;
    return id;
  }
  int ExprId(const Expr& e) {
    auto it = expr_ids_.find(e.get());
    if (it != expr_ids_.end()) return it->second;
    const ExprNode& n = *e;
    std::vector<int> args;
    for (const Expr& a : n.args) args.push_back(ExprId(a));
    std::vector<uint8_t> rec;
    std::swap(rec, out_);
    Byte(static_cast<uint8_t>(n.op));
    Byte(static_cast<uint8_t>(n.dtype));
    U(args.size());
    for (int a : args) U(a);
    switch (n.op) {
      case ExprOp::kIntImm:
        S(n.int_value);
        break;
      case ExprOp::kFloatImm: {
        uint64_t bits;
        std::memcpy(&bits, &n.float_value, 8);
        for (int i = 0; i < 8; ++i) Byte(static_cast<uint8_t>(bits >> (8 * i)));
        break;
      }
      case ExprOp::kVar:
        U(VarNodeId(e.get()));
        break;
      case ExprOp::kLoad:
        U(BufferId(n.buffer));
        break;
      case ExprOp::kDim:
        U(BufferId(n.buffer));
        S(n.int_value);
        break;
      case ExprOp::kReduce:
        Byte(static_cast<uint8_t>(n.reduce_op));
        U(n.axes.size());
        for (const Var& v : n.axes) U(VarId(v));
        break;
      case ExprOp::kCheckIndex:
        Str(n.name);
        break;
      default:
        break;
    }
    std::swap(rec, out_);
    int id = num_exprs_++;
    exprs_body_.insert(exprs_body_.end(), rec.begin(), rec.end());
    expr_ids_[e.get()] = id;
    return id;
  }
  int StmtId(const std::shared_ptr<const StmtNode>& s) {
    auto it = stmt_ids_.find(s.get());
    if (it != stmt_ids_.end()) return it->second;
    std::vector<int> exprs, body;
    int var = s->var ? VarId(s->var) : -1;
    int buffer = s->buffer ? BufferId(s->buffer) : -1;
    for (const Expr& e : s->exprs) exprs.push_back(ExprId(e));
    for (const auto& b : s->body) body.push_back(b ? StmtId(b) : -1);
    std::vector<uint8_t> rec;
    std::swap(rec, out_);
    Byte(static_cast<uint8_t>(s->op));
    Byte(static_cast<uint8_t>(s->for_kind));
    S(var);
    S(buffer);
    U(exprs.size());
    for (int e : exprs) U(e);
    U(body.size());
    for (int b : body) S(b);
    std::swap(rec, out_);
    int id = num_stmts_++;
    stmts_body_.insert(stmts_body_.end(), rec.begin(), rec.end());
    stmt_ids_[s.get()] = id;
    return id;
  }
  void Byte(uint8_t b) { out_.push_back(b); }
  void U16(uint16_t v) {
    Byte(static_cast<uint8_t>(v));
    Byte(static_cast<uint8_t>(v >> 8));
  }
  void U(uint64_t v) {
    while (v >= 0x80) {
      Byte(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    Byte(static_cast<uint8_t>(v));
  }
  void S(int64_t v) { U((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void Str(const std::string& s) {
    U(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }

  std::vector<uint8_t> out_, exprs_body_, stmts_body_;
  int num_exprs_ = 0, num_stmts_ = 0;
  std::vector<const BufferNode*> buffers_;
  std::vector<const ExprNode*> vars_;
  std::unordered_map<const BufferNode*, int> buffer_ids_;
  std::unordered_map<const ExprNode*, int> var_ids_, expr_ids_;
  std::unordered_map<const StmtNode*, int> stmt_ids_;
};

// ---- Reader. ----

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size), begin_(data) {}

  StatusOr<KernelPayload> Read() {
    if (Remaining() < 8 || std::memcmp(p_, kMagic, 4) != 0) return Fail("bad magic");
    p_ += 4;
    uint16_t major = static_cast<uint16_t>(p_[0] | (p_[1] << 8));
    uint16_t minor = static_cast<uint16_t>(p_[2] | (p_[3] << 8));
    p_ += 4;
    if (major != kKirMajorVersion || minor > kKirMinorVersion) {
      return Unsupported(
          "kernel IR version " + std::to_string(major) + "." + std::to_string(minor) +
          " cannot be read by this build (reads " + std::to_string(kKirMajorVersion) + ".0 to " +
          std::to_string(kKirMajorVersion) + "." + std::to_string(kKirMinorVersion) + ")");
    }
    KernelPayload out;
    RETURN_IF_ERROR(Str(&out.kernel.name));
    RETURN_IF_ERROR(ReadBuffers());
    RETURN_IF_ERROR(ReadVars());
    RETURN_IF_ERROR(ReadExprs());
    RETURN_IF_ERROR(ReadStmts());
    uint64_t n;
    RETURN_IF_ERROR(Count(&n, "params"));
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t id;
      RETURN_IF_ERROR(Index(&id, buffers_.size(), "param buffer"));
      out.kernel.buffers.push_back(buffers_[id]);
    }
    RETURN_IF_ERROR(Count(&n, "dims"));
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t id;
      RETURN_IF_ERROR(Index(&id, vars_.size(), "dim var"));
      out.kernel.dims.push_back(vars_[id]);
    }
    int64_t body = 0;
    RETURN_IF_ERROR(S(&body));
    if (body < 0 || body >= static_cast<int64_t>(stmts_.size())) return Fail("body out of range");
    out.kernel.body = Stmt(stmts_[body]);
    RETURN_IF_ERROR(Count(&n, "dim bindings"));
    if (n != out.kernel.dims.size()) {
      return Fail(std::to_string(n) + " dim bindings for " +
                  std::to_string(out.kernel.dims.size()) + " dims");
    }
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t b, axis;
      RETURN_IF_ERROR(Index(&b, out.kernel.buffers.size(), "binding buffer"));
      RETURN_IF_ERROR(Index(&axis, out.kernel.buffers[b]->rank, "binding axis"));
      out.dim_bindings.push_back({static_cast<int>(b), static_cast<int>(axis)});
    }
    if (minor >= 1) {
      RETURN_IF_ERROR(Count(&n, "preconditions"));
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t id;
        RETURN_IF_ERROR(Index(&id, exprs_.size(), "precondition"));
        out.preconditions.push_back(Expr(exprs_[id]));
      }
    }
    if (p_ != end_) return Fail(std::to_string(Remaining()) + " trailing bytes");
    Status valid = ValidateKernel(out.kernel);
    if (!valid.ok()) return InvalidFormat("kernel IR: " + valid.message());
    valid = ValidatePreconditions(out.kernel, out.preconditions);
    if (!valid.ok()) return InvalidFormat(valid.message());
    return out;
  }

 private:
  Status ReadBuffers() {
    uint64_t n;
    RETURN_IF_ERROR(Count(&n, "buffers"));
    for (uint64_t i = 0; i < n; ++i) {
      std::string name;
      RETURN_IF_ERROR(Str(&name));
      uint8_t dtype = 0, scope = 0, contiguous = 0;
      uint64_t rank, nlocal;
      RETURN_IF_ERROR(DTypeByte(&dtype));
      RETURN_IF_ERROR(Index(&rank, kMaxRank + 1, "buffer rank"));
      RETURN_IF_ERROR(Byte(&scope));
      RETURN_IF_ERROR(Byte(&contiguous));
      RETURN_IF_ERROR(Count(&nlocal, "local shape"));
      if (scope > 1 || contiguous > 1) return Fail("bad buffer flags");
      std::vector<int64_t> shape(nlocal);
      for (auto& d : shape) RETURN_IF_ERROR(S(&d));
      if (scope == static_cast<uint8_t>(BufferScope::kParam)) {
        if (nlocal != 0) return Fail("param buffer with a local shape");
        buffers_.push_back(Buffer::Param(name, static_cast<DType>(dtype), static_cast<int>(rank),
                                         contiguous != 0));
      } else {
        if (nlocal != rank) return Fail("local buffer rank does not match its shape");
        int64_t bytes = static_cast<int64_t>(DTypeSize(static_cast<DType>(dtype)));
        for (int64_t d : shape) {
          if (d < 0 || d > kMaxLocalBytes) return Fail("local buffer too large");
          bytes *= d;
          if (bytes > kMaxLocalBytes) return Fail("local buffer too large");
        }
        buffers_.push_back(Buffer::Local(name, static_cast<DType>(dtype), std::move(shape)));
      }
    }
    return Status::Ok();
  }

  Status ReadVars() {
    uint64_t n;
    RETURN_IF_ERROR(Count(&n, "vars"));
    for (uint64_t i = 0; i < n; ++i) {
      std::string name;
      uint8_t dtype = 0;
      RETURN_IF_ERROR(Str(&name));
      RETURN_IF_ERROR(DTypeByte(&dtype));
      vars_.emplace_back(std::move(name), static_cast<DType>(dtype));
    }
    return Status::Ok();
  }

  Status ReadExprs() {
    uint64_t n;
    RETURN_IF_ERROR(Count(&n, "expressions"));
    for (uint64_t i = 0; i < n; ++i) {
      uint8_t op = 0, dtype = 0;
      RETURN_IF_ERROR(Byte(&op));
      RETURN_IF_ERROR(DTypeByte(&dtype));
      if (op >= kNumExprOps) return Fail("expression op " + std::to_string(op));
      ExprNode node;
      node.op = static_cast<ExprOp>(op);
      node.dtype = static_cast<DType>(dtype);
      uint64_t nargs;
      RETURN_IF_ERROR(Count(&nargs, "expression args"));
      int64_t depth = 0, size = 1;
      for (uint64_t a = 0; a < nargs; ++a) {
        uint64_t id;
        RETURN_IF_ERROR(Index(&id, exprs_.size(), "expression arg"));
        node.args.push_back(exprs_[id]);
        depth = std::max(depth, expr_depth_[id]);
        size = std::min(kMaxKirTreeNodes + 1, size + expr_size_[id]);
      }
      Expr e;
      switch (node.op) {
        case ExprOp::kIntImm:
          RETURN_IF_ERROR(S(&node.int_value));
          break;
        case ExprOp::kFloatImm: {
          if (Remaining() < 8) return Fail("truncated float");
          uint64_t bits = 0;
          for (int b = 0; b < 8; ++b) bits |= static_cast<uint64_t>(p_[b]) << (8 * b);
          p_ += 8;
          std::memcpy(&node.float_value, &bits, 8);
          break;
        }
        case ExprOp::kVar: {
          uint64_t id;
          RETURN_IF_ERROR(Index(&id, vars_.size(), "var"));
          if (nargs != 0 || static_cast<DType>(dtype) != vars_[id].dtype()) {
            return Fail("malformed var reference");
          }
          e = vars_[id].expr();
          break;
        }
        case ExprOp::kLoad:
        case ExprOp::kDim: {
          uint64_t id;
          RETURN_IF_ERROR(Index(&id, buffers_.size(), "buffer"));
          node.buffer = buffers_[id];
          if (node.op == ExprOp::kDim) RETURN_IF_ERROR(S(&node.int_value));
          break;
        }
        case ExprOp::kReduce: {
          uint8_t rop = 0;
          uint64_t naxes;
          RETURN_IF_ERROR(Byte(&rop));
          if (rop >= kNumReduceOps) return Fail("reduce op " + std::to_string(rop));
          node.reduce_op = static_cast<ReduceOp>(rop);
          RETURN_IF_ERROR(Count(&naxes, "reduce axes"));
          for (uint64_t a = 0; a < naxes; ++a) {
            uint64_t id;
            RETURN_IF_ERROR(Index(&id, vars_.size(), "reduce axis"));
            node.axes.push_back(vars_[id]);
          }
          break;
        }
        case ExprOp::kCheckIndex:
          RETURN_IF_ERROR(Str(&node.name));
          break;
        default:
          break;
      }
      if (!e) e = Expr(std::make_shared<const ExprNode>(std::move(node)));
      if (depth + 1 > kMaxDepth) return Fail("expression nesting deeper than the limit");
      if (size > kMaxKirTreeNodes) return Fail("expression tree too large");
      exprs_.push_back(std::move(e));
      expr_depth_.push_back(depth + 1);
      expr_size_.push_back(size);
    }
    return Status::Ok();
  }

  Status ReadStmts() {
    uint64_t n;
    RETURN_IF_ERROR(Count(&n, "statements"));
    for (uint64_t i = 0; i < n; ++i) {
      uint8_t op = 0, kind = 0;
      int64_t var = 0, buffer = 0;
      RETURN_IF_ERROR(Byte(&op));
      RETURN_IF_ERROR(Byte(&kind));
      if (op >= kNumStmtOps || kind >= kNumForKinds) return Fail("bad statement op or loop kind");
      auto node = std::make_shared<StmtNode>();
      node->op = static_cast<StmtOp>(op);
      node->for_kind = static_cast<ForKind>(kind);
      RETURN_IF_ERROR(S(&var));
      RETURN_IF_ERROR(S(&buffer));
      if (var < -1 || var >= static_cast<int64_t>(vars_.size())) return Fail("statement var");
      if (buffer < -1 || buffer >= static_cast<int64_t>(buffers_.size())) {
        return Fail("statement buffer");
      }
      if (var >= 0) node->var = vars_[var];
      if (buffer >= 0) node->buffer = buffers_[buffer];
      int64_t depth = 0, size = 1;
      uint64_t count;
      RETURN_IF_ERROR(Count(&count, "statement exprs"));
      for (uint64_t a = 0; a < count; ++a) {
        uint64_t id;
        RETURN_IF_ERROR(Index(&id, exprs_.size(), "statement expr"));
        node->exprs.push_back(exprs_[id]);
        depth = std::max(depth, expr_depth_[id]);
        size = std::min(kMaxKirTreeNodes + 1, size + expr_size_[id]);
      }
      RETURN_IF_ERROR(Count(&count, "statement body"));
      for (uint64_t a = 0; a < count; ++a) {
        int64_t id = 0;
        RETURN_IF_ERROR(S(&id));
        if (id < -1 || id >= static_cast<int64_t>(stmts_.size())) return Fail("statement child");
        if (id < 0) {
          node->body.push_back(nullptr);
          continue;
        }
        node->body.push_back(stmts_[id]);
        depth = std::max(depth, stmt_depth_[id]);
        size = std::min(kMaxKirTreeNodes + 1, size + stmt_size_[id]);
      }
      RETURN_IF_ERROR(CheckStmtShape(*node));
      if (depth + 1 > kMaxDepth) return Fail("statement nesting deeper than the limit");
      if (size > kMaxKirTreeNodes) return Fail("statement tree too large");
      stmts_.push_back(std::move(node));
      stmt_depth_.push_back(depth + 1);
      stmt_size_.push_back(size);
    }
    return Status::Ok();
  }

  // The fields each statement op reads, so later walks may index them blindly.
  Status CheckStmtShape(const StmtNode& s) const {
    size_t ne = s.exprs.size(), nb = s.body.size();
    bool body_ok = nb == 1 && s.body[0];
    bool ok = false;
    switch (s.op) {
      case StmtOp::kFor:
        ok = s.var && ne == 2 && body_ok;
        break;
      case StmtOp::kStore:
        ok = s.buffer && ne >= 1 && nb == 0;
        break;
      case StmtOp::kLet:
        ok = s.var && ne == 1 && body_ok;
        break;
      case StmtOp::kIf:
        ok = ne == 1 && (nb == 1 || (nb == 2 && s.body[1])) && s.body[0];
        break;
      case StmtOp::kAllocate:
        ok = s.buffer && ne == 0 && body_ok;
        break;
      case StmtOp::kSeq:
        ok = ne == 0 && std::all_of(s.body.begin(), s.body.end(), [](const auto& b) { return b; });
        break;
    }
    return ok ? Status::Ok() : Fail("malformed statement");
  }

  Status Fail(const std::string& what) const {
    return InvalidFormat("kernel IR payload at byte " + std::to_string(p_ - begin_) + ": " + what);
  }
  size_t Remaining() const { return static_cast<size_t>(end_ - p_); }
  Status Byte(uint8_t* b) {
    if (p_ >= end_) return Fail("truncated");
    *b = *p_++;
    return Status::Ok();
  }
  Status DTypeByte(uint8_t* b) {
    RETURN_IF_ERROR(Byte(b));
    if (*b >= kNumDTypes) return Fail("dtype " + std::to_string(*b));
    return Status::Ok();
  }
  Status U(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = 0;
      RETURN_IF_ERROR(Byte(&b));
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return Status::Ok();
    }
    return Fail("varint too long");
  }
  Status S(int64_t* v) {
    uint64_t u;
    RETURN_IF_ERROR(U(&u));
    *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
    return Status::Ok();
  }
  // A count of items each at least one byte long: never more than the bytes left.
  Status Count(uint64_t* n, const char* what) {
    RETURN_IF_ERROR(U(n));
    if (*n > Remaining()) return Fail(std::string(what) + " count exceeds the payload");
    return Status::Ok();
  }
  Status Index(uint64_t* id, size_t limit, const char* what) {
    RETURN_IF_ERROR(U(id));
    if (*id >= limit)
      return Fail(std::string(what) + " index " + std::to_string(*id) +
                  " >= " + std::to_string(limit));
    return Status::Ok();
  }
  Status Str(std::string* s) {
    uint64_t n;
    RETURN_IF_ERROR(U(&n));
    if (n > Remaining()) return Fail("truncated string");
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return Status::Ok();
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  std::vector<Buffer> buffers_;
  std::vector<Var> vars_;
  std::vector<Expr> exprs_;
  std::vector<int64_t> expr_depth_, expr_size_;
  std::vector<std::shared_ptr<const StmtNode>> stmts_;
  std::vector<int64_t> stmt_depth_, stmt_size_;
};

}  // namespace

std::vector<uint8_t> SerializeKernel(const Kernel& kernel,
                                     const std::vector<DimBinding>& dim_bindings,
                                     const std::vector<Expr>& preconditions) {
  return Writer().Write(kernel, dim_bindings, preconditions);
}

StatusOr<KernelPayload> DeserializeKernelPayload(const uint8_t* data, size_t size) {
  if (data == nullptr && size != 0) return InvalidFormat("kernel IR payload: null data");
  static const uint8_t kEmpty = 0;
  return Reader(data ? data : &kEmpty, data ? size : 0).Read();
}

StatusOr<Kernel> DeserializeKernel(const uint8_t* data, size_t size) {
  ASSIGN_OR_RETURN(KernelPayload payload, DeserializeKernelPayload(data, size));
  return std::move(payload.kernel);
}

}  // namespace kiln::jit
