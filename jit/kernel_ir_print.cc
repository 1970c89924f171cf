// Kernel IR printer: deterministic text for debugging and `kiln inspect`.
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "jit/kernel_ir.h"

namespace kiln::jit {
namespace {

const char* InfixSymbol(ExprOp op) {
  switch (op) {
    case ExprOp::kAdd:
      return " + ";
    case ExprOp::kSub:
      return " - ";
    case ExprOp::kMul:
      return " * ";
    case ExprOp::kDiv:
      return " / ";
    case ExprOp::kMod:
      return " % ";
    case ExprOp::kEq:
      return " == ";
    case ExprOp::kNe:
      return " != ";
    case ExprOp::kLt:
      return " < ";
    case ExprOp::kLe:
      return " <= ";
    case ExprOp::kGt:
      return " > ";
    case ExprOp::kGe:
      return " >= ";
    case ExprOp::kAnd:
      return " && ";
    case ExprOp::kOr:
      return " || ";
    default:
      return nullptr;
  }
}

std::string FormatFloat(double v, DType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), t == DType::kF64 ? "%.17g" : "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

class Printer {
 public:
  std::string PrintKernel(const jit::Kernel& k) {
    out_ = "kernel " + k.name + "(";
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      if (i) out_ += ", ";
      const Buffer& b = k.buffers[i];
      if (!b) {
        out_ += "<null>";
        continue;
      }
      out_ += NameOf(b.get(), b->name) + ": " + DTypeShortName(b->dtype) + "[rank " +
              std::to_string(b->rank) + (b->contiguous ? "" : ", strided") + "]";
    }
    out_ += ")";
    if (!k.dims.empty()) {
      out_ += " dims(";
      for (size_t i = 0; i < k.dims.size(); ++i) {
        out_ += (i ? ", " : "") + NameOf(k.dims[i].get(), k.dims[i].name());
      }
      out_ += ")";
    }
    out_ += " {\n";
    indent_ = 1;
    PrintStmt(k.body.get());
    out_ += "}\n";
    return out_;
  }

  std::string PrintStmt(const StmtNode* s) {
    if (depth_ > kMaxDepth) {
      Line("...");
      return out_;
    }
    ++depth_;
    PrintStmtNode(s);
    --depth_;
    return out_;
  }

  std::string PrintExpr(const jit::Expr& e) {
    if (!e) return "<null>";
    if (depth_ > kMaxDepth) return "...";
    ++depth_;
    std::string text = PrintExprNode(e);
    --depth_;
    return text;
  }

 private:
  void PrintStmtNode(const StmtNode* s) {
    if (!s) {
      Line("<null>");
      return;
    }
    switch (s->op) {
      case StmtOp::kFor:
        PrintFor(*s);
        break;
      case StmtOp::kStore: {
        // Operands are printed in separate statements: names are assigned in print order.
        if (s->exprs.empty()) {
          Line(BufferName(s->buffer) + "[<no value>]");
          break;
        }
        std::string target = Access(s->buffer, s->exprs, s->exprs.size() - 1);
        Line(target + " = " + PrintExpr(s->exprs.back()));
        break;
      }
      case StmtOp::kLet: {
        std::string value = PrintExpr(s->exprs.empty() ? jit::Expr() : s->exprs[0]);
        Line("let " + VarName(s->var) + ": " + DTypeShortName(s->var.dtype()) + " = " + value);
        Body(*s, 0);
        break;
      }
      case StmtOp::kIf:
        PrintIf(*s);
        break;
      case StmtOp::kAllocate:
        PrintAllocate(*s);
        break;
      case StmtOp::kSeq:
        for (size_t i = 0; i < s->body.size(); ++i) Body(*s, i);
        break;
    }
  }

  std::string PrintExprNode(const jit::Expr& e) {
    const ExprNode& n = *e;
    switch (n.op) {
      case ExprOp::kIntImm: {
        if (n.dtype == DType::kBool) return n.int_value ? "true" : "false";
        std::string s = IsUnsignedInteger(n.dtype)
                            ? std::to_string(static_cast<uint64_t>(n.int_value))
                            : std::to_string(n.int_value);
        return n.dtype == DType::kI64 ? s : s + ":" + DTypeShortName(n.dtype);
      }
      case ExprOp::kFloatImm: {
        std::string s = FormatFloat(n.float_value, n.dtype);
        return n.dtype == DType::kF32 ? s : s + ":" + DTypeShortName(n.dtype);
      }
      case ExprOp::kVar:
        return NameOf(e.get(), n.name);
      case ExprOp::kLoad:
        return Access(n.buffer, n.args, n.args.size());
      case ExprOp::kDim:
        return BufferName(n.buffer) + ".shape[" + std::to_string(n.int_value) + "]";
      case ExprOp::kNot:
        return "!" + PrintExpr(Arg(n, 0));
      case ExprOp::kNeg:
        return "-" + PrintExpr(Arg(n, 0));
      case ExprOp::kCast:
        return std::string(DTypeShortName(n.dtype)) + "(" + PrintExpr(Arg(n, 0)) + ")";
      case ExprOp::kReduce:
        return PrintReduce(n);
      case ExprOp::kCheckIndex:
        return "check_index(" + PrintExpr(Arg(n, 0)) + ", " + PrintExpr(Arg(n, 1)) +
               (n.args.size() > 2 ? ", at " + PrintExpr(Arg(n, 2)) : std::string()) + ", \"" +
               n.name + "\")";
      default:
        break;
    }
    if (const char* sym = InfixSymbol(n.op)) {
      std::string lhs = PrintExpr(Arg(n, 0));
      return "(" + lhs + sym + PrintExpr(Arg(n, 1)) + ")";
    }
    std::string s = std::string(ExprOpName(n.op)) + "(";
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) s += ", ";
      s += PrintExpr(n.args[i]);
    }
    return s + ")";
  }

 private:
  static jit::Expr Arg(const ExprNode& n, size_t i) {
    return i < n.args.size() ? n.args[i] : jit::Expr();
  }

  std::string NameOf(const void* key, const std::string& hint) {
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    std::string base = hint.empty() ? "v" : hint;
    std::string name = base;
    for (int i = 1; used_.count(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    names_[key] = name;
    return name;
  }

  std::string VarName(const Var& v) { return v ? NameOf(v.get(), v.name()) : "<null>"; }
  std::string BufferName(const Buffer& b) { return b ? NameOf(b.get(), b->name) : "<null>"; }

  std::string Access(const Buffer& b, const std::vector<jit::Expr>& idx, size_t count) {
    std::string s = BufferName(b) + "[";
    for (size_t i = 0; i < count && i < idx.size(); ++i) {
      if (i) s += ", ";
      s += PrintExpr(idx[i]);
    }
    return s + "]";
  }

  std::string PrintReduce(const ExprNode& n) {
    std::string s = std::string(ReduceOpName(n.reduce_op)) + "(";
    for (size_t i = 0; i < n.axes.size(); ++i) {
      if (i) s += ", ";
      s += VarName(n.axes[i]);
      s += " < " + PrintExpr(Arg(n, i + 1));
    }
    return s + ": " + PrintExpr(Arg(n, 0)) + ")";
  }

  void Line(const std::string& text) { out_ += std::string(2 * indent_, ' ') + text + "\n"; }

  void Body(const StmtNode& s, size_t i) {
    if (i < s.body.size()) PrintStmt(s.body[i].get());
  }

  void Block(const StmtNode& s, size_t i) {
    ++indent_;
    Body(s, i);
    --indent_;
  }

  void PrintFor(const StmtNode& s) {
    std::string kind =
        s.for_kind == ForKind::kSerial ? "" : std::string(ForKindName(s.for_kind)) + " ";
    jit::Expr min = Arg2(s, 0), extent = Arg2(s, 1);
    bool zero = min && min->op == ExprOp::kIntImm && min->int_value == 0;
    std::string lo = PrintExpr(min);
    std::string hi = zero ? PrintExpr(extent) : lo + " + " + PrintExpr(extent);
    std::string var = VarName(s.var);
    Line(kind + "for " + var + " in [" + lo + ", " + hi + ") {");
    Block(s, 0);
    Line("}");
  }

  void PrintIf(const StmtNode& s) {
    Line("if " + PrintExpr(Arg2(s, 0)) + " {");
    Block(s, 0);
    if (s.body.size() > 1) {
      Line("} else {");
      Block(s, 1);
    }
    Line("}");
  }

  void PrintAllocate(const StmtNode& s) {
    std::string shape;
    if (s.buffer) {
      for (size_t i = 0; i < s.buffer->local_shape.size(); ++i) {
        shape += (i ? ", " : "") + std::to_string(s.buffer->local_shape[i]);
      }
    }
    Line("alloc " + BufferName(s.buffer) + ": " +
         (s.buffer ? DTypeShortName(s.buffer->dtype) : "?") + "[" + shape + "] {");
    Block(s, 0);
    Line("}");
  }

  static jit::Expr Arg2(const StmtNode& s, size_t i) {
    return i < s.exprs.size() ? s.exprs[i] : jit::Expr();
  }

  std::unordered_map<const void*, std::string> names_;
  std::unordered_set<std::string> used_;
  std::string out_;
  int indent_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string ToText(const Kernel& kernel) { return Printer().PrintKernel(kernel); }
std::string ToText(const Stmt& stmt) { return Printer().PrintStmt(stmt.get()); }
std::string ToText(const Expr& expr) { return Printer().PrintExpr(expr); }

}  // namespace kiln::jit
