// Code generation for dtype conversions, f16/bf16 storage types included (round to nearest even).
#include <llvm/IR/Intrinsics.h>

#include "jit/codegen_internal.h"

namespace kiln::jit {
namespace {

bool IsFloatCompute(DType t) { return t == DType::kF32 || t == DType::kF64; }

}  // namespace

llvm::Value* CodeGenerator::EmitCast(llvm::Value* v, DType from, DType to) {
  if (from == to) return v;
  if (to == DType::kBool) return NonZero(v, from);
  if (from == DType::kBool) {
    v = b_.CreateZExt(v, b_.getInt8Ty());
    from = DType::kU8;
  } else if (from == DType::kF16) {
    v = b_.CreateFPExt(v, b_.getFloatTy());  // exact
    from = DType::kF32;
  } else if (from == DType::kBF16) {
    v = BF16ToF32(v);  // exact
    from = DType::kF32;
  }
  if (from == to) return v;
  if (to == DType::kF16) return b_.CreateFPTrunc(ToF32ForNarrowing(v, from), b_.getHalfTy());
  if (to == DType::kBF16) return F32ToBF16(ToF32ForNarrowing(v, from));
  llvm::Type* dst = ValueType(to);
  bool from_unsigned = IsUnsignedInteger(from);
  if (IsFloatCompute(from) && IsFloatCompute(to)) {
    return from == DType::kF32 ? b_.CreateFPExt(v, dst) : b_.CreateFPTrunc(v, dst);
  }
  if (IsFloatCompute(to)) return from_unsigned ? b_.CreateUIToFP(v, dst) : b_.CreateSIToFP(v, dst);
  if (IsFloatCompute(from)) {  // saturating, NaN -> 0
    auto id = IsUnsignedInteger(to) ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
    return b_.CreateIntrinsic(id, {dst, v->getType()}, {v});
  }
  return b_.CreateIntCast(v, dst, /*isSigned=*/!from_unsigned);
}

llvm::Value* CodeGenerator::NonZero(llvm::Value* v, DType from) {
  switch (from) {
    case DType::kBool:
      return v;
    case DType::kBF16:
      return b_.CreateICmpNE(b_.CreateAnd(v, b_.getInt16(0x7fff)), b_.getInt16(0));
    case DType::kF16:
    case DType::kF32:
    case DType::kF64:
      return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));  // NaN -> true
    default:
      return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
}

// An f32 from which one more round-to-nearest-even step to f16/bf16 gives the correctly rounded
// result: exact where f32 can hold the value, otherwise rounded to odd (no double rounding).
llvm::Value* CodeGenerator::ToF32ForNarrowing(llvm::Value* v, DType from) {
  switch (from) {
    case DType::kF32:
      return v;
    case DType::kF64:
      return RoundToOddF32(v);
    case DType::kI8:
    case DType::kI16:
      return b_.CreateSIToFP(v, b_.getFloatTy());
    case DType::kU8:
    case DType::kU16:
      return b_.CreateUIToFP(v, b_.getFloatTy());
    case DType::kI32:
      return RoundToOddF32(b_.CreateSIToFP(v, b_.getDoubleTy()));  // exact in f64
    case DType::kU32:
      return RoundToOddF32(b_.CreateUIToFP(v, b_.getDoubleTy()));
    case DType::kU64:
      return RoundToOddF32(U64ToF64Sticky(v));
    default: {  // i64: the magnitude as u64 (|INT64_MIN| = 2^63 fits), the sign put back after
      llvm::Value* negative = b_.CreateICmpSLT(v, b_.getInt64(0));
      llvm::Value* magnitude = b_.CreateSelect(negative, b_.CreateNeg(v), v);
      llvm::Value* f = RoundToOddF32(U64ToF64Sticky(magnitude));
      return b_.CreateSelect(negative, b_.CreateFNeg(f), f);
    }
  }
}

// A u64 as an f64 that rounds to f32 (to odd) as the integer itself would: below 2^40 exact;
// above, bits 0-11 are folded into a sticky bit 12, leaving at most 52 significant bits (exact
// in f64) while every bit an f32 keeps (bit 17 and up) and whether any lower one was set survive.
llvm::Value* CodeGenerator::U64ToF64Sticky(llvm::Value* v) {
  llvm::Value* low = b_.CreateAnd(v, b_.getInt64(0xfff));
  llvm::Value* sticky =
      b_.CreateSelect(b_.CreateICmpNE(low, b_.getInt64(0)), b_.getInt64(0x1000), b_.getInt64(0));
  llvm::Value* folded = b_.CreateOr(b_.CreateAnd(v, b_.getInt64(~int64_t{0xfff})), sticky);
  llvm::Value* big = b_.CreateICmpUGE(v, b_.getInt64(int64_t{1} << 40));
  return b_.CreateUIToFP(b_.CreateSelect(big, folded, v), b_.getDoubleTy());
}

// f64 -> f32 rounding to odd: truncate toward zero, and set the last bit if anything was lost.
llvm::Value* CodeGenerator::RoundToOddF32(llvm::Value* x) {
  llvm::Value* r = b_.CreateFPTrunc(x, b_.getFloatTy());
  llvm::Value* back = b_.CreateFPExt(r, b_.getDoubleTy());
  llvm::Value* inexact = b_.CreateFCmpONE(back, x);  // false for NaN
  llvm::Value* away = b_.CreateFCmpOGT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                       b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
  llvm::Value* bits = b_.CreateBitCast(r, b_.getInt32Ty());
  bits = b_.CreateSelect(b_.CreateAnd(inexact, away), b_.CreateSub(bits, b_.getInt32(1)), bits);
  bits = b_.CreateSelect(inexact, b_.CreateOr(bits, b_.getInt32(1)), bits);
  return b_.CreateBitCast(bits, b_.getFloatTy());
}

// f32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
llvm::Value* CodeGenerator::F32ToBF16(llvm::Value* x) {
  llvm::Value* bits = b_.CreateBitCast(x, b_.getInt32Ty());
  llvm::Value* high = b_.CreateLShr(bits, 16);
  llvm::Value* lsb = b_.CreateAnd(high, b_.getInt32(1));
  llvm::Value* rounded =
      b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(bits, b_.getInt32(0x7fff)), lsb), 16);
  llvm::Value* quiet_nan = b_.CreateOr(high, b_.getInt32(0x40));
  llvm::Value* result = b_.CreateSelect(b_.CreateFCmpUNO(x, x), quiet_nan, rounded);
  return b_.CreateTrunc(result, b_.getInt16Ty());
}

llvm::Value* CodeGenerator::BF16ToF32(llvm::Value* v) {
  llvm::Value* bits = b_.CreateShl(b_.CreateZExt(v, b_.getInt32Ty()), 16);
  return b_.CreateBitCast(bits, b_.getFloatTy());
}

}  // namespace kiln::jit
