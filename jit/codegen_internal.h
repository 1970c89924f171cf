// Internal to jit/: the CodeGenerator that turns one kernel's IR into LLVM IR (statements in
// codegen.cc, parallel loops in codegen_parallel.cc, expressions in codegen_expr.cc, conversions
// in codegen_cast.cc).
#ifndef KILN_JIT_CODEGEN_INTERNAL_H_
#define KILN_JIT_CODEGEN_INTERNAL_H_

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/codegen.h"
#include "jit/kernel_ir.h"

namespace kiln::jit {

/// Emits one kernel into a module. Single use; not thread-safe (the module's context is not).
class CodeGenerator {
 public:
  CodeGenerator(const Kernel& kernel, llvm::Module& module, const TargetInfo& target);

  /// Emits the entry function `symbol` with the KernelFn ABI. The kernel must be valid.
  Status EmitEntry(const std::string& symbol);

 private:
  // A buffer as seen by the code being emitted.
  struct BufferValue {
    llvm::Value* base = nullptr;
    std::vector<llvm::Value*> shape;
    std::vector<llvm::Value*> strides;
    int param = -1;  // index in Kernel::buffers, -1 for local scratch
  };
  // Everything in scope at a program point.
  struct Env {
    std::unordered_map<const ExprNode*, llvm::Value*> vars;
    std::unordered_map<const BufferNode*, BufferValue> buffers;
  };
  using LoopBody = std::function<Status(llvm::Value* index)>;

  // codegen.cc: functions, statements, loops.
  llvm::Function* NewFunction(const std::string& name, llvm::FunctionType* type, bool internal);
  void BindParams(llvm::Value* buffers, llvm::Value* shapes, llvm::Value* strides,
                  llvm::Value* dims);
  Status EmitStmt(const StmtNode* s);
  Status EmitFor(const StmtNode& s);
  Status EmitStore(const StmtNode& s);
  Status EmitLet(const StmtNode& s);
  Status EmitIf(const StmtNode& s);
  Status EmitAllocate(const StmtNode& s);
  Status EmitLoop(llvm::Value* begin, llvm::Value* end, ForKind kind, bool constant_extent,
                  const std::string& name, const LoopBody& body);
  Status EmitLoopNest(const std::vector<Var>& vars, const std::vector<llvm::Value*>& extents,
                      size_t level, const std::function<Status()>& body);
  llvm::MDNode* LoopMetadata(ForKind kind, bool constant_extent, llvm::MDNode* access_group);
  llvm::AllocaInst* EntryAlloca(llvm::Type* type, uint64_t count, const std::string& name);

  // codegen_vector.cc: a kVectorized loop of constant extent as explicit vector operations.
  // Emits it and returns true when its body is one Store to local scratch whose accesses are
  // contiguous along the loop variable and whose arithmetic is lane-wise; returns false,
  // emitting nothing, otherwise.
  StatusOr<bool> EmitVectorLoop(const StmtNode& s, llvm::Value* min, llvm::Value* extent);
  // A kVectorized loop of extent 8 around a kVectorized loop of extent 8 whose body copies an
  // element between buffers with the two loop variables swapped in their last dims: a
  // transpose tile, emitted as vector loads, shuffles and vector stores. Returns false, emitting
  // nothing, for any other loop.
  StatusOr<bool> EmitTransposeTile(const StmtNode& s, llvm::Value* min, llvm::Value* extent);
  bool UnitStride(const BufferNode* buffer);  // a known buffer whose last stride is 1
  bool ContiguousAccess(const BufferNode* buffer, const std::vector<Expr>& indices,
                        const ExprNode* var);
  bool LaneWise(const Expr& e, DType t, const ExprNode* var);
  StatusOr<llvm::Value*> EmitLanes(const Expr& e, const ExprNode* var, int64_t lanes);

  // codegen_parallel.cc: parallel loops.
  Status EmitParallelFor(const StmtNode& s, llvm::Value* begin, llvm::Value* end);
  Status EmitTeamFor(const StmtNode& s, llvm::Value* begin, llvm::Value* extent);
  // The body of `s` outlined as `void (i64 begin, i64 end, ptr ctx)` with what it captures
  // stored in a context struct; returns {function, context}.
  StatusOr<std::pair<llvm::Function*, llvm::Value*>> OutlineLoopBody(const StmtNode& s);
  StatusOr<llvm::Function*> EmitOutlinedBody(const StmtNode& s,
                                             const std::vector<const BufferNode*>& buffers,
                                             const std::vector<const ExprNode*>& vars,
                                             llvm::StructType* ctx_type);
  Env ReloadCaptures(const Env& outer, const std::vector<const BufferNode*>& buffers,
                     const std::vector<const ExprNode*>& vars, llvm::StructType* ctx_type,
                     llvm::Value* ctx);
  llvm::Value* RuntimeWork(const StmtNode& s, llvm::Value* begin, llvm::Value* end);
  llvm::Value* ValueBeforeLoop(const Expr& e);

  // codegen_expr.cc: expressions, memory access, casts, math.
  StatusOr<llvm::Value*> EmitExpr(const Expr& e);
  StatusOr<llvm::Value*> EmitLeaf(const ExprNode& n, const Expr& e);
  llvm::Value* EmitConst(const ExprNode& n);
  llvm::Value* EmitBinary(ExprOp op, DType t, llvm::Value* a, llvm::Value* b);
  llvm::Value* EmitIntDivision(ExprOp op, DType t, llvm::Value* a, llvm::Value* b);
  llvm::Value* EmitFloatDivision(ExprOp op, llvm::Value* a, llvm::Value* b);
  llvm::Value* EmitCompare(ExprOp op, DType t, llvm::Value* a, llvm::Value* b);
  llvm::Value* EmitUnary(ExprOp op, DType t, llvm::Value* x);
  llvm::Value* EmitFloatMath(ExprOp op, llvm::Value* x);
  llvm::Value* EmitExp(llvm::Value* x);
  llvm::Value* EmitSigmoid(llvm::Value* x);
  llvm::Value* CallLibm(const char* f32_name, const char* f64_name, llvm::Value* x);
  StatusOr<llvm::Value*> EmitReduce(const ExprNode& n);
  // `position` null: CheckIndex; else CheckInRange.
  llvm::Value* EmitCheckIndex(const ExprNode& n, llvm::Value* index, llvm::Value* bound,
                              llvm::Value* position);
  llvm::Value* EmitTeamCall(ExprOp op);  // kTeamSize, kTeamBarrier
  llvm::Value* Combine(ReduceOp op, DType t, llvm::Value* acc, llvm::Value* v);
  llvm::Value* ArgBetter(ReduceOp op, DType t, llvm::Value* v, llvm::Value* best);
  llvm::Value* ReduceInit(ReduceOp op, DType t);
  llvm::Value* ElementPtr(const BufferNode* buffer, const std::vector<llvm::Value*>& indices);
  llvm::Value* EmitLoadFrom(const BufferNode* buffer, const std::vector<llvm::Value*>& indices);
  void EmitStoreTo(const BufferNode* buffer, const std::vector<llvm::Value*>& indices,
                   llvm::Value* value);
  void TagAccess(llvm::Instruction* access, const BufferValue& buffer);
  llvm::Value* EmitCast(llvm::Value* v, DType from, DType to);
  llvm::Value* NonZero(llvm::Value* v, DType from);
  llvm::Value* ToF32ForNarrowing(llvm::Value* v, DType from);
  llvm::Value* RoundToOddF32(llvm::Value* v);
  llvm::Value* U64ToF64Sticky(llvm::Value* v);
  llvm::Value* F32ToBF16(llvm::Value* v);
  llvm::Value* BF16ToF32(llvm::Value* v);
  llvm::Type* ValueType(DType t);   // SSA type: i1 for bool, half for f16, i16 bits for bf16
  llvm::Type* MemoryType(DType t);  // in-memory type: i8 for bool, otherwise ValueType

  const Kernel& kernel_;
  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  const TargetInfo& target_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;  // function being emitted (entry or an outlined parallel body)
  Env env_;
  std::vector<llvm::MDNode*> access_groups_;  // of the enclosing vectorized loops
  std::vector<llvm::MDNode*> alias_scopes_;   // one per buffer param
  std::string symbol_;
  int outlined_ = 0;
  std::unordered_map<std::string, int> sites_;
  // EmitTransposeTile's transposed Load and its vector of lanes (integers of the element's
  // width), which LaneWise accepts and EmitLanes returns while a tile's epilogue is emitted.
  std::pair<const ExprNode*, llvm::Value*> lanes_given_{nullptr, nullptr};  // CheckIndex site -> its IndexCheckSites number
};

}  // namespace kiln::jit

#endif  // KILN_JIT_CODEGEN_INTERNAL_H_
