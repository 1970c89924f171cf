// Code generation for kernel expressions: memory access, arithmetic, casts, math, reductions.
#include <llvm/ADT/APFloat.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include <limits>

#include "jit/codegen_internal.h"

namespace kiln::jit {
namespace {

bool IsFloatCompute(DType t) { return t == DType::kF32 || t == DType::kF64; }
bool IsUnsigned(DType t) { return IsUnsignedInteger(t) || t == DType::kBool; }

// Bits of `value` rounded (to nearest even) to the IEEE format `semantics`.
llvm::APInt RoundedBits(double value, const llvm::fltSemantics& semantics) {
  llvm::APFloat f(value);
  bool loses_info = false;
  f.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &loses_info);
  return f.bitcastToAPInt();
}

// Lane-wise f32 math as inline arithmetic on scalars or vectors alike (`type` is float or a
// vector of float), so vectorized loops never call out to libmvec for it.
struct F32Math {
  llvm::IRBuilder<>& b;
  llvm::Type* type;

  llvm::Value* C(double v) const { return llvm::ConstantFP::get(type, v); }
  llvm::Value* Fma(llvm::Value* x, llvm::Value* y, llvm::Value* addend) const {
    return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {type}, {x, y, addend});
  }
  // Coefficients highest degree first.
  llvm::Value* Horner(std::initializer_list<double> coefficients, llvm::Value* v) const {
    auto it = coefficients.begin();
    llvm::Value* r = C(*it++);
    for (; it != coefficients.end(); ++it) r = Fma(r, v, C(*it));
    return r;
  }
  // 2^n for an i32 (vector) n in [-126, 127]: the exponent field.
  llvm::Value* Pow2(llvm::Value* n) const {
    llvm::Type* int_type = n->getType();
    llvm::Value* biased = b.CreateAdd(n, llvm::ConstantInt::get(int_type, 127));
    return b.CreateBitCast(b.CreateShl(biased, llvm::ConstantInt::get(int_type, 23)), type);
  }
  // exp(x) for any x, max 1 ulp (tests/jit/codegen_expr_test.cc). Cody-Waite: n = round(x /
  // ln 2), the rest x - n ln 2 in two parts (n times the high part is exact), a degree-6
  // polynomial fitted for this code on [-ln 2 / 2, ln 2 / 2] (relative error 1.9e-9), times 2^n.
  // x is clamped to [-104, 89] (beyond them the result is 0 or inf anyway) and 2^n is applied in
  // two halves so that denormal results and n = 128 come out right; NaN is passed through.
  llvm::Value* Exp(llvm::Value* x) const {
    llvm::Value* xc = b.CreateBinaryIntrinsic(
        llvm::Intrinsic::minnum, b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, C(-104.0)),
        C(89.0));  // NaN becomes -104 here, so the integer conversion below stays defined
    llvm::Value* n =
        b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(xc, C(0x1.715476p+0)));
    llvm::Value* f = Fma(n, C(-0x1.62e4p-1), xc);
    f = Fma(n, C(-0x1.7f7d1cp-20), f);
    llvm::Value* p = Horner(
        {0x1.6ab97ap-10, 0x1.126d0cp-7, 0x1.55589ap-5, 0x1.55540ap-3, 0x1.fffffap-2, 1.0, 1.0}, f);
    llvm::Value* ni = b.CreateFPToSI(n, type->getWithNewType(b.getInt32Ty()));
    llvm::Value* half = b.CreateAShr(ni, llvm::ConstantInt::get(ni->getType(), 1));
    llvm::Value* r = b.CreateFMul(b.CreateFMul(p, Pow2(half)), Pow2(b.CreateSub(ni, half)));
    return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
  }
};

}  // namespace

llvm::Type* CodeGenerator::ValueType(DType t) {
  switch (t) {
    case DType::kBool:
      return b_.getInt1Ty();
    case DType::kI8:
    case DType::kU8:
      return b_.getInt8Ty();
    case DType::kI16:
    case DType::kU16:
    case DType::kBF16:
      return b_.getInt16Ty();
    case DType::kI32:
    case DType::kU32:
      return b_.getInt32Ty();
    case DType::kI64:
    case DType::kU64:
      return b_.getInt64Ty();
    case DType::kF16:
      return b_.getHalfTy();
    case DType::kF32:
      return b_.getFloatTy();
    case DType::kF64:
      return b_.getDoubleTy();
    default:
      return nullptr;
  }
}

llvm::Type* CodeGenerator::MemoryType(DType t) {
  return t == DType::kBool ? b_.getInt8Ty() : ValueType(t);
}

StatusOr<llvm::Value*> CodeGenerator::EmitExpr(const Expr& e) {
  const ExprNode& n = *e;
  if (n.op <= ExprOp::kDim) return EmitLeaf(n, e);
  if (n.op == ExprOp::kTeamSize || n.op == ExprOp::kTeamBarrier) return EmitTeamCall(n.op);
  if (n.op == ExprOp::kReduce) return EmitReduce(n);
  std::vector<llvm::Value*> args;
  for (const Expr& arg : n.args) {
    ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(arg));
    args.push_back(v);
  }
  DType t = n.args[0].dtype();
  switch (n.op) {
    case ExprOp::kSelect:
      return b_.CreateSelect(args[0], args[1], args[2]);
    case ExprOp::kMulAdd:
      if (IsFloatCompute(t)) {
        return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {args[0]->getType()}, args);
      }
      return b_.CreateAdd(b_.CreateMul(args[0], args[1]), args[2]);
    case ExprOp::kCast:
      return EmitCast(args[0], t, n.dtype);
    case ExprOp::kCheckIndex:
      return EmitCheckIndex(n, args[0], args[1], args.size() > 2 ? args[2] : nullptr);
    case ExprOp::kAnd:
      return b_.CreateAnd(args[0], args[1]);
    case ExprOp::kOr:
      return b_.CreateOr(args[0], args[1]);
    case ExprOp::kNot:
      return b_.CreateNot(args[0]);
    default:
      break;
  }
  if (n.op >= ExprOp::kEq && n.op <= ExprOp::kGe) return EmitCompare(n.op, t, args[0], args[1]);
  if (n.op >= ExprOp::kAdd && n.op <= ExprOp::kPow) return EmitBinary(n.op, t, args[0], args[1]);
  return EmitUnary(n.op, t, args[0]);
}

StatusOr<llvm::Value*> CodeGenerator::EmitLeaf(const ExprNode& n, const Expr& e) {
  switch (n.op) {
    case ExprOp::kIntImm:
    case ExprOp::kFloatImm:
      return EmitConst(n);
    case ExprOp::kVar: {
      auto it = env_.vars.find(e.get());
      if (it == env_.vars.end()) return Internal("var " + n.name + " is not bound");
      return it->second;
    }
    case ExprOp::kDim: {
      auto it = env_.buffers.find(n.buffer.get());
      if (it == env_.buffers.end()) return Internal("buffer " + n.buffer->name + " is not bound");
      return it->second.shape[n.int_value];
    }
    default:
      break;
  }
  if (!env_.buffers.count(n.buffer.get())) {
    return Internal("buffer " + n.buffer->name + " is not bound");
  }
  std::vector<llvm::Value*> indices;
  for (const Expr& arg : n.args) {
    ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(arg));
    indices.push_back(v);
  }
  return EmitLoadFrom(n.buffer.get(), indices);
}

llvm::Value* CodeGenerator::EmitConst(const ExprNode& n) {
  switch (n.dtype) {
    case DType::kF32:
      return llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(n.float_value));
    case DType::kF64:
      return llvm::ConstantFP::get(b_.getDoubleTy(), n.float_value);
    case DType::kF16:
      return llvm::ConstantFP::get(
          ctx_, llvm::APFloat(llvm::APFloat::IEEEhalf(),
                              RoundedBits(n.float_value, llvm::APFloat::IEEEhalf())));
    case DType::kBF16:
      return b_.getInt(RoundedBits(n.float_value, llvm::APFloat::BFloat()));
    default:
      return llvm::ConstantInt::get(ValueType(n.dtype), n.int_value, /*IsSigned=*/true);
  }
}

llvm::Value* CodeGenerator::ElementPtr(const BufferNode* buffer,
                                       const std::vector<llvm::Value*>& idx) {
  const BufferValue& bv = env_.buffers.at(buffer);
  llvm::Value* offset = b_.getInt64(0);
  for (size_t d = 0; d < idx.size(); ++d) {
    llvm::Value* term = b_.CreateMul(idx[d], bv.strides[d], "", false, true);
    offset = d == 0 ? term : b_.CreateAdd(offset, term, "", false, true);
  }
  return b_.CreateInBoundsGEP(MemoryType(buffer->dtype), bv.base, offset);
}

// Every access names its buffer's alias scope (the last scope covers all local scratch) and
// declares it does not alias the others, so no runtime overlap checks are ever needed.
void CodeGenerator::TagAccess(llvm::Instruction* access, const BufferValue& buffer) {
  size_t own = buffer.param >= 0 ? static_cast<size_t>(buffer.param) : alias_scopes_.size() - 1;
  std::vector<llvm::Metadata*> others;
  for (size_t i = 0; i < alias_scopes_.size(); ++i) {
    if (i != own) others.push_back(alias_scopes_[i]);
  }
  access->setMetadata(llvm::LLVMContext::MD_alias_scope,
                      llvm::MDNode::get(ctx_, {alias_scopes_[own]}));
  access->setMetadata(llvm::LLVMContext::MD_noalias, llvm::MDNode::get(ctx_, others));
  if (access_groups_.size() == 1) {
    access->setMetadata(llvm::LLVMContext::MD_access_group, access_groups_[0]);
  } else if (!access_groups_.empty()) {
    std::vector<llvm::Metadata*> groups(access_groups_.begin(), access_groups_.end());
    access->setMetadata(llvm::LLVMContext::MD_access_group, llvm::MDNode::get(ctx_, groups));
  }
}

llvm::Value* CodeGenerator::EmitLoadFrom(const BufferNode* buffer,
                                         const std::vector<llvm::Value*>& indices) {
  llvm::Type* type = MemoryType(buffer->dtype);
  llvm::LoadInst* load = b_.CreateAlignedLoad(type, ElementPtr(buffer, indices),
                                              llvm::Align(DTypeSize(buffer->dtype)));
  TagAccess(load, env_.buffers.at(buffer));
  if (buffer->dtype == DType::kBool) return b_.CreateICmpNE(load, b_.getInt8(0));
  return load;
}

void CodeGenerator::EmitStoreTo(const BufferNode* buffer, const std::vector<llvm::Value*>& indices,
                                llvm::Value* value) {
  if (buffer->dtype == DType::kBool) value = b_.CreateZExt(value, b_.getInt8Ty());
  llvm::StoreInst* store = b_.CreateAlignedStore(value, ElementPtr(buffer, indices),
                                                 llvm::Align(DTypeSize(buffer->dtype)));
  TagAccess(store, env_.buffers.at(buffer));
}

llvm::Value* CodeGenerator::EmitBinary(ExprOp op, DType t, llvm::Value* a, llvm::Value* b) {
  if (IsFloatCompute(t)) {
    switch (op) {
      case ExprOp::kAdd:
        return b_.CreateFAdd(a, b);
      case ExprOp::kSub:
        return b_.CreateFSub(a, b);
      case ExprOp::kMul:
        return b_.CreateFMul(a, b);
      case ExprOp::kDiv:
        return b_.CreateFDiv(a, b);
      case ExprOp::kMod:
        return b_.CreateFRem(a, b);
      case ExprOp::kMin:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, b);
      case ExprOp::kMax:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, b);
      case ExprOp::kPow:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, b);
      default:
        return EmitFloatDivision(op, a, b);
    }
  }
  bool is_unsigned = IsUnsigned(t);
  switch (op) {
    case ExprOp::kAdd:
      return b_.CreateAdd(a, b);
    case ExprOp::kSub:
      return b_.CreateSub(a, b);
    case ExprOp::kMul:
      return b_.CreateMul(a, b);
    case ExprOp::kMin:
      return b_.CreateBinaryIntrinsic(is_unsigned ? llvm::Intrinsic::umin : llvm::Intrinsic::smin,
                                      a, b);
    case ExprOp::kMax:
      return b_.CreateBinaryIntrinsic(is_unsigned ? llvm::Intrinsic::umax : llvm::Intrinsic::smax,
                                      a, b);
    default:
      return EmitIntDivision(op, t, a, b);
  }
}

// Integer division never traps: x / 0 == 0 and INT_MIN / -1 == INT_MIN (wraps like -x).
llvm::Value* CodeGenerator::EmitIntDivision(ExprOp op, DType t, llvm::Value* a, llvm::Value* b) {
  llvm::Type* type = a->getType();
  llvm::Value* zero = llvm::ConstantInt::get(type, 0);
  llvm::Value* one = llvm::ConstantInt::get(type, 1);
  llvm::Value* by_zero = b_.CreateICmpEQ(b, zero);
  if (IsUnsigned(t)) {
    llvm::Value* safe = b_.CreateSelect(by_zero, one, b);
    bool quotient = op == ExprOp::kDiv || op == ExprOp::kFloorDiv;
    llvm::Value* r = quotient ? b_.CreateUDiv(a, safe) : b_.CreateURem(a, safe);
    return b_.CreateSelect(by_zero, zero, r);
  }
  llvm::Value* by_minus_one = b_.CreateICmpEQ(b, llvm::ConstantInt::getSigned(type, -1));
  llvm::Value* safe = b_.CreateSelect(b_.CreateOr(by_zero, by_minus_one), one, b);
  llvm::Value* q = b_.CreateSDiv(a, safe);
  llvm::Value* r = b_.CreateSRem(a, safe);
  // Floor variants correct toward -inf when the remainder's sign differs from the divisor's.
  llvm::Value* adjust =
      b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, safe), zero));
  llvm::Value* result = nullptr;
  switch (op) {
    case ExprOp::kDiv:
      result = b_.CreateSelect(by_minus_one, b_.CreateNeg(a), q);
      break;
    case ExprOp::kMod:
      result = r;
      break;
    case ExprOp::kFloorDiv:
      result = b_.CreateSelect(by_minus_one, b_.CreateNeg(a),
                               b_.CreateSub(q, b_.CreateZExt(adjust, type)));
      break;
    default:
      result = b_.CreateSelect(adjust, b_.CreateAdd(r, safe), r);
      break;
  }
  return b_.CreateSelect(by_zero, zero, result);
}

llvm::Value* CodeGenerator::EmitFloatDivision(ExprOp op, llvm::Value* a, llvm::Value* b) {
  if (op == ExprOp::kFloorDiv) {
    return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
  }
  // FloorMod: fmod, moved into the divisor's sign; an exact zero takes the divisor's sign.
  llvm::Value* zero = llvm::ConstantFP::get(a->getType(), 0.0);
  llvm::Value* m = b_.CreateFRem(a, b);
  llvm::Value* signs_differ = b_.CreateXor(b_.CreateFCmpOLT(m, zero), b_.CreateFCmpOLT(b, zero));
  llvm::Value* adjust = b_.CreateAnd(b_.CreateFCmpONE(m, zero), signs_differ);
  m = b_.CreateSelect(adjust, b_.CreateFAdd(m, b), m);
  llvm::Value* signed_zero = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, zero, b);
  return b_.CreateSelect(b_.CreateFCmpOEQ(m, zero), signed_zero, m);
}

llvm::Value* CodeGenerator::EmitCompare(ExprOp op, DType t, llvm::Value* a, llvm::Value* b) {
  using P = llvm::CmpInst::Predicate;
  int i = static_cast<int>(op) - static_cast<int>(ExprOp::kEq);
  if (IsFloatCompute(t)) {
    static constexpr P kFloat[] = {P::FCMP_OEQ, P::FCMP_UNE, P::FCMP_OLT,
                                   P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE};
    return b_.CreateFCmp(kFloat[i], a, b);
  }
  static constexpr P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLT,
                                  P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE};
  static constexpr P kUnsigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_ULT,
                                    P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE};
  return b_.CreateICmp(IsUnsigned(t) ? kUnsigned[i] : kSigned[i], a, b);
}

llvm::Value* CodeGenerator::EmitUnary(ExprOp op, DType t, llvm::Value* x) {
  bool is_float = IsFloatCompute(t);
  switch (op) {
    case ExprOp::kNeg:
      return is_float ? b_.CreateFNeg(x) : b_.CreateNeg(x);
    case ExprOp::kAbs:
      if (is_float) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      if (IsUnsigned(t)) return x;
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
    case ExprOp::kIsNan:
      return is_float ? b_.CreateFCmpUNO(x, x) : b_.getFalse();
    case ExprOp::kIsInf: {
      if (!is_float) return b_.getFalse();
      llvm::Value* inf = llvm::ConstantFP::getInfinity(x->getType());
      return b_.CreateFCmpOEQ(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), inf);
    }
    default:
      return EmitFloatMath(op, x);
  }
}

llvm::Value* CodeGenerator::EmitFloatMath(ExprOp op, llvm::Value* x) {
  auto unary = [&](llvm::Intrinsic::ID id) { return b_.CreateUnaryIntrinsic(id, x); };
  switch (op) {
    case ExprOp::kExp:
      return EmitExp(x);
    case ExprOp::kLog:
      return unary(llvm::Intrinsic::log);
    case ExprOp::kSqrt:
      return unary(llvm::Intrinsic::sqrt);
    case ExprOp::kRsqrt:
      return b_.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), unary(llvm::Intrinsic::sqrt));
    case ExprOp::kTanh:
      return CallLibm("tanhf", "tanh", x);
    case ExprOp::kSigmoid:
      return EmitSigmoid(x);
    case ExprOp::kErf:
      return CallLibm("erff", "erf", x);
    case ExprOp::kSin:
      return unary(llvm::Intrinsic::sin);
    case ExprOp::kCos:
      return unary(llvm::Intrinsic::cos);
    case ExprOp::kFloor:
      return unary(llvm::Intrinsic::floor);
    case ExprOp::kCeil:
      return unary(llvm::Intrinsic::ceil);
    default:
      return unary(llvm::Intrinsic::roundeven);  // kRound
  }
}

// f32: inline (F32Math::Exp), which beats libmvec's expf call and keeps a vector loop's
// scalar tail from calling libm; f64: llvm.exp (libmvec when vectorized).
llvm::Value* CodeGenerator::EmitExp(llvm::Value* x) {
  if (x->getType()->getScalarType()->isFloatTy()) {
    return F32Math{b_, x->getType()}.Exp(x);
  }
  return b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
}

// sigmoid(x) from e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) otherwise, which keeps
// full relative accuracy for large negative x (no 1 / inf underflow to 0).
llvm::Value* CodeGenerator::EmitSigmoid(llvm::Value* x) {
  llvm::Type* type = x->getType();
  llvm::Value* one = llvm::ConstantFP::get(type, 1.0);
  llvm::Value* e = EmitExp(b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
  llvm::Value* denominator = b_.CreateFAdd(one, e);
  llvm::Value* positive = b_.CreateFDiv(one, denominator);
  llvm::Value* negative = b_.CreateFDiv(e, denominator);
  return b_.CreateSelect(b_.CreateFCmpOGE(x, llvm::ConstantFP::get(type, 0.0)), positive, negative);
}

// kiln_team_size() (reads only the calling thread's seat) or kiln_team_barrier(), which
// carries no attributes: LLVM must assume it reads and writes any memory, so no access to a
// buffer moves across it.
llvm::Value* CodeGenerator::EmitTeamCall(ExprOp op) {
  if (op == ExprOp::kTeamSize) {
    llvm::FunctionCallee size = module_.getOrInsertFunction(kTeamSizeSymbol, b_.getInt64Ty());
    if (auto* f = llvm::dyn_cast<llvm::Function>(size.getCallee())) {
      f->setDoesNotThrow();
      f->setOnlyAccessesInaccessibleMemory();
      f->addFnAttr(llvm::Attribute::WillReturn);
    }
    return b_.CreateCall(size);
  }
  llvm::FunctionCallee barrier = module_.getOrInsertFunction(kTeamBarrierSymbol, b_.getInt32Ty());
  if (auto* f = llvm::dyn_cast<llvm::Function>(barrier.getCallee())) f->setDoesNotThrow();
  return b_.CreateICmpNE(b_.CreateCall(barrier), b_.getInt32(0));
}

// A libm call marked pure so the vectorizer may replace it with its libmvec variant.
// The normalized index when in range; otherwise a cold call that reports it (jit/runtime.h),
// and the index clamped so that loads through it stay inside the buffer. With a `position`
// (CheckInRange) negative values are not counted from the end, and the report carries it.
llvm::Value* CodeGenerator::EmitCheckIndex(const ExprNode& n, llvm::Value* index,
                                           llvm::Value* bound, llvm::Value* position) {
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Value* zero = b_.getInt64(0);
  llvm::Value* wrapped =
      position != nullptr
          ? index
          : b_.CreateSelect(b_.CreateICmpSLT(index, zero), b_.CreateAdd(index, bound), index);
  // One unsigned compare covers both ends: a negative value is a huge unsigned one.
  llvm::Value* ok = b_.CreateICmpULT(wrapped, bound);
  llvm::BasicBlock* report = llvm::BasicBlock::Create(ctx_, "index_error", fn_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "index_ok", fn_);
  llvm::MDBuilder mdb(ctx_);
  b_.CreateCondBr(ok, done, report, mdb.createBranchWeights(1 << 20, 1));
  b_.SetInsertPoint(report);
  llvm::FunctionCallee callee =
      position != nullptr ? module_.getOrInsertFunction(kRangeErrorSymbol, b_.getVoidTy(), i64,
                                                         i64, b_.getInt32Ty(), i64)
                          : module_.getOrInsertFunction(kIndexErrorSymbol, b_.getVoidTy(), i64,
                                                         i64, b_.getInt32Ty());
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->setDoesNotThrow();
    f->setOnlyAccessesInaccessibleMemory();  // the caller's error slot, never a kernel buffer
    f->addFnAttr(llvm::Attribute::WillReturn);
    f->addFnAttr(llvm::Attribute::Cold);
  }
  auto site = sites_.find(n.name);
  llvm::Value* site_number = b_.getInt32(site == sites_.end() ? -1 : site->second);
  if (position != nullptr) {
    b_.CreateCall(callee, {index, bound, site_number, position});
  } else {
    b_.CreateCall(callee, {index, bound, site_number});
  }
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  llvm::Value* high = b_.CreateSub(bound, b_.getInt64(1));
  llvm::Value* clamped = b_.CreateSelect(b_.CreateICmpSLT(wrapped, zero), zero,
                                         b_.CreateSelect(b_.CreateICmpSGT(wrapped, high), high,
                                                         wrapped));
  clamped = b_.CreateSelect(b_.CreateICmpSLT(clamped, zero), zero, clamped);  // bound <= 0
  return b_.CreateSelect(ok, wrapped, clamped);
}

llvm::Value* CodeGenerator::CallLibm(const char* f32_name, const char* f64_name, llvm::Value* x) {
  llvm::Type* type = x->getType();
  const char* name = type->isFloatTy() ? f32_name : f64_name;
  llvm::FunctionCallee callee = module_.getOrInsertFunction(name, type, type);
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->setDoesNotThrow();
    f->setDoesNotAccessMemory();
    f->addFnAttr(llvm::Attribute::WillReturn);
  }
  llvm::CallInst* call = b_.CreateCall(callee, {x});
  call->setDoesNotAccessMemory();
  call->setDoesNotThrow();
  return call;
}

StatusOr<llvm::Value*> CodeGenerator::EmitReduce(const ExprNode& n) {
  std::vector<llvm::Value*> extents;
  for (size_t i = 1; i < n.args.size(); ++i) {
    ASSIGN_OR_RETURN(llvm::Value * extent, EmitExpr(n.args[i]));
    extents.push_back(extent);
  }
  DType t = n.args[0].dtype();
  bool arg = n.reduce_op == ReduceOp::kArgMax || n.reduce_op == ReduceOp::kArgMin;
  llvm::AllocaInst* acc = EntryAlloca(ValueType(t), 1, "acc");
  b_.CreateStore(ReduceInit(n.reduce_op, t), acc);
  llvm::AllocaInst* best_at = arg ? EntryAlloca(b_.getInt64Ty(), 1, "acc.pos") : nullptr;
  if (arg) b_.CreateStore(b_.getInt64(0), best_at);
  RETURN_IF_ERROR(EmitLoopNest(n.axes, extents, 0, [&]() -> Status {
    ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(n.args[0]));
    llvm::Value* cur = b_.CreateLoad(acc->getAllocatedType(), acc);
    if (!arg) {
      b_.CreateStore(Combine(n.reduce_op, t, cur, v), acc);
      return Status::Ok();
    }
    llvm::Value* better = ArgBetter(n.reduce_op, t, v, cur);
    b_.CreateStore(b_.CreateSelect(better, v, cur), acc);
    // Row-major position over the axes (0 when there are none).
    llvm::Value* pos = n.axes.empty() ? b_.getInt64(0) : env_.vars.at(n.axes[0].get());
    for (size_t i = 1; i < n.axes.size(); ++i) {
      pos = b_.CreateAdd(b_.CreateMul(pos, extents[i], "", false, true),
                         env_.vars.at(n.axes[i].get()), "", false, true);
    }
    llvm::Value* old = b_.CreateLoad(b_.getInt64Ty(), best_at);
    b_.CreateStore(b_.CreateSelect(better, pos, old), best_at);
    return Status::Ok();
  }));
  if (arg) return b_.CreateLoad(b_.getInt64Ty(), best_at);
  return b_.CreateLoad(acc->getAllocatedType(), acc);
}

llvm::Value* CodeGenerator::Combine(ReduceOp op, DType t, llvm::Value* acc, llvm::Value* v) {
  bool is_float = IsFloatCompute(t);
  bool is_unsigned = IsUnsigned(t);
  // A float sum or product may be reassociated (vectorized partial sums). No signed zeros as
  // well: the SLP vectorizer, which gets the reductions the full unroller expanded (a
  // specialized kernel's constant extent, e.g. a softmax row of 49), only builds a vector tree
  // from adds that have both flags, and otherwise leaves a chain of dependent scalar adds.
  auto reassociable = [&](llvm::Value* r) {
    if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r)) {
      llvm::FastMathFlags flags;
      flags.setAllowReassoc();
      flags.setNoSignedZeros();
      flags.setAllowContract();
      inst->setFastMathFlags(flags);
    }
    return r;
  };
  switch (op) {
    case ReduceOp::kSum:
      return is_float ? reassociable(b_.CreateFAdd(acc, v)) : b_.CreateAdd(acc, v);
    case ReduceOp::kProd:
      return is_float ? reassociable(b_.CreateFMul(acc, v)) : b_.CreateMul(acc, v);
    case ReduceOp::kMax:
      return b_.CreateBinaryIntrinsic(is_float      ? llvm::Intrinsic::maximum
                                      : is_unsigned ? llvm::Intrinsic::umax
                                                    : llvm::Intrinsic::smax,
                                      acc, v);
    case ReduceOp::kMin:
      return b_.CreateBinaryIntrinsic(is_float      ? llvm::Intrinsic::minimum
                                      : is_unsigned ? llvm::Intrinsic::umin
                                                    : llvm::Intrinsic::smin,
                                      acc, v);
    default:
      return b_.CreateSelect(ArgBetter(op, t, v, acc), v, acc);
  }
}

// Arg reductions keep the first strict improvement; a NaN beats any number (numpy).
llvm::Value* CodeGenerator::ArgBetter(ReduceOp op, DType t, llvm::Value* v, llvm::Value* best) {
  bool is_max = op == ReduceOp::kArgMax;
  if (IsFloatCompute(t)) {
    llvm::Value* better = is_max ? b_.CreateFCmpOGT(v, best) : b_.CreateFCmpOLT(v, best);
    llvm::Value* first_nan = b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpORD(best, best));
    return b_.CreateOr(better, first_nan);
  }
  if (IsUnsigned(t)) return is_max ? b_.CreateICmpUGT(v, best) : b_.CreateICmpULT(v, best);
  return is_max ? b_.CreateICmpSGT(v, best) : b_.CreateICmpSLT(v, best);
}

llvm::Value* CodeGenerator::ReduceInit(ReduceOp op, DType t) {
  llvm::Type* type = ValueType(t);
  if (op == ReduceOp::kSum) return llvm::Constant::getNullValue(type);
  if (op == ReduceOp::kProd) {
    return IsFloatCompute(t) ? llvm::ConstantFP::get(type, 1.0) : llvm::ConstantInt::get(type, 1);
  }
  bool want_low = op == ReduceOp::kMax || op == ReduceOp::kArgMax;  // start below everything
  if (IsFloatCompute(t)) return llvm::ConstantFP::getInfinity(type, /*Negative=*/want_low);
  unsigned bits = type->getIntegerBitWidth();
  if (IsUnsigned(t)) {
    return b_.getInt(want_low ? llvm::APInt::getMinValue(bits) : llvm::APInt::getMaxValue(bits));
  }
  return b_.getInt(want_low ? llvm::APInt::getSignedMinValue(bits)
                            : llvm::APInt::getSignedMaxValue(bits));
}

}  // namespace kiln::jit
