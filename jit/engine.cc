// Engine: LLJIT setup, host symbol resolution, and the compile-once kernel cache.
#include "jit/engine.h"

#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/object_cache.h"
#include "jit/runtime.h"

namespace kiln::jit {
namespace {

std::string ErrorText(llvm::Error error) { return llvm::toString(std::move(error)); }

// Symbol-safe version of a kernel name (ELF accepts more, but keep the IR readable).
std::string SanitizedName(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 48)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

StatusOr<std::unique_ptr<llvm::orc::LLJIT>> CreateJit(const TargetInfo& target,
                                                      llvm::ObjectCache* cache) {
  llvm::orc::JITTargetMachineBuilder machine{llvm::Triple(target.triple)};
  machine.setCPU(target.cpu);
  machine.setFeatures(target.features);
  machine.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(std::move(machine)).setSupportConcurrentCompilation(true);
  if (cache != nullptr) {
    builder.setCompileFunctionCreator([cache](llvm::orc::JITTargetMachineBuilder jtmb)
                                          -> llvm::Expected<std::unique_ptr<
                                              llvm::orc::IRCompileLayer::IRCompiler>> {
      return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(jtmb), cache);
    });
  }
  auto jit = builder.create();
  if (!jit) return Internal("cannot create the LLJIT: " + ErrorText(jit.takeError()));
  return std::move(*jit);
}

// Adds generators for the process and for `libraries`; returns which libraries loaded.
std::vector<bool> AddHostSymbols(llvm::orc::LLJIT& jit, const std::vector<const char*>& libraries,
                                 Status* status) {
  llvm::orc::JITDylib& main = jit.getMainJITDylib();
  char prefix = jit.getDataLayout().getGlobalPrefix();
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (!process) {
    *status = Internal("cannot search the process for symbols: " + ErrorText(process.takeError()));
    return {};
  }
  main.addGenerator(std::move(*process));
  std::vector<bool> loaded;
  for (const char* library : libraries) {
    auto generator = llvm::orc::DynamicLibrarySearchGenerator::Load(library, prefix);
    loaded.push_back(static_cast<bool>(generator));
    if (generator) {
      main.addGenerator(std::move(*generator));
    } else {
      llvm::consumeError(generator.takeError());
    }
  }
  llvm::orc::SymbolMap runtime;
  runtime[jit.mangleAndIntern(kParallelForSymbol)] = {
      llvm::orc::ExecutorAddr::fromPtr(ParallelForAddress()),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (llvm::Error error = main.define(llvm::orc::absoluteSymbols(std::move(runtime)))) {
    *status = Internal("cannot define the kiln runtime symbols: " + ErrorText(std::move(error)));
  }
  return loaded;
}

}  // namespace

struct Engine::Impl {
  struct Entry {
    std::vector<uint64_t> form;  // CanonicalForm, compared on every hash hit
    std::promise<StatusOr<KernelFn>> promise;
    std::shared_future<StatusOr<KernelFn>> result;
  };

  EngineOptions options;
  TargetInfo target;
  std::unique_ptr<DiskObjectCache> object_cache;  // null when off; outlives `jit`
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::atomic<uint64_t> next_symbol{0};

  mutable std::mutex mu;  // guards everything below
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<Entry>>> cache;
  EngineStats stats;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  ASSIGN_OR_RETURN(impl->target, DetectHostTarget());
  if (!options.object_cache_dir.empty()) {
    ASSIGN_OR_RETURN(impl->object_cache, DiskObjectCache::Open(options.object_cache_dir));
  }
  ASSIGN_OR_RETURN(impl->jit, CreateJit(impl->target, impl->object_cache.get()));
  Status status;
  std::vector<bool> loaded = AddHostSymbols(*impl->jit, {"libm.so.6", "libmvec.so.1"}, &status);
  RETURN_IF_ERROR(status);
  if (!loaded[1]) impl->options.lower.use_libmvec = false;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

StatusOr<KernelFn> Engine::GetOrCompile(const Kernel& kernel) {
  std::vector<uint64_t> form = CanonicalForm(kernel);
  uint64_t hash = HashCanonicalForm(form);
  std::shared_ptr<Impl::Entry> entry;
  bool compile = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& candidate : impl_->cache[hash]) {
      if (candidate->form == form) entry = candidate;
    }
    if (entry) {
      ++impl_->stats.cache_hits;
    } else {
      entry = std::make_shared<Impl::Entry>();
      entry->form = std::move(form);
      entry->result = entry->promise.get_future().share();
      impl_->cache[hash].push_back(entry);
      ++impl_->stats.cached_kernels;
      compile = true;
    }
  }
  if (compile) {
    auto start = std::chrono::steady_clock::now();
    StatusOr<KernelFn> result = Compile(kernel);
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      ++impl_->stats.compilations;
      if (!result.ok()) ++impl_->stats.failures;
      impl_->stats.compile_seconds += took.count();
    }
    entry->promise.set_value(std::move(result));
  }
  return entry->result.get();
}

StatusOr<KernelFn> Engine::Compile(const Kernel& kernel) {
  DiskObjectCache* cache = impl_->object_cache.get();
  std::string key, symbol;
  if (cache != nullptr) {
    // With a persistent cache the symbol must not depend on the process: derive it from the key.
    RETURN_IF_ERROR(ValidateKernel(kernel));
    key = ObjectCacheKey(kernel, impl_->target, impl_->options.lower);
    symbol = "kiln_" + key;
    if (std::unique_ptr<llvm::MemoryBuffer> object = cache->Load(key)) {
      if (llvm::Error error = impl_->jit->addObjectFile(std::move(object))) {
        return Internal("kernel '" + kernel.name +
                        "': cannot add a cached object: " + ErrorText(std::move(error)));
      }
      auto address = impl_->jit->lookup(symbol);
      if (!address) {
        return Internal("kernel '" + kernel.name +
                        "': cannot link a cached object: " + ErrorText(address.takeError()));
      }
      return address->toPtr<KernelFn>();
    }
  } else {
    symbol = "kiln_" + SanitizedName(kernel.name) + "_" +
             std::to_string(impl_->next_symbol.fetch_add(1));
  }
  ASSIGN_OR_RETURN(LoweredKernel lowered,
                   LowerKernel(kernel, symbol, impl_->target, impl_->options.lower));
  std::shared_ptr<std::string> llvm_errors = lowered.llvm_errors;
  if (cache != nullptr) lowered.module->setModuleIdentifier(key);  // the ObjectCache's key
  llvm::orc::ThreadSafeModule module(std::move(lowered.module), std::move(lowered.context));
  if (llvm::Error error = impl_->jit->addIRModule(std::move(module))) {
    return Internal("kernel '" + kernel.name +
                    "': cannot add to the JIT: " + ErrorText(std::move(error)));
  }
  auto address = impl_->jit->lookup(symbol);
  if (!address) {
    return Internal("kernel '" + kernel.name +
                    "': cannot compile or link: " + ErrorText(address.takeError()));
  }
  // Code generation ran on this thread inside lookup, reporting into the kernel's context.
  if (!llvm_errors->empty()) {
    if (cache != nullptr) cache->Remove(key);
    return Internal("kernel '" + kernel.name + "': LLVM code generation: " + *llvm_errors);
  }
  return address->toPtr<KernelFn>();
}

EngineStats Engine::stats() const {
  EngineStats stats;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    stats = impl_->stats;
  }
  if (impl_->object_cache) {
    ObjectCacheStats c = impl_->object_cache->stats();
    stats.object_cache_hits = c.hits;
    stats.object_cache_misses = c.misses;
    stats.object_cache_corrupt = c.corrupt;
  }
  return stats;
}

const TargetInfo& Engine::target() const { return impl_->target; }

bool Engine::uses_libmvec() const { return impl_->options.lower.use_libmvec; }

}  // namespace kiln::jit
