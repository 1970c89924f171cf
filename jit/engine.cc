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
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/object_cache.h"
#include "jit/runtime.h"
#include "base/epoch.h"

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
  runtime[jit.mangleAndIntern(kParallelTeamSymbol)] = {
      llvm::orc::ExecutorAddr::fromPtr(ParallelTeamAddress()),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  runtime[jit.mangleAndIntern(kTeamSizeSymbol)] = {
      llvm::orc::ExecutorAddr::fromPtr(TeamSizeAddress()),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  runtime[jit.mangleAndIntern(kTeamBarrierSymbol)] = {
      llvm::orc::ExecutorAddr::fromPtr(TeamBarrierAddress()),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  runtime[jit.mangleAndIntern(kIndexErrorSymbol)] = {
      llvm::orc::ExecutorAddr::fromPtr(IndexErrorAddress()),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  runtime[jit.mangleAndIntern(kRangeErrorSymbol)] = {
      llvm::orc::ExecutorAddr::fromPtr(RangeErrorAddress()),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (llvm::Error error = main.define(llvm::orc::absoluteSymbols(std::move(runtime)))) {
    *status = Internal("cannot define the kiln runtime symbols: " + ErrorText(std::move(error)));
  }
  return loaded;
}

// FNV-1a over the form's tokens: a digest independent of HashCanonicalForm's (splitmix).
uint64_t CheckDigest(const std::vector<uint64_t>& form) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t token : form) {
    for (int i = 0; i < 8; ++i) {
      h ^= (token >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

}  // namespace

struct Engine::Impl : std::enable_shared_from_this<Engine::Impl> {
  struct Entry {
    uint64_t hash = 0;
    // A second, independent digest of the CanonicalForm and its length, compared on every hash
    // hit: 128 bits tell kernels apart as the persistent cache's keys do. Not the form itself:
    // forms of fused kernels reach megabytes (shared subexpressions are written out each time
    // they occur), and a server holding hundreds of variants grew by that much per variant
    // (issue 17, finding 8).
    uint64_t check = 0;
    size_t form_size = 0;
    Tier tier = Tier::kOptimized;      // requested; part of the entry's identity
    Tier produced = Tier::kOptimized;  // what the code is; written before the promise is set
    std::promise<StatusOr<KernelFn>> promise;
    std::shared_future<StatusOr<KernelFn>> result;
    // Guarded by Impl::mu:
    llvm::orc::ResourceTrackerSP tracker;  // the kernel's code; null until compiled (or failed)
    int64_t holders = 0;                   // live KernelRefs (and waiting Acquires)
    bool pinned = false;                   // handed out by GetOrCompile: never freed
    uint64_t generation = 0;               // bumped at each retirement; a stale one frees nothing
  };

  // Waits for ORC's compile threads before the LLJIT goes. ExecutionSession::endSession (LLVM
  // 19) removes the JITDylibs first and only then shuts the task dispatcher down, so a
  // materialization task still finishing after its lookup returned (destroying its
  // MaterializationResponsibility, which reads the JITDylib) raced the removal: "JIT session
  // error: Resource tracker ... became defunct" and a crash at a small address, seen once in
  // tests/conformance:load_all_test (1,754 compiler engines made and dropped) under load 15.
  // Shutting the dispatcher down first waits for every outstanding task; endSession's own call
  // then finds nothing left.
  ~Impl() {
    if (jit) jit->getExecutionSession().getExecutorProcessControl().getDispatcher().shutdown();
  }

  EngineOptions options;
  TargetInfo target;
  std::string environment;                        // ObjectCacheEnvironment(target)
  std::unique_ptr<DiskObjectCache> object_cache;  // null when off; outlives `jit`
  std::string object_cache_dir;                   // the cache's directory, empty when off
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::atomic<uint64_t> next_symbol{0};

  mutable std::mutex mu;  // guards everything below and the Entry fields marked so
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<Entry>>> cache;
  EngineStats stats;

  // The cache entry for `kernel` at `tier`, inserted if new (then *compile is set: the caller
  // compiles); for kFast, the finished optimized entry if there is one. `pin` pins it; otherwise
  // it gains a holder.
  std::shared_ptr<Entry> Find(const Kernel& kernel, Tier tier, bool pin, bool* compile);
  // Whether `entry` holds working code now (without waiting).
  static bool Finished(const std::shared_ptr<Entry>& entry);
  // Compiles into `entry` and fulfils its promise.
  void CompileInto(const Kernel& kernel, Entry& entry);
  // Compiles `kernel` at *tier, which a kFast request served from the persistent cache turns
  // into kOptimized.
  StatusOr<KernelFn> Compile(const Kernel& kernel, Tier* tier,
                             llvm::orc::ResourceTrackerSP* tracker);
  // The first tier: O1's essential IR passes and the fast code generator, compiled here and added as an object (so
  // neither the LLJIT's O3 compiler nor the persistent cache sees it).
  StatusOr<KernelFn> CompileFirstTier(const Kernel& kernel, llvm::orc::ResourceTrackerSP rt);
  // Links `object` into `entry` and fulfils its promise; false (nothing fulfilled, nothing
  // left behind) if it does not link.
  bool LinkInto(std::unique_ptr<llvm::MemoryBuffer> object, const std::string& symbol,
                Entry& entry);
  // The kernel's code from the object cache, linked under `rt`; null (with `rt` replaced by a
  // fresh tracker if anything was added) when there is no usable entry.
  KernelFn LoadCached(const std::string& key, const std::string& symbol,
                      llvm::orc::ResourceTrackerSP& rt);
  // Drops a holder; the last one (of an unpinned entry) retires it.
  void Release(const std::shared_ptr<Entry>& entry);
  // Runs when no guard can be running the retired code: unless the entry was taken again (or
  // retired again since), removes it from the cache and frees its code.
  void Free(const std::shared_ptr<Entry>& entry, uint64_t generation);
};

Engine::Engine(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  ASSIGN_OR_RETURN(impl->target, DetectHostTarget());
  if (options.object_cache_bytes == 0) {
    return InvalidArgument("EngineOptions.object_cache_bytes = 0: must be > 0");
  }
  impl->environment = ObjectCacheEnvironment(impl->target);
  if (!options.object_cache_dir.empty()) {
    impl->object_cache = DiskObjectCache::OpenOrWarn(options.object_cache_dir, impl->environment,
                                                     options.object_cache_bytes);
    if (impl->object_cache) impl->object_cache_dir = options.object_cache_dir;
  }
  ASSIGN_OR_RETURN(impl->jit, CreateJit(impl->target, impl->object_cache.get()));
  Status status;
  std::vector<bool> loaded = AddHostSymbols(*impl->jit, {"libm.so.6", "libmvec.so.1"}, &status);
  RETURN_IF_ERROR(status);
  if (!loaded[1]) impl->options.codegen.use_libmvec = false;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

bool Engine::Impl::Finished(const std::shared_ptr<Entry>& entry) {
  return entry->result.wait_for(std::chrono::seconds(0)) == std::future_status::ready &&
         entry->result.get().ok();
}

std::shared_ptr<Engine::Impl::Entry> Engine::Impl::Find(const Kernel& kernel, Tier tier, bool pin,
                                                        bool* compile) {
  std::vector<uint64_t> form_of = CanonicalForm(kernel);
  uint64_t hash = HashCanonicalForm(form_of);
  uint64_t check = CheckDigest(form_of);
  size_t form_size = form_of.size();
  form_of = {};  // freed before the lock
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<Entry> entry, optimized;
  for (const auto& candidate : cache[hash]) {
    if (candidate->check != check || candidate->form_size != form_size) continue;
    if (candidate->tier == tier) entry = candidate;
    // Better code at no cost; an optimized compile still running is not waited for.
    if (tier == Tier::kFast && candidate->tier == Tier::kOptimized && Finished(candidate)) {
      optimized = candidate;
    }
  }
  if (optimized) entry = optimized;
  *compile = !entry;
  if (entry) {
    ++stats.cache_hits;
  } else {
    entry = std::make_shared<Entry>();
    entry->hash = hash;
    entry->check = check;
    entry->form_size = form_size;
    entry->tier = tier;
    entry->result = entry->promise.get_future().share();
    cache[hash].push_back(entry);
    ++stats.cached_kernels;
  }
  if (pin) {
    entry->pinned = true;
  } else {
    ++entry->holders;
  }
  return entry;
}

void Engine::Impl::CompileInto(const Kernel& kernel, Entry& entry) {
  auto start = std::chrono::steady_clock::now();
  llvm::orc::ResourceTrackerSP tracker;
  Tier tier = entry.tier;
  StatusOr<KernelFn> result = Compile(kernel, &tier, &tracker);
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  {
    std::lock_guard<std::mutex> lock(mu);
    entry.tracker = std::move(tracker);
    entry.produced = tier;
    ++stats.compilations;
    if (tier == Tier::kFast) ++stats.fast_compilations;
    if (!result.ok()) ++stats.failures;
    stats.compile_seconds += took.count();
  }
  entry.promise.set_value(std::move(result));
}

void Engine::Impl::Release(const std::shared_ptr<Entry>& entry) {
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (--entry->holders > 0 || entry->pinned) return;
    generation = ++entry->generation;
  }
  RetireWhenUnused([self = shared_from_this(), entry, generation] { self->Free(entry, generation); });
}

void Engine::Impl::Free(const std::shared_ptr<Entry>& entry, uint64_t generation) {
  llvm::orc::ResourceTrackerSP tracker;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (entry->holders > 0 || entry->pinned || entry->generation != generation) return;
    auto bucket = cache.find(entry->hash);
    if (bucket == cache.end()) return;
    auto& list = bucket->second;
    auto it = std::find(list.begin(), list.end(), entry);
    if (it == list.end()) return;
    list.erase(it);
    if (list.empty()) cache.erase(bucket);
    --stats.cached_kernels;
    tracker = std::move(entry->tracker);
    if (tracker) ++stats.freed_kernels;
  }
  // No thread can reach the code any more: the entry is gone from the cache and no guard that
  // could hold its address is alive.
  if (tracker) llvm::consumeError(tracker->remove());
}

StatusOr<KernelFn> Engine::GetOrCompile(const Kernel& kernel) {
  bool compile = false;
  std::shared_ptr<Impl::Entry> entry =
      impl_->Find(kernel, Tier::kOptimized, /*pin=*/true, &compile);
  if (compile) impl_->CompileInto(kernel, *entry);
  return entry->result.get();
}

StatusOr<KernelRef> Engine::Acquire(const Kernel& kernel, Tier tier) {
  return Hold(kernel, tier, nullptr, "", nullptr);
}

StatusOr<KernelRef> Engine::AcquireObject(const Kernel& kernel,
                                          std::unique_ptr<llvm::MemoryBuffer> object,
                                          const std::string& symbol, bool* compiled,
                                          Tier tier) {
  return Hold(kernel, tier, std::move(object), symbol, compiled);
}

StatusOr<KernelRef> Engine::Hold(const Kernel& kernel, Tier tier,
                                 std::unique_ptr<llvm::MemoryBuffer> object,
                                 const std::string& symbol, bool* compiled) {
  bool compile = false;
  std::shared_ptr<Impl::Entry> entry = impl_->Find(kernel, tier, /*pin=*/false, &compile);
  KernelRef ref;
  // Holds from here, so that an error path releases the holder too.
  ref.hold_ = std::shared_ptr<void>(
      entry.get(), [impl = impl_, entry](void*) { impl->Release(entry); });
  bool linked = compile && object != nullptr && impl_->LinkInto(std::move(object), symbol, *entry);
  if (compiled != nullptr) *compiled = compile && !linked;
  if (compile && !linked) impl_->CompileInto(kernel, *entry);
  StatusOr<KernelFn> fn = entry->result.get();
  if (!fn.ok()) return fn.status();
  ref.fn_ = *fn;
  ref.tier_ = entry->produced;  // written before the promise was set
  return ref;
}

bool Engine::Impl::LinkInto(std::unique_ptr<llvm::MemoryBuffer> object, const std::string& symbol,
                            Entry& entry) {
  llvm::orc::ResourceTrackerSP rt = jit->getMainJITDylib().createResourceTracker();
  llvm::Error error = jit->addObjectFile(rt, std::move(object));
  if (!error) {
    auto address = jit->lookup(symbol);
    if (address) {
      {
        std::lock_guard<std::mutex> lock(mu);
        entry.tracker = rt;
        entry.produced = entry.tier;  // what the caller said the object's code is
        ++stats.aot_linked;
      }
      entry.promise.set_value(address->toPtr<KernelFn>());
      return true;
    }
    error = address.takeError();
  }
  std::string text = ErrorText(std::move(error));
  llvm::consumeError(rt->remove());
  {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.aot_link_failures;
  }
  static std::atomic<bool> noticed{false};
  if (!noticed.exchange(true)) {
    std::fprintf(stderr,
                 "kiln: notice: code compiled ahead of time for kernel symbol %s does not link "
                 "(%s); compiling with the JIT instead\n",
                 symbol.c_str(), text.c_str());
  }
  return false;
}

KernelFn Engine::Impl::LoadCached(const std::string& key, const std::string& symbol,
                                  llvm::orc::ResourceTrackerSP& rt) {
  std::unique_ptr<llvm::MemoryBuffer> object = object_cache->Load(key);
  if (!object) return nullptr;
  llvm::Error error = jit->addObjectFile(rt, std::move(object));
  if (!error) {
    auto address = jit->lookup(symbol);
    if (address) return address->toPtr<KernelFn>();
    error = address.takeError();
  }
  // An intact entry that does not link (it passed the checksum, so kiln wrote it) must not
  // fail the kernel: drop it and its partial definitions, and compile instead.
  llvm::consumeError(std::move(error));
  llvm::consumeError(rt->remove());
  object_cache->Remove(key);
  rt = jit->getMainJITDylib().createResourceTracker();
  return nullptr;
}

StatusOr<KernelFn> Engine::Impl::CompileFirstTier(const Kernel& kernel,
                                                  llvm::orc::ResourceTrackerSP rt) {
  auto fail = [&](Status status) -> StatusOr<KernelFn> {
    llvm::consumeError(rt->remove());
    return status;
  };
  // Its own symbol space: never the persistent cache's "kiln_k..." names.
  std::string symbol =
      "kiln_t1_" + SanitizedName(kernel.name) + "_" + std::to_string(next_symbol.fetch_add(1));
  CodegenOptions codegen = options.codegen;
  codegen.first_tier = true;
  ASSIGN_OR_RETURN(KernelModule generated, GenerateModule(kernel, symbol, target, codegen));
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> machine,
                   CreateTargetMachine(target, /*first_tier=*/true));
  auto object = llvm::orc::SimpleCompiler(*machine)(*generated.module);
  if (!object) {
    return fail(Internal("kernel '" + kernel.name +
                         "': first-tier code generation: " + ErrorText(object.takeError())));
  }
  if (!generated.llvm_errors->empty()) {
    return fail(
        Internal("kernel '" + kernel.name + "': LLVM code generation: " + *generated.llvm_errors));
  }
  if (llvm::Error error = jit->addObjectFile(rt, std::move(*object))) {
    return fail(Internal("kernel '" + kernel.name +
                         "': cannot add to the JIT: " + ErrorText(std::move(error))));
  }
  auto address = jit->lookup(symbol);
  if (!address) {
    return fail(
        Internal("kernel '" + kernel.name + "': cannot link: " + ErrorText(address.takeError())));
  }
  return address->toPtr<KernelFn>();
}

StatusOr<KernelFn> Engine::Impl::Compile(const Kernel& kernel, Tier* tier,
                                         llvm::orc::ResourceTrackerSP* tracker) {
  DiskObjectCache* cache = object_cache.get();
  // Each kernel is a resource of its own, so that it can be freed alone. A failed kernel's
  // partial definitions are removed at once.
  llvm::orc::ResourceTrackerSP rt = jit->getMainJITDylib().createResourceTracker();
  auto fail = [&](Status status) -> StatusOr<KernelFn> {
    llvm::consumeError(rt->remove());
    return status;
  };
  std::string key, symbol;
  if (cache != nullptr) {
    // With a persistent cache the symbol must not depend on the process: derive it from the key.
    RETURN_IF_ERROR(ValidateKernel(kernel));
    key = ObjectCacheKey(kernel, environment, options.codegen);
    symbol = "kiln_" + key;
    if (KernelFn fn = LoadCached(key, symbol, rt)) {
      *tracker = rt;
      *tier = Tier::kOptimized;
      return fn;
    }
  }
  if (*tier == Tier::kFast) {
    StatusOr<KernelFn> fn = CompileFirstTier(kernel, rt);
    if (fn.ok()) *tracker = rt;
    return fn;
  }
  if (cache == nullptr) {
    symbol = "kiln_" + SanitizedName(kernel.name) + "_" +
             std::to_string(next_symbol.fetch_add(1));
  }
  ASSIGN_OR_RETURN(KernelModule generated, GenerateModule(kernel, symbol, target, options.codegen));
  std::shared_ptr<std::string> llvm_errors = generated.llvm_errors;
  if (cache != nullptr) generated.module->setModuleIdentifier(key);  // the ObjectCache's key
  llvm::orc::ThreadSafeModule module(std::move(generated.module), std::move(generated.context));
  if (llvm::Error error = jit->addIRModule(rt, std::move(module))) {
    return fail(Internal("kernel '" + kernel.name +
                         "': cannot add to the JIT: " + ErrorText(std::move(error))));
  }
  auto address = jit->lookup(symbol);
  if (!address) {
    return fail(Internal("kernel '" + kernel.name +
                         "': cannot compile or link: " + ErrorText(address.takeError())));
  }
  // Code generation ran on this thread inside lookup, reporting into the kernel's context.
  if (!llvm_errors->empty()) {
    if (cache != nullptr) cache->Remove(key);
    return fail(Internal("kernel '" + kernel.name + "': LLVM code generation: " + *llvm_errors));
  }
  *tracker = rt;
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
    stats.object_cache_evictions = c.evictions;
  }
  return stats;
}

const TargetInfo& Engine::target() const { return impl_->target; }

bool Engine::uses_libmvec() const { return impl_->options.codegen.use_libmvec; }

const std::string& Engine::object_cache_dir() const { return impl_->object_cache_dir; }

}  // namespace kiln::jit
