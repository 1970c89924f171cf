// Code generation for short vectorized loops as explicit LLVM vector operations.
//
// A kVectorized loop of constant extent (a GEMM tile's row of accumulators, 2 x 8 f32 with AVX2)
// used to be left to LLVM: O3 fully unrolls it, SROA turns the accumulators into scalars and the
// SLP vectorizer rebuilds vectors from them. SLP's grouping depends on the code around the loop:
// one extra store block made it group lanes across vector boundaries (columns 5..12 of a row),
// and the GEMM's K loop became xmm pieces, blends and spills, 2.3x slower, with no test to see it.
// Emitted here as whole vectors, the loop leaves nothing for SLP to regroup: each row is
// extent / lanes vector loads, FMAs and stores on lane-aligned column groups, which SROA promotes
// to vector registers. Only loops that store to local scratch, whose every access is contiguous
// along the loop variable and whose arithmetic is lane-wise are taken; the rest go to EmitLoop.
// Lane-wise means the same operations per element, so results are bit-identical to the scalar
// loop's.
#include <llvm/IR/Intrinsics.h>

#include <algorithm>

#include "jit/codegen_internal.h"

namespace kiln::jit {
namespace {

// Vectors per loop at most: beyond that the loop vectorizer handles the loop better than
// straight-line code would (code size), and no tile needs more.
constexpr int64_t kMaxVectors = 8;

bool IsVectorFloat(DType t) { return t == DType::kF32 || t == DType::kF64; }

// True when `e` reads the variable `var`.
bool Uses(const Expr& e, const ExprNode* var) {
  if (e.get() == var) return true;
  for (const Expr& arg : e->args)
    if (Uses(arg, var)) return true;
  return false;
}

// True when nothing in `e` is a reduction (whose axes would need their own loops per lane).
bool NoReduce(const Expr& e) {
  if (e->op == ExprOp::kReduce) return false;
  for (const Expr& arg : e->args)
    if (!NoReduce(arg)) return false;
  return true;
}

// `index` is var, var + x or x + var with x not reading var.
bool LaneIndex(const Expr& index, const ExprNode* var) {
  if (index.get() == var) return true;
  if (index->op != ExprOp::kAdd) return false;
  const Expr &a = index->args[0], &b = index->args[1];
  return (a.get() == var && !Uses(b, var)) || (b.get() == var && !Uses(a, var));
}

// The masks of the 8 x 8 register transpose (AVX's unpacklo/hi, shuffle_ps and permute2f128
// written as shufflevector, so they hold for any element type and any vector width the target
// has; LLVM picks the instructions).
constexpr int kUnpackLo[8] = {0, 8, 1, 9, 4, 12, 5, 13};
constexpr int kUnpackHi[8] = {2, 10, 3, 11, 6, 14, 7, 15};
constexpr int kPairsLo[8] = {0, 1, 8, 9, 4, 5, 12, 13};
constexpr int kPairsHi[8] = {2, 3, 10, 11, 6, 7, 14, 15};
constexpr int kHalvesLo[8] = {0, 1, 2, 3, 8, 9, 10, 11};
constexpr int kHalvesHi[8] = {4, 5, 6, 7, 12, 13, 14, 15};

}  // namespace

bool CodeGenerator::UnitStride(const BufferNode* buffer) {
  auto it = env_.buffers.find(buffer);
  if (it == env_.buffers.end() || it->second.strides.empty()) return false;
  auto* stride = llvm::dyn_cast<llvm::ConstantInt>(it->second.strides.back());
  return stride && stride->isOne();
}

bool CodeGenerator::ContiguousAccess(const BufferNode* buffer, const std::vector<Expr>& indices,
                                     const ExprNode* var) {
  if (indices.empty() || !IsVectorFloat(buffer->dtype) || !LaneIndex(indices.back(), var))
    return false;
  for (size_t d = 0; d + 1 < indices.size(); ++d)
    if (Uses(indices[d], var) || !NoReduce(indices[d])) return false;
  auto it = env_.buffers.find(buffer);
  if (it == env_.buffers.end()) return false;
  auto* stride = llvm::dyn_cast<llvm::ConstantInt>(it->second.strides.back());
  return stride && stride->isOne();
}

bool CodeGenerator::LaneWise(const Expr& e, DType t, const ExprNode* var) {
  if (e.get() == lanes_given_.first) return e.dtype() == t;
  if (e.dtype() != t || !NoReduce(e)) return false;
  if (!Uses(e, var)) return true;  // one scalar, splat
  switch (e->op) {
    case ExprOp::kLoad:
      return ContiguousAccess(e->buffer.get(), e->args, var);
    case ExprOp::kAdd:
    case ExprOp::kSub:
    case ExprOp::kMul:
    case ExprOp::kDiv:
    case ExprOp::kMin:
    case ExprOp::kMax:
    case ExprOp::kMulAdd:
      for (const Expr& arg : e->args)
        if (!LaneWise(arg, t, var)) return false;
      return true;
    default:
      return false;  // the loop variable itself, casts, comparisons, selects, math calls
  }
}

StatusOr<llvm::Value*> CodeGenerator::EmitLanes(const Expr& e, const ExprNode* var, int64_t lanes) {
  const DType t = e.dtype();
  llvm::Type* vector = llvm::FixedVectorType::get(ValueType(t), static_cast<unsigned>(lanes));
  if (e.get() == lanes_given_.first) return b_.CreateBitCast(lanes_given_.second, vector);
  if (!Uses(e, var)) {
    ASSIGN_OR_RETURN(llvm::Value * scalar, EmitExpr(e));
    return b_.CreateVectorSplat(static_cast<unsigned>(lanes), scalar);
  }
  std::vector<llvm::Value*> args;
  if (e->op == ExprOp::kLoad) {
    for (const Expr& arg : e->args) {
      ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(arg));
      args.push_back(v);
    }
    llvm::LoadInst* load =
        b_.CreateAlignedLoad(vector, ElementPtr(e->buffer.get(), args), llvm::Align(DTypeSize(t)));
    TagAccess(load, env_.buffers.at(e->buffer.get()));
    return load;
  }
  for (const Expr& arg : e->args) {
    ASSIGN_OR_RETURN(llvm::Value * v, EmitLanes(arg, var, lanes));
    args.push_back(v);
  }
  if (e->op == ExprOp::kMulAdd) return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vector}, args);
  return EmitBinary(e->op, t, args[0], args[1]);  // IRBuilder's float ops take vectors as well
}

StatusOr<bool> CodeGenerator::EmitVectorLoop(const StmtNode& s, llvm::Value* min,
                                             llvm::Value* extent) {
  auto* count = llvm::dyn_cast<llvm::ConstantInt>(extent);
  const StmtNode& store = *s.body[0];
  // Only loops that write local scratch (a GEMM tile's accumulators and partial sums): loops
  // writing a kernel's outputs (epilogues, elementwise ops) keep LLVM's loop vectorizer, which
  // served them well (gemm_bench's 64x8000x256 + bias was 3-5% slower with its epilogue here).
  if (!count || store.op != StmtOp::kStore) return false;
  auto bound = env_.buffers.find(store.buffer.get());
  if (bound == env_.buffers.end() || bound->second.param >= 0) return false;
  const DType t = store.buffer->dtype;
  const int64_t lanes = (target_.has_avx512f ? 64 : target_.has_avx2 ? 32 : 16) / DTypeSize(t);
  const int64_t n = count->getSExtValue();
  if (n <= 0 || n % lanes != 0 || n / lanes > kMaxVectors) return false;
  const ExprNode* var = s.var.get();
  std::vector<Expr> indices(store.exprs.begin(), store.exprs.end() - 1);
  if (!ContiguousAccess(store.buffer.get(), indices, var) || !LaneWise(store.exprs.back(), t, var))
    return false;
  // Each group of `lanes` iterations at once, in order, as straight-line code.
  auto group = [&](int64_t first) -> Status {
    env_.vars[var] = b_.CreateAdd(min, b_.getInt64(first), s.var.name(), false, true);
    ASSIGN_OR_RETURN(llvm::Value * value, EmitLanes(store.exprs.back(), var, lanes));
    std::vector<llvm::Value*> at;
    for (const Expr& index : indices) {
      ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(index));
      at.push_back(v);
    }
    llvm::StoreInst* out =
        b_.CreateAlignedStore(value, ElementPtr(store.buffer.get(), at), llvm::Align(DTypeSize(t)));
    TagAccess(out, env_.buffers.at(store.buffer.get()));
    return Status::Ok();
  };
  Status status = Status::Ok();
  for (int64_t first = 0; first < n && status.ok(); first += lanes) status = group(first);
  env_.vars.erase(var);
  RETURN_IF_ERROR(status);
  return true;
}

// A Store, or Lets around one.
bool StoreUnderLets(const StmtNode& s) {
  const StmtNode* at = &s;
  while (at->op == StmtOp::kLet) at = at->body[0].get();
  return at->op == StmtOp::kStore;
}

// `e` with the variables of `bound` replaced by their values (nodes rebuilt only where changed).
Expr Substitute(const Expr& e, const std::unordered_map<const ExprNode*, Expr>& bound) {
  if (bound.empty()) return e;
  if (e->op == ExprOp::kVar) {
    auto it = bound.find(e.get());
    return it == bound.end() ? e : it->second;
  }
  if (e->op == ExprOp::kReduce) return e;  // its axes are its own; LaneWise rejects it anyway
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr& arg : e->args) {
    args.push_back(Substitute(arg, bound));
    changed |= args.back().get() != arg.get();
  }
  if (!changed) return e;
  auto node = std::make_shared<ExprNode>(*e);
  node->args = std::move(args);
  return Expr(std::move(node));
}

// The Loads in `e` whose last index walks `a` (and reads not `b`) and whose other indices read
// not `a`: the transposed reads of a transpose tile (one distinct node where it fits).
void TransposedLoads(const Expr& e, const ExprNode* a, const ExprNode* b,
                     std::vector<const ExprNode*>* found) {
  if (e->op == ExprOp::kLoad) {
    const std::vector<Expr>& index = e->args;
    if (index.empty() || !LaneIndex(index.back(), a) || Uses(index.back(), b) ||
        !NoReduce(index.back()))
      return;
    for (size_t d = 0; d + 1 < index.size(); ++d)
      if (Uses(index[d], a) || !NoReduce(index[d])) return;
    if (std::find(found->begin(), found->end(), e.get()) == found->end()) found->push_back(e.get());
    return;
  }
  for (const Expr& arg : e->args) TransposedLoads(arg, a, b, found);
}

// Matches For(a, 8, vectorized, For(b, b0, 8, vectorized, Store(out, [..., x + b], value))) where
// value is Load(in, [..., y + a]) (any dtype) or, for f32/f64, lane-wise arithmetic along b on
// one such Load (a fused epilogue: out = transpose(in) + residual): out's last index walks b and
// no other index reads b, in's last index walks a and no other reads a, both unit stride. The
// tile is then 8 vector loads along a (one per b), a transpose in registers and 8 vector stores
// along b, instead of 64 strided element accesses (the loop vectorizer's gathers or scalar
// loads).
StatusOr<bool> CodeGenerator::EmitTransposeTile(const StmtNode& s, llvm::Value* min,
                                                llvm::Value* extent) {
  constexpr int64_t kN = 8;
  auto* count = llvm::dyn_cast<llvm::ConstantInt>(extent);
  if (!count || count->getSExtValue() != kN || s.body[0]->op != StmtOp::kFor) return false;
  const StmtNode& inner = *s.body[0];
  const ExprNode* a = s.var.get();
  const ExprNode* b = inner.var.get();
  if (inner.for_kind != ForKind::kVectorized || inner.exprs[1]->op != ExprOp::kIntImm ||
      inner.exprs[1]->int_value != kN || Uses(inner.exprs[0], a) ||
      !StoreUnderLets(*inner.body[0]))
    return false;
  // A fused epilogue binds its operands with Lets around the Store: substituted into the value.
  std::unordered_map<const ExprNode*, Expr> bound;
  const StmtNode* at_store = inner.body[0].get();
  for (; at_store->op == StmtOp::kLet; at_store = at_store->body[0].get())
    bound[at_store->var.get()] = Substitute(at_store->exprs[0], bound);
  const StmtNode& store = *at_store;
  std::vector<Expr> out_index;
  for (size_t d = 0; d + 1 < store.exprs.size(); ++d)
    out_index.push_back(Substitute(store.exprs[d], bound));
  const Expr value = Substitute(store.exprs.back(), bound);
  std::vector<const ExprNode*> loads;
  TransposedLoads(value, a, b, &loads);
  const ExprNode* load = loads.size() == 1 ? loads[0] : nullptr;
  if (!load || load->buffer.get() == store.buffer.get() ||
      load->buffer->dtype != store.buffer->dtype || !UnitStride(store.buffer.get()) ||
      !UnitStride(load->buffer.get()))
    return false;
  const bool epilogue = value.get() != load;
  if (epilogue) {
    if (!IsVectorFloat(store.buffer->dtype)) return false;
    lanes_given_ = {load, nullptr};
    bool lane_wise = LaneWise(value, store.buffer->dtype, b);
    lanes_given_ = {};
    if (!lane_wise) return false;
  }
  const std::vector<Expr>& in_index = load->args;
  // Each side reads its own loop variable only in its last index (the vector's lanes).
  auto walks = [](const std::vector<Expr>& index, const ExprNode* lane, const ExprNode* other) {
    if (index.empty() || !LaneIndex(index.back(), lane) || Uses(index.back(), other)) return false;
    for (size_t d = 0; d + 1 < index.size(); ++d)
      if (Uses(index[d], lane) || !NoReduce(index[d])) return false;
    return NoReduce(index.back());
  };
  if (!walks(out_index, b, a) || !walks(in_index, a, b)) return false;
  if (epilogue && !ContiguousAccess(store.buffer.get(), out_index, b)) return false;

  const DType t = store.buffer->dtype;
  // Pure data movement: integers of the element's width carry every dtype bit for bit.
  llvm::Type* vector = llvm::FixedVectorType::get(
      b_.getIntNTy(static_cast<unsigned>(8 * DTypeSize(t))), static_cast<unsigned>(kN));
  const llvm::Align align(DTypeSize(t));
  ASSIGN_OR_RETURN(llvm::Value * b_min, EmitExpr(inner.exprs[0]));
  auto address = [&](const BufferNode* buffer, const std::vector<Expr>& index)
      -> StatusOr<llvm::Value*> {
    std::vector<llvm::Value*> at;
    for (const Expr& e : index) {
      ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(e));
      at.push_back(v);
    }
    return ElementPtr(buffer, at);
  };
  std::vector<llvm::Value*> rows(kN);  // rows[j][i] = in at a = i, b = j
  Status status = Status::Ok();
  env_.vars[a] = min;
  for (int64_t j = 0; j < kN && status.ok(); ++j) {
    env_.vars[b] = b_.CreateAdd(b_min, b_.getInt64(j), inner.var.name(), false, true);
    StatusOr<llvm::Value*> at = address(load->buffer.get(), in_index);
    if (!at.ok()) {
      status = at.status();
      break;
    }
    llvm::LoadInst* row = b_.CreateAlignedLoad(vector, *at, align);
    TagAccess(row, env_.buffers.at(load->buffer.get()));
    rows[j] = row;
  }
  if (status.ok()) {
    auto shuffle = [&](llvm::Value* x, llvm::Value* y, const int* mask) {
      return b_.CreateShuffleVector(x, y, llvm::ArrayRef<int>(mask, kN));
    };
    std::vector<llvm::Value*> t1(kN), t2(kN), cols(kN);
    for (int k = 0; k < kN; k += 2) {
      t1[k] = shuffle(rows[k], rows[k + 1], kUnpackLo);
      t1[k + 1] = shuffle(rows[k], rows[k + 1], kUnpackHi);
    }
    for (int k = 0; k < kN; k += 4) {
      t2[k] = shuffle(t1[k], t1[k + 2], kPairsLo);
      t2[k + 1] = shuffle(t1[k], t1[k + 2], kPairsHi);
      t2[k + 2] = shuffle(t1[k + 1], t1[k + 3], kPairsLo);
      t2[k + 3] = shuffle(t1[k + 1], t1[k + 3], kPairsHi);
    }
    for (int k = 0; k < kN / 2; ++k) {
      cols[k] = shuffle(t2[k], t2[k + 4], kHalvesLo);
      cols[k + kN / 2] = shuffle(t2[k], t2[k + 4], kHalvesHi);
    }
    env_.vars[b] = b_min;
    for (int64_t i = 0; i < kN && status.ok(); ++i) {
      env_.vars[a] = b_.CreateAdd(min, b_.getInt64(i), s.var.name(), false, true);
      llvm::Value* col = cols[i];
      if (epilogue) {
        lanes_given_ = {load, col};
        StatusOr<llvm::Value*> lanes = EmitLanes(value, b, kN);
        lanes_given_ = {};
        if (!lanes.ok()) {
          status = lanes.status();
          break;
        }
        col = *lanes;
      }
      StatusOr<llvm::Value*> at = address(store.buffer.get(), out_index);
      if (!at.ok()) {
        status = at.status();
        break;
      }
      llvm::StoreInst* out = b_.CreateAlignedStore(col, *at, align);
      TagAccess(out, env_.buffers.at(store.buffer.get()));
    }
  }
  env_.vars.erase(a);
  env_.vars.erase(b);
  RETURN_IF_ERROR(status);
  return true;
}

}  // namespace kiln::jit
