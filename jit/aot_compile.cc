// Code compiled ahead of time, compile side: target names and kernels to relocatable objects.
#include "jit/aot_compile.h"

#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "jit/aot_objects.h"
#include "jit/kernel_ir_serialize.h"
#include "jit/object_cache.h"

namespace kiln::jit {
namespace {

std::string ErrorText(llvm::Error error) { return llvm::toString(std::move(error)); }

// The TargetMachine the JIT's compiler would use for `target`: LLJIT links with JITLink on
// x86-64 ELF and then asks for position-independent code in the small code model.
StatusOr<std::unique_ptr<llvm::TargetMachine>> ObjectMachine(const TargetInfo& target) {
  llvm::orc::JITTargetMachineBuilder builder{llvm::Triple(target.triple)};
  builder.setCPU(target.cpu);
  builder.setFeatures(target.features);
  builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  builder.setRelocationModel(llvm::Reloc::PIC_);
  builder.setCodeModel(llvm::CodeModel::Small);
  auto machine = builder.createTargetMachine();
  if (!machine) {
    return Internal("no code generator for " + target.triple + " cpu " + target.cpu + ": " +
                    ErrorText(machine.takeError()));
  }
  return std::move(*machine);
}

// One entry to compile: its payload, where errors point, and where the object goes.
struct Job {
  const std::vector<uint8_t>* payload;
  std::string where;
  AotObjectDef* out;
};

Status CompileOne(const Job& job, const TargetInfo& target, const std::string& environment,
                  llvm::TargetMachine& machine) {
  const CodegenOptions options;  // the JIT's defaults: O3, libmvec (AotAbi records them)
  StatusOr<KernelPayload> payload = DeserializeKernelPayload(job.payload->data(), job.payload->size());
  if (!payload.ok()) return payload.status().WithContext(job.where);
  // The symbol names the kernel's structure and target, so objects of different kernels never
  // collide in one process and the same kernel is recognized as such.
  std::string symbol = "kiln_aot_" + ObjectCacheKey(payload->kernel, environment, options);
  StatusOr<KernelModule> generated = GenerateModule(payload->kernel, symbol, target, options);
  if (!generated.ok()) return generated.status().WithContext(job.where);
  llvm::orc::SimpleCompiler compile(machine);
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> object = compile(*generated->module);
  if (!object) {
    return Internal(job.where + ": code generation for cpu " + target.cpu + ": " +
                    ErrorText(object.takeError()));
  }
  if (!generated->llvm_errors->empty()) {
    return Internal(job.where + ": LLVM code generation: " + *generated->llvm_errors);
  }
  job.out->symbol = std::move(symbol);
  job.out->object.assign((*object)->getBufferStart(), (*object)->getBufferEnd());
  return Status::Ok();
}

// Runs every job on `threads` threads (each with its own TargetMachine); the first error wins.
Status RunJobs(const std::vector<Job>& jobs, const TargetInfo& target, int threads) {
  std::string environment = ObjectCacheEnvironment(target);
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  auto work = [&] {
    StatusOr<std::unique_ptr<llvm::TargetMachine>> machine = ObjectMachine(target);
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      Status status = machine.ok() ? CompileOne(jobs[i], target, environment, **machine)
                                   : machine.status();
      if (status.ok()) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (first.ok()) first = status;
      next.store(jobs.size());  // stop the others early
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return first;
}

}  // namespace

StatusOr<TargetInfo> ResolveCodeTarget(const std::string& name) {
  ASSIGN_OR_RETURN(TargetInfo host, DetectHostTarget());  // also initializes LLVM's target
  if (name == "native") return host;
  if (llvm::Triple(host.triple).getArch() != llvm::Triple::x86_64) {
    return InvalidArgument("code target '" + name + "': only 'native' is known on " + host.triple);
  }
  std::vector<std::string> enabled = X86CpuFeatures(name);
  if (enabled.empty()) {
    return InvalidArgument("code target '" + name +
                           "' is not an x86-64 CPU LLVM knows (try native, x86-64-v3 or "
                           "x86-64-v4)");
  }
  llvm::SubtargetFeatures features;
  for (const std::string& f : enabled) features.AddFeature(f, true);
  TargetInfo target;
  target.triple = host.triple;
  target.cpu = name;
  target.features = features.getString();
  auto has = [&](const char* f) { return std::binary_search(enabled.begin(), enabled.end(), f); };
  target.has_avx2 = has("avx2");
  target.has_avx512f = has("avx512f");
  return target;
}

std::vector<std::string> DefaultCodeTargets() {
  StatusOr<TargetInfo> host = DetectHostTarget();
  if (!host.ok() || llvm::Triple(host->triple).getArch() != llvm::Triple::x86_64) return {};
  return {"x86-64-v3"};
}

StatusOr<AotTargetDef> CompileCodeTarget(const TargetInfo& target,
                                         const std::vector<KernelDef>& kernels,
                                         const std::vector<ShapeFunctionDef>& shape_functions,
                                         int threads, size_t num_kernels,
                                         size_t num_shape_functions) {
  RETURN_IF_ERROR(DetectHostTarget().status());  // initializes LLVM's target once
  AotTargetDef def{target.triple, target.cpu, target.features, LlvmVersion(),
                   AotAbi(CodegenOptions()), {}, {}};
  def.kernels.resize(kernels.size());
  def.shape_functions.resize(shape_functions.size());
  std::string prefix = "code target " + target.cpu + ": ";
  std::vector<Job> jobs;
  for (size_t i = 0; i < std::min(kernels.size(), num_kernels); ++i) {
    if (kernels[i].payload_format != kPayloadFormat) continue;
    jobs.push_back({&kernels[i].payload,
                    prefix + "kernels[" + std::to_string(i) + "] '" + kernels[i].name + "'",
                    &def.kernels[i]});
  }
  for (size_t i = 0; i < std::min(shape_functions.size(), num_shape_functions); ++i) {
    if (shape_functions[i].payload_format != kPayloadFormat) continue;
    jobs.push_back({&shape_functions[i].payload,
                    prefix + "shape_functions[" + std::to_string(i) + "] '" +
                        shape_functions[i].name + "'",
                    &def.shape_functions[i]});
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(std::max<size_t>(jobs.size(), 1)));
  RETURN_IF_ERROR(RunJobs(jobs, target, threads));
  return def;
}

}  // namespace kiln::jit
