// Host target detection, TargetMachine creation, the O3 pipeline with libmvec vector math and
// the first tier's cheaper one.
#include <llvm/Analysis/CFG.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/LICM.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>
#include <llvm/Transforms/Scalar/LoopRotation.h>
#include <llvm/Transforms/Scalar/LoopUnrollPass.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <llvm/Transforms/Utils/InjectTLIMappings.h>
#include <llvm/Transforms/Vectorize/LoopVectorize.h>

#include <mutex>
#include <string>
#include <vector>

#include "jit/codegen.h"

namespace kiln::jit {
namespace {

// Scalar functions with glibc libmvec variants. `scalars` are the names the vectorizer sees (libm
// calls and LLVM intrinsics); `base` is the libmvec name suffix.
struct MathFunction {
  std::vector<const char*> scalars;
  const char* base;
  bool is_f32;
  int arity;
};

const std::vector<MathFunction>& MathFunctions() {
  static const auto* functions = new std::vector<MathFunction>{
      {{"expf", "llvm.exp.f32"}, "expf", true, 1},
      {{"exp", "llvm.exp.f64"}, "exp", false, 1},
      {{"logf", "llvm.log.f32"}, "logf", true, 1},
      {{"log", "llvm.log.f64"}, "log", false, 1},
      {{"sinf", "llvm.sin.f32"}, "sinf", true, 1},
      {{"sin", "llvm.sin.f64"}, "sin", false, 1},
      {{"cosf", "llvm.cos.f32"}, "cosf", true, 1},
      {{"cos", "llvm.cos.f64"}, "cos", false, 1},
      {{"tanhf", "llvm.tanh.f32"}, "tanhf", true, 1},
      {{"tanh", "llvm.tanh.f64"}, "tanh", false, 1},
      {{"erff"}, "erff", true, 1},
      {{"erf"}, "erf", false, 1},
      {{"powf", "llvm.pow.f32"}, "powf", true, 2},
      {{"pow", "llvm.pow.f64"}, "pow", false, 2},
  };
  return *functions;
}

// One libmvec variant: x86-64 vector ABI ISA letter b = SSE (128-bit), d = AVX2 (256),
// e = AVX-512 (512).
struct Variant {
  char isa;
  int lanes;
  std::string vector_name;  // e.g. "_ZGVeN16v_expf"
  std::string abi_prefix;   // e.g. "_ZGV_LLVM_N16v"
  const MathFunction* function;
};

// Built once: VecDesc keeps StringRefs into these strings for the whole process.
const std::vector<Variant>& AllVariants() {
  static const auto* variants = [] {
    auto* out = new std::vector<Variant>();
    for (const MathFunction& f : MathFunctions()) {
      for (auto [isa, bits] : {std::pair<char, int>{'b', 128}, {'d', 256}, {'e', 512}}) {
        int lanes = bits / (f.is_f32 ? 32 : 64);
        std::string params(f.arity, 'v');
        std::string n = std::to_string(lanes);
        out->push_back({isa, lanes, "_ZGV" + std::string(1, isa) + "N" + n + params + "_" + f.base,
                        "_ZGV_LLVM_N" + n + params, &f});
      }
    }
    return out;
  }();
  return *variants;
}

// The variants the host can run: SSE always, AVX2 and AVX-512 when present.
std::vector<llvm::VecDesc> LibmvecMappings(const TargetInfo& target) {
  std::vector<llvm::VecDesc> out;
  for (const Variant& v : AllVariants()) {
    if ((v.isa == 'd' && !target.has_avx2) || (v.isa == 'e' && !target.has_avx512f)) continue;
    for (const char* scalar : v.function->scalars) {
      out.emplace_back(scalar, v.vector_name, llvm::ElementCount::getFixed(v.lanes),
                       /*Masked=*/false, v.abi_prefix);
    }
  }
  return out;
}

void InitializeLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

}  // namespace

StatusOr<TargetInfo> DetectHostTarget() {
  InitializeLlvmOnce();
  TargetInfo info;
  info.triple = llvm::sys::getProcessTriple();
  info.cpu = llvm::sys::getHostCPUName().str();
  llvm::SubtargetFeatures features;
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  for (const auto& feature : host) features.AddFeature(feature.first(), feature.second);
  info.features = features.getString();
  info.has_avx2 = host.lookup("avx2");
  info.has_avx512f = host.lookup("avx512f");
  std::string error;
  if (!llvm::TargetRegistry::lookupTarget(info.triple, error)) {
    return Internal("no LLVM target for host " + info.triple + ": " + error);
  }
  return info;
}

StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const TargetInfo& target,
                                                                   bool first_tier) {
  InitializeLlvmOnce();
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(target.triple, error);
  if (!t) return Internal("no LLVM target for " + target.triple + ": " + error);
  llvm::TargetOptions options;
  // The first tier emits objects itself (engine.cc), which JITLink places anywhere in the
  // address space: position-independent code, or 32-bit absolute relocations fail to link.
  std::unique_ptr<llvm::TargetMachine> machine(t->createTargetMachine(
      target.triple, target.cpu, target.features, options,
      first_tier ? std::optional<llvm::Reloc::Model>(llvm::Reloc::PIC_) : std::nullopt,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine) return Internal("cannot create a TargetMachine for " + target.cpu);
  // The first tier's code generator: no optimization, FastISel instead of SelectionDAG. Measured
  // on the first call (process CPU, compile included) of bert_tiny seq 128 and
  // mobilenet_v3_large, it beats CodeGenOptLevel::Less by 0.2-0.9 s: the code it makes from
  // O1 IR is slower, but far less than compiling better code costs.
  if (first_tier) machine->setOptLevel(llvm::CodeGenOptLevel::None);
  return machine;
}

namespace {

// Whether any function of `module` has a loop (a back edge): shape functions and scalar kernels
// are straight-line code.
bool HasLoops(const llvm::Module& module) {
  for (const llvm::Function& function : module) {
    if (function.isDeclaration()) continue;
    llvm::SmallVector<std::pair<const llvm::BasicBlock*, const llvm::BasicBlock*>, 4> edges;
    llvm::FindFunctionBackedges(function, edges);
    if (!edges.empty()) return true;
  }
  return false;
}

llvm::InstCombinePass OneInstCombine() {
  return llvm::InstCombinePass(
      llvm::InstCombineOptions().setMaxIterations(1).setUseLoopInfo(false).setVerifyFixpoint(
          false));
}

llvm::SimplifyCFGPass KeepLoopsSimplifyCfg() {
  return llvm::SimplifyCFGPass(llvm::SimplifyCFGOptions().convertSwitchRangeToICmp(true));
}

// LICM (with speculation) then loop rotation, as O1's loop pipeline runs them.
llvm::FunctionPassManager LicmRotate(bool rotate) {
  llvm::LoopPassManager loop;
  loop.addPass(llvm::LICMPass(llvm::LICMOptions()));
  if (rotate) loop.addPass(llvm::LoopRotatePass(/*EnableHeaderDuplication=*/true, false));
  llvm::FunctionPassManager out;
  out.addPass(llvm::createFunctionToLoopPassAdaptor(std::move(loop), /*UseMemorySSA=*/true));
  return out;
}

// The first tier's IR passes: the part of LLVM's O1 pipeline that the code's first run needs.
// Measured on bert_tiny seq 128 (thread CPU, --threads 1, medians of 5; O1 -> this): its 29
// first-tier compiles 296 -> 197 ms (IR passes ~220 -> ~120 ms), the first inference on their
// code unchanged (105 / 107 ms). What O1 did that mattered:
// - SROA, EarlyCSE, one InstCombine and SimplifyCFG (loads and stores through allocas and
//   redundant index arithmetic; FastISel and the fast register allocator keep all of it);
// - LICM + rotation, so that loop-invariant address arithmetic leaves the inner loops;
// - the unrollers and the loop vectorizer only where the kernel asks for them (loop metadata:
//   kVectorized, kUnrolled loops), which O1 does with LoopVectorization / LoopUnrolling off.
//   A textual copy of O1 loses that "only when forced": its unrollers then fully unroll the
//   small inner loops before the vectorizer sees them, and the first inference was 5x slower.
// Dropped: the inliner and interprocedural passes (a kernel calls no function it defines but
// through kiln_parallel_for), IndVarSimplify, loop idiom/deletion, Reassociate, SCCP, (A|B)DCE
// and O1's five further InstCombines (InstCombine alone was a third of O1's time; adding
// IndVarSimplify or Reassociate back bought no run time). Straight-line modules (shape functions: bert_tiny's `shapes_0` is 11,000 lines of
// overflow-checked size arithmetic, mostly constant) only need folding, which EarlyCSE does:
// 11,000 -> 1,250 lines, after which FastISel is cheap (2 ms); without it FastISel alone took
// 50 ms.
llvm::ModulePassManager FirstTierPipeline(const llvm::Module& module) {
  llvm::FunctionPassManager f;
  f.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
  f.addPass(llvm::EarlyCSEPass());
  if (HasLoops(module)) {
    f.addPass(OneInstCombine());
    f.addPass(KeepLoopsSimplifyCfg());
    f.addPass(LicmRotate(/*rotate=*/true));
    f.addPass(llvm::createFunctionToLoopPassAdaptor(
        llvm::LoopFullUnrollPass(/*OptLevel=*/1, /*OnlyWhenForced=*/true, false)));
    f.addPass(llvm::InjectTLIMappings());  // libmvec calls in vectorized loops, as at O3
    f.addPass(llvm::LoopVectorizePass(llvm::LoopVectorizeOptions(
        /*InterleaveOnlyWhenForced=*/true, /*VectorizeOnlyWhenForced=*/true)));
    f.addPass(OneInstCombine());
    f.addPass(KeepLoopsSimplifyCfg());
    f.addPass(llvm::LoopUnrollPass(llvm::LoopUnrollOptions(1, /*OnlyWhenForced=*/true, false)));
    f.addPass(OneInstCombine());
    f.addPass(LicmRotate(/*rotate=*/false));
  }
  llvm::ModulePassManager passes;
  passes.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(f)));
  return passes;
}

}  // namespace

Status OptimizeModule(llvm::Module& module, llvm::TargetMachine& machine, const TargetInfo& target,
                      bool use_libmvec, bool first_tier) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;  // for O3 (FirstTierPipeline sets up its own passes)
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopInterleaving = true;
  tuning.LoopUnrolling = true;
  llvm::PassBuilder builder(&machine, tuning);

  // Registered before the defaults so the vectorizer sees the libmvec table.
  llvm::TargetLibraryInfoImpl library(llvm::Triple(module.getTargetTriple()));
  if (use_libmvec) library.addVectorizableFunctions(LibmvecMappings(target));
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(library); });

  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes =
      first_tier ? FirstTierPipeline(module)
                 : builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  passes.run(module, mam);
  return Status::Ok();
}

}  // namespace kiln::jit
