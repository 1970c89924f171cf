// Code generation for kernel statements to LLVM IR: the ABI entry, loops, lets, ifs and scratch.
#include "jit/codegen.h"

#include <llvm/IR/DiagnosticHandler.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "jit/codegen_internal.h"

namespace kiln::jit {
namespace {

// Keeps LLVM diagnostics off stderr and, for errors, from exiting the process: errors are
// appended to a string the caller turns into a Status.
class DiagnosticCollector : public llvm::DiagnosticHandler {
 public:
  explicit DiagnosticCollector(std::shared_ptr<std::string> errors) : errors_(std::move(errors)) {}

  bool handleDiagnostics(const llvm::DiagnosticInfo& info) override {
    if (info.getSeverity() != llvm::DS_Error) return true;
    llvm::raw_string_ostream os(*errors_);
    llvm::DiagnosticPrinterRawOStream printer(os);
    if (!errors_->empty()) os << "; ";
    info.print(printer);
    return true;
  }

 private:
  std::shared_ptr<std::string> errors_;
};

}  // namespace

CodeGenerator::CodeGenerator(const Kernel& kernel, llvm::Module& module, const TargetInfo& target)
    : kernel_(kernel), module_(module), ctx_(module.getContext()), target_(target), b_(ctx_) {
  llvm::MDBuilder mdb(ctx_);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain("kiln." + kernel.name);
  for (const Buffer& b : kernel.buffers) {
    alias_scopes_.push_back(mdb.createAnonymousAliasScope(domain, b->name));
  }
  // One scope for all local scratch: lets alias analysis separate scratch from params even when
  // unrolling gives a scratch buffer too many uses for capture tracking to follow.
  alias_scopes_.push_back(mdb.createAnonymousAliasScope(domain, "locals"));
  std::vector<std::string> sites = IndexCheckSites(kernel);
  for (size_t i = 0; i < sites.size(); ++i) sites_.emplace(sites[i], static_cast<int>(i));
}

llvm::Function* CodeGenerator::NewFunction(const std::string& name, llvm::FunctionType* type,
                                           bool internal) {
  auto linkage = internal ? llvm::Function::InternalLinkage : llvm::Function::ExternalLinkage;
  llvm::Function* f = llvm::Function::Create(type, linkage, name, module_);
  f->setDoesNotThrow();
  f->addFnAttr("target-cpu", target_.cpu);
  f->addFnAttr("target-features", target_.features);
  // Without this the vectorizer may settle for 256-bit vectors on some AVX-512 parts.
  if (target_.has_avx512f) f->addFnAttr("prefer-vector-width", "512");
  return f;
}

Status CodeGenerator::EmitEntry(const std::string& symbol) {
  symbol_ = symbol;
  llvm::Type* ptr = b_.getPtrTy();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, ptr}, false);
  fn_ = NewFunction(symbol, type, /*internal=*/false);
  for (unsigned i = 0; i < 4; ++i) {
    fn_->addParamAttr(i, llvm::Attribute::NoCapture);
    fn_->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
  BindParams(fn_->getArg(0), fn_->getArg(1), fn_->getArg(2), fn_->getArg(3));
  RETURN_IF_ERROR(EmitStmt(kernel_.body.get()));
  b_.CreateRetVoid();
  return Status::Ok();
}

void CodeGenerator::BindParams(llvm::Value* buffers, llvm::Value* shapes, llvm::Value* strides,
                               llvm::Value* dims) {
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Type* i64 = b_.getInt64Ty();
  auto load_at = [&](llvm::Type* type, llvm::Value* base, uint64_t i, const std::string& name) {
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(type, base, i);
    return b_.CreateAlignedLoad(type, slot, llvm::Align(8), name);
  };
  for (size_t i = 0; i < kernel_.buffers.size(); ++i) {
    const BufferNode& node = *kernel_.buffers[i];
    BufferValue bv;
    bv.param = static_cast<int>(i);
    bv.base = load_at(ptr, buffers, i, node.name);
    if (node.rank > 0) {
      llvm::Value* shape = load_at(ptr, shapes, i, node.name + ".shape");
      for (int d = 0; d < node.rank; ++d) {
        bv.shape.push_back(load_at(i64, shape, d, node.name + ".d" + std::to_string(d)));
      }
      bv.strides.assign(node.rank, b_.getInt64(1));
      if (node.contiguous) {
        for (int d = node.rank - 2; d >= 0; --d) {
          bv.strides[d] = b_.CreateMul(bv.strides[d + 1], bv.shape[d + 1], "", false, true);
        }
      } else {
        llvm::Value* stride = load_at(ptr, strides, i, node.name + ".strides");
        for (int d = 0; d < node.rank; ++d) {
          bv.strides[d] = load_at(i64, stride, d, node.name + ".s" + std::to_string(d));
        }
      }
    }
    env_.buffers[kernel_.buffers[i].get()] = std::move(bv);
  }
  for (size_t j = 0; j < kernel_.dims.size(); ++j) {
    env_.vars[kernel_.dims[j].get()] = load_at(i64, dims, j, kernel_.dims[j].name());
  }
}

llvm::AllocaInst* CodeGenerator::EntryAlloca(llvm::Type* type, uint64_t count,
                                             const std::string& name) {
  llvm::BasicBlock& entry = fn_->getEntryBlock();
  llvm::IRBuilder<> at(&entry, entry.begin());
  llvm::AllocaInst* a = at.CreateAlloca(type, at.getInt64(count), name);
  a->setAlignment(llvm::Align(64));
  return a;
}

Status CodeGenerator::EmitStmt(const StmtNode* s) {
  switch (s->op) {
    case StmtOp::kFor:
      return EmitFor(*s);
    case StmtOp::kStore:
      return EmitStore(*s);
    case StmtOp::kLet:
      return EmitLet(*s);
    case StmtOp::kIf:
      return EmitIf(*s);
    case StmtOp::kAllocate:
      return EmitAllocate(*s);
    case StmtOp::kSeq:
      for (const auto& child : s->body) RETURN_IF_ERROR(EmitStmt(child.get()));
      return Status::Ok();
  }
  return Internal("unknown statement");
}

Status CodeGenerator::EmitFor(const StmtNode& s) {
  ASSIGN_OR_RETURN(llvm::Value * min, EmitExpr(s.exprs[0]));
  ASSIGN_OR_RETURN(llvm::Value * extent, EmitExpr(s.exprs[1]));
  llvm::Value* end = b_.CreateAdd(min, extent, s.var.name() + ".end", false, true);
  if (s.for_kind == ForKind::kParallel) return EmitParallelFor(s, min, end);
  if (s.for_kind == ForKind::kTeam) return EmitTeamFor(s, min, extent);
  if (s.for_kind == ForKind::kVectorized) {
    ASSIGN_OR_RETURN(bool emitted, EmitTransposeTile(s, min, extent));
    if (emitted) return Status::Ok();
    ASSIGN_OR_RETURN(emitted, EmitVectorLoop(s, min, extent));
    if (emitted) return Status::Ok();
  }
  // kVectorized is for innermost loops: around another loop (a transpose tile that did not
  // match) LLVM's vectorizer would only get in the way of the inner one.
  ForKind kind = s.for_kind == ForKind::kVectorized && s.body[0]->op == StmtOp::kFor
                     ? ForKind::kSerial
                     : s.for_kind;
  bool constant = llvm::isa<llvm::ConstantInt>(extent);
  return EmitLoop(min, end, kind, constant, s.var.name(), [&](llvm::Value* index) {
    env_.vars[s.var.get()] = index;
    Status status = EmitStmt(s.body[0].get());
    env_.vars.erase(s.var.get());
    return status;
  });
}

Status CodeGenerator::EmitLoop(llvm::Value* begin, llvm::Value* end, ForKind kind,
                               bool constant_extent, const std::string& name,
                               const LoopBody& body) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx_, name + ".loop", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn_);
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), loop, exit);
  b_.SetInsertPoint(loop);
  llvm::PHINode* index = b_.CreatePHI(b_.getInt64Ty(), 2, name);
  index->addIncoming(begin, pre);
  llvm::MDNode* group = nullptr;
  if (kind == ForKind::kVectorized) {
    group = llvm::MDNode::getDistinct(ctx_, {});
    access_groups_.push_back(group);
  }
  Status status = body(index);
  if (group) access_groups_.pop_back();
  RETURN_IF_ERROR(status);
  llvm::Value* next = b_.CreateAdd(index, b_.getInt64(1), name + ".next", true, true);
  llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpSLT(next, end), loop, exit);
  back->setMetadata(llvm::LLVMContext::MD_loop, LoopMetadata(kind, constant_extent, group));
  index->addIncoming(next, b_.GetInsertBlock());
  b_.SetInsertPoint(exit);
  return Status::Ok();
}

llvm::MDNode* CodeGenerator::LoopMetadata(ForKind kind, bool constant_extent,
                                          llvm::MDNode* access_group) {
  auto flag = [&](const char* name) {
    return llvm::MDNode::get(ctx_, llvm::MDString::get(ctx_, name));
  };
  auto pair = [&](const char* name, llvm::Metadata* value) {
    return llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name), value});
  };
  auto constant = [&](llvm::Constant* c) { return llvm::ConstantAsMetadata::get(c); };
  std::vector<llvm::Metadata*> ops = {nullptr, flag("llvm.loop.mustprogress")};
  if (kind == ForKind::kVectorized) {
    ops.push_back(pair("llvm.loop.vectorize.enable", constant(b_.getTrue())));
    ops.push_back(pair("llvm.loop.parallel_accesses", access_group));
  } else if (kind == ForKind::kUnrolled) {
    ops.push_back(constant_extent ? flag("llvm.loop.unroll.full")
                                  : pair("llvm.loop.unroll.count", constant(b_.getInt32(4))));
  }
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
  md->replaceOperandWith(0, md);
  return md;
}

Status CodeGenerator::EmitStore(const StmtNode& s) {
  std::vector<llvm::Value*> indices;
  for (size_t i = 0; i + 1 < s.exprs.size(); ++i) {
    ASSIGN_OR_RETURN(llvm::Value * index, EmitExpr(s.exprs[i]));
    indices.push_back(index);
  }
  ASSIGN_OR_RETURN(llvm::Value * value, EmitExpr(s.exprs.back()));
  EmitStoreTo(s.buffer.get(), indices, value);
  return Status::Ok();
}

Status CodeGenerator::EmitLet(const StmtNode& s) {
  ASSIGN_OR_RETURN(llvm::Value * value, EmitExpr(s.exprs[0]));
  value->setName(s.var.name());
  env_.vars[s.var.get()] = value;
  Status status = EmitStmt(s.body[0].get());
  env_.vars.erase(s.var.get());
  return status;
}

Status CodeGenerator::EmitIf(const StmtNode& s) {
  ASSIGN_OR_RETURN(llvm::Value * cond, EmitExpr(s.exprs[0]));
  auto* then_block = llvm::BasicBlock::Create(ctx_, "then", fn_);
  auto* merge = llvm::BasicBlock::Create(ctx_, "endif", fn_);
  auto* else_block = s.body.size() > 1 ? llvm::BasicBlock::Create(ctx_, "else", fn_) : merge;
  b_.CreateCondBr(cond, then_block, else_block);
  b_.SetInsertPoint(then_block);
  RETURN_IF_ERROR(EmitStmt(s.body[0].get()));
  b_.CreateBr(merge);
  if (s.body.size() > 1) {
    b_.SetInsertPoint(else_block);
    RETURN_IF_ERROR(EmitStmt(s.body[1].get()));
    b_.CreateBr(merge);
  }
  b_.SetInsertPoint(merge);
  return Status::Ok();
}

Status CodeGenerator::EmitAllocate(const StmtNode& s) {
  const BufferNode& node = *s.buffer;
  BufferValue bv;
  uint64_t count = 1;
  for (int64_t d : node.local_shape) count *= static_cast<uint64_t>(d);
  bv.base = EntryAlloca(MemoryType(node.dtype), count, node.name);
  bv.strides.assign(node.rank, b_.getInt64(1));
  for (int d = node.rank - 1; d >= 0; --d) {
    bv.shape.insert(bv.shape.begin(), b_.getInt64(node.local_shape[d]));
    if (d + 1 < node.rank) {
      int64_t inner = llvm::cast<llvm::ConstantInt>(bv.strides[d + 1])->getSExtValue();
      bv.strides[d] = b_.getInt64(inner * node.local_shape[d + 1]);
    }
  }
  env_.buffers[s.buffer.get()] = std::move(bv);
  Status status = EmitStmt(s.body[0].get());
  env_.buffers.erase(s.buffer.get());
  return status;
}

Status CodeGenerator::EmitLoopNest(const std::vector<Var>& vars,
                                   const std::vector<llvm::Value*>& extents, size_t level,
                                   const std::function<Status()>& body) {
  if (level == vars.size()) return body();
  bool constant = llvm::isa<llvm::ConstantInt>(extents[level]);
  return EmitLoop(b_.getInt64(0), extents[level], ForKind::kSerial, constant, vars[level].name(),
                  [&](llvm::Value* index) {
                    env_.vars[vars[level].get()] = index;
                    Status status = EmitLoopNest(vars, extents, level + 1, body);
                    env_.vars.erase(vars[level].get());
                    return status;
                  });
}

KernelModule::KernelModule() = default;
KernelModule::KernelModule(KernelModule&&) noexcept = default;
KernelModule& KernelModule::operator=(KernelModule&&) noexcept = default;
KernelModule::~KernelModule() {
  module.reset();  // the module must die before its context
}

StatusOr<KernelModule> GenerateModule(const Kernel& kernel, const std::string& symbol,
                                      const TargetInfo& target, const CodegenOptions& options) {
  RETURN_IF_ERROR(ValidateKernel(kernel));
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> machine,
                   CreateTargetMachine(target, options.first_tier));
  KernelModule out;
  out.context = std::make_unique<llvm::LLVMContext>();
  out.llvm_errors = std::make_shared<std::string>();
  out.context->setDiagnosticHandler(std::make_unique<DiagnosticCollector>(out.llvm_errors));
  out.module = std::make_unique<llvm::Module>("kiln." + kernel.name, *out.context);
  out.module->setTargetTriple(target.triple);
  out.module->setDataLayout(machine->createDataLayout());
  out.symbol = symbol;
  Status status = CodeGenerator(kernel, *out.module, target).EmitEntry(symbol);
  if (!status.ok()) return status.WithContext("kernel '" + kernel.name + "'");
  std::string problems;
  llvm::raw_string_ostream os(problems);
  // The last guard before ORC: IR the validator let through (a payload from a file) but LLVM
  // would reject, or crash on, is an error in the kernel, not in kiln.
  if (llvm::verifyModule(*out.module, &os)) {
    return InvalidFormat("kernel '" + kernel.name + "': its IR does not make a valid LLVM module "
                         "(LLVM verifier: " + os.str() + ")");
  }
  if (options.optimize) {
    status = OptimizeModule(*out.module, *machine, target, options.use_libmvec, options.first_tier);
    if (!status.ok()) return status.WithContext("kernel '" + kernel.name + "'");
  }
  if (!out.llvm_errors->empty()) {
    return Internal("kernel '" + kernel.name + "': LLVM: " + *out.llvm_errors);
  }
  return out;
}

std::string ModuleText(const KernelModule& generated) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (generated.module) generated.module->print(os, nullptr);
  return os.str();
}

}  // namespace kiln::jit
