// Runtime: wires the JIT engine, kernel provider, vendor registry and allocator together.
#include "embed/runtime.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "external/onednn/run/runtime.h"
#include "jit/kernel_provider.h"
#include "llvm/Config/llvm-config.h"  // LLVM_VERSION_STRING only: LLVM types stay in jit/

namespace kiln {

namespace {

// Applies the runtime's OpenMP thread count on the calling thread. OpenMP's nthreads ICV is
// per thread (threads created later start from the process default), so a serving thread
// running a kernel for the first time would otherwise use all cores. The thread-local cache
// makes the steady-state cost one compare.
inline void ApplyThreads(int n) {
  thread_local int applied = 0;
  if (n > 0 && applied != n) {
    omp_set_num_threads(n);
    applied = n;
  }
}

class ThreadScopedFunction : public TensorFunction {
 public:
  ThreadScopedFunction(std::unique_ptr<TensorFunction> inner, int threads)
      : inner_(std::move(inner)), threads_(threads) {}
  Status Run(const Tensor* const* args, int num_inputs, int num_outputs) override {
    ApplyThreads(threads_);
    return inner_->Run(args, num_inputs, num_outputs);
  }
  Status RunProfiled(const Tensor* const* args, int num_inputs, int num_outputs,
                     RegionProfiler* profiler) override {
    ApplyThreads(threads_);
    return inner_->RunProfiled(args, num_inputs, num_outputs, profiler);
  }
  void Prefetch() override { inner_->Prefetch(); }

 private:
  std::unique_ptr<TensorFunction> inner_;
  int threads_;
};

StatusOr<std::unique_ptr<TensorFunction>> Scope(StatusOr<std::unique_ptr<TensorFunction>> fn,
                                                int threads) {
  if (!fn.ok() || threads <= 0) return fn;
  return std::unique_ptr<TensorFunction>(new ThreadScopedFunction(std::move(*fn), threads));
}

class ScopedKernels : public KernelProvider {
 public:
  ScopedKernels(std::shared_ptr<KernelProvider> inner, int threads)
      : inner_(std::move(inner)), threads_(threads) {}
  int SelectCodeTarget(const std::vector<CodeTargetSpec>& targets) override {
    return inner_->SelectCodeTarget(targets);
  }
  StatusOr<std::unique_ptr<TensorFunction>> PrepareKernel(const KernelSpec& spec) override {
    return Scope(inner_->PrepareKernel(spec), threads_);
  }
  StatusOr<std::unique_ptr<TensorFunction>> PrepareShapeFunction(
      const ShapeFunctionSpec& spec) override {
    return Scope(inner_->PrepareShapeFunction(spec), threads_);
  }

 private:
  std::shared_ptr<KernelProvider> inner_;
  int threads_;
};

class ScopedExternals : public ExternalProvider {
 public:
  ScopedExternals(std::shared_ptr<ExternalProvider> inner, int threads)
      : inner_(std::move(inner)), threads_(threads) {}
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override {
    return Scope(inner_->CreateRegion(spec), threads_);
  }
  bool HasVendor(std::string_view vendor) const override { return inner_->HasVendor(vendor); }

 private:
  std::shared_ptr<ExternalProvider> inner_;
  int threads_;
};

// Allocators whose runtime is gone while tensors still held their blocks (see below). Reachable
// from a global on purpose: they are reclaimed, not leaked.
std::mutex& OrphanMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<Allocator*>& Orphans() {
  static auto* orphans = new std::vector<Allocator*>;
  return *orphans;
}

// Deletes the orphans no tensor uses any more. An orphan gets no new allocations (its contexts
// are gone), so once bytes_in_use reads 0 no block can call back into it.
void ReclaimOrphans() {
  std::lock_guard<std::mutex> lock(OrphanMutex());
  std::vector<Allocator*>& orphans = Orphans();
  for (size_t i = 0; i < orphans.size();) {
    if (orphans[i]->stats().bytes_in_use == 0) {
      delete orphans[i];
      orphans[i] = orphans.back();
      orphans.pop_back();
    } else {
      ++i;
    }
  }
}

// Deleter of the runtime's allocator, run when the last executable, context and Runtime are
// gone. Tensors handed out may still hold blocks: then the allocator must not be destroyed yet
// (their release calls it), so it becomes an orphan with a zero cap that frees each block as it
// returns, deleted by a later ReclaimOrphans (at the next runtime's creation or release).
void ReleaseAllocator(Allocator* allocator) {
  allocator->SetCacheCap(0);
  {
    std::lock_guard<std::mutex> lock(OrphanMutex());
    Orphans().push_back(allocator);
  }
  ReclaimOrphans();
}

Status CheckOptions(const RuntimeOptions& o) {
  if (o.num_threads < 0 || o.num_threads > RuntimeOptions::kMaxThreads) {
    return InvalidArgument("RuntimeOptions.num_threads = " + std::to_string(o.num_threads) +
                           ": must be 0 (OpenMP default) or 1.." +
                           std::to_string(RuntimeOptions::kMaxThreads));
  }
  if (o.onednn_cached_shapes < 1) {
    return InvalidArgument("RuntimeOptions.onednn_cached_shapes = " +
                           std::to_string(o.onednn_cached_shapes) + ": must be >= 1");
  }
  if (o.jit_cache_bytes == 0) {
    return InvalidArgument("RuntimeOptions.jit_cache_bytes = 0: must be > 0 (use jit_cache = "
                           "\"off\" to turn the JIT cache off)");
  }
  if (o.allocator_cache_bytes == 0) {
    return InvalidArgument(
        "RuntimeOptions.allocator_cache_bytes = 0: must be > 0 (a cache is what makes steady "
        "state allocation-free)");
  }
  return Status::Ok();
}

// An absolute path from the environment variable `name`, else "" (the XDG base directory
// specification says relative paths are invalid and must be ignored).
std::string AbsoluteEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] == '/' ? value : "";
}

}  // namespace

std::string JitCacheDirectory(const std::string& jit_cache) {
  if (jit_cache == RuntimeOptions::kJitCacheOff) return "";
  if (!jit_cache.empty()) return jit_cache;
  std::string xdg = AbsoluteEnv("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/kiln";
  std::string home = AbsoluteEnv("HOME");
  return home.empty() ? "" : home + "/.cache/kiln";
}

struct Runtime::State {
  RuntimeOptions options;
  std::shared_ptr<Allocator> allocator;
  std::shared_ptr<jit::Engine> engine;
  std::shared_ptr<jit::JitKernelProvider> jit;
  std::shared_ptr<ExternalRegistry> registry;
  LoadOptions load;
};

namespace {

// An executable (or what a context holds) that also keeps the runtime's state alive: the
// aliasing shared_ptr points at the executable and owns both.
struct Holder {
  std::shared_ptr<const Executable> exe;
  std::shared_ptr<const void> state;
};

std::shared_ptr<const Executable> KeepAlive(std::shared_ptr<const Executable> exe,
                                            std::shared_ptr<const void> state) {
  const Executable* raw = exe.get();
  auto holder = std::make_shared<Holder>(Holder{std::move(exe), std::move(state)});
  return std::shared_ptr<const Executable>(std::move(holder), raw);
}

// Zero-filled inputs for `sig` with its symbolic dims from `dims` (each name must be used).
StatusOr<std::vector<Tensor>> ZeroInputs(const FunctionSignature& sig,
                                         const std::map<std::string, int64_t>& dims,
                                         Allocator& allocator) {
  for (const auto& [name, value] : dims) {
    if (std::find(sig.symbols.begin(), sig.symbols.end(), name) == sig.symbols.end()) {
      return InvalidArgument("'" + sig.name + "' has no symbolic dim '" + name + "'");
    }
  }
  std::vector<Tensor> inputs;
  for (const ValueSpec& p : sig.params) {
    if (p.is_tuple) return InvalidArgument("parameter " + p.ToString() + " is a tuple");
    int64_t shape[kMaxRank];
    for (size_t d = 0; d < p.shape.size(); ++d) {
      const DimSpec& ds = p.shape[d];
      auto it = ds.fixed() ? dims.end() : dims.find(ds.symbol);
      if (!ds.fixed() && (ds.symbol.empty() || it == dims.end())) {
        return InvalidArgument("parameter " + p.ToString() + ": dim " + std::to_string(d) +
                               (ds.symbol.empty() ? " is symbolic and unnamed"
                                                  : ": no value for '" + ds.symbol + "'"));
      }
      shape[d] = ds.fixed() ? ds.value : it->second;
    }
    ASSIGN_OR_RETURN(Shape s, Shape::Make(shape, static_cast<int>(p.shape.size())));
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(allocator, p.dtype, s));
    std::memset(t.data(), 0, t.NumBytes());
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace

StatusOr<std::shared_ptr<Runtime>> Runtime::Create(const RuntimeOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  ReclaimOrphans();
  auto state = std::make_shared<State>();
  state->options = options;
  state->allocator =
      std::shared_ptr<Allocator>(new Allocator(options.allocator_cache_bytes), ReleaseAllocator);

  state->registry = std::make_shared<ExternalRegistry>();
  if (options.onednn) {
    onednn::OneDnnOptions dnn;
    dnn.max_cached_shapes = options.onednn_cached_shapes;
    RETURN_IF_ERROR(onednn::RegisterOneDnn(*state->registry, dnn));
  }
  if (options.plugins_from_environment) {
    RETURN_IF_ERROR(state->registry->LoadPluginsFromEnvironment().WithContext("$KILN_PLUGINS"));
  }
  for (const std::string& p : options.plugins) {
    RETURN_IF_ERROR(state->registry->LoadPlugin(p).WithContext("RuntimeOptions.plugins"));
  }

  jit::EngineOptions engine_options;
  engine_options.object_cache_dir = JitCacheDirectory(options.jit_cache);
  engine_options.object_cache_bytes = options.jit_cache_bytes;
  auto engine = jit::Engine::Create(engine_options);
  if (!engine.ok()) return engine.status().WithContext("JIT engine");
  state->engine = std::shared_ptr<jit::Engine>(std::move(*engine));
  jit::JitProviderOptions jit_options;
  jit_options.dispatch = options.dispatch;
  state->jit = std::make_shared<jit::JitKernelProvider>(state->engine, jit_options);

  state->load.kernels = std::make_shared<ScopedKernels>(state->jit, options.num_threads);
  state->load.externals = std::make_shared<ScopedExternals>(state->registry, options.num_threads);
  state->load.prefetch_constants = options.prefetch_constants;
  state->load.require_vendor = options.require_vendor;
  state->load.ignore_tuned_fallback = options.ignore_tuned_fallback;
  state->load.huge_page_constants = options.huge_page_constants;
  ApplyThreads(options.num_threads);
  return std::shared_ptr<Runtime>(new Runtime(std::move(state)));
}

Runtime::Runtime(std::shared_ptr<State> state) : state_(std::move(state)) {}
Runtime::~Runtime() = default;

StatusOr<std::shared_ptr<const Executable>> Runtime::Adopt(
    StatusOr<std::shared_ptr<const Executable>> exe) const {
  if (!exe.ok()) return exe.status();
  return KeepAlive(std::move(*exe), state_);
}

StatusOr<std::shared_ptr<const Executable>> Runtime::LoadFile(const std::string& path) const {
  return Adopt(Executable::LoadFile(path, state_->load));
}

StatusOr<std::shared_ptr<const Executable>> Runtime::LoadBytes(const uint8_t* data,
                                                               size_t size) const {
  if (data == nullptr) return InvalidArgument("Runtime::LoadBytes: null data");
  return Adopt(Executable::LoadBytes(data, size, state_->load));
}

StatusOr<std::unique_ptr<Context>> Runtime::NewContext(std::shared_ptr<const Executable> exe,
                                                       const ContextOptions& options) const {
  if (exe == nullptr) return InvalidArgument("Runtime::NewContext: null executable");
  ContextOptions o = options;
  if (o.allocator == nullptr) o.allocator = state_->allocator.get();
  return Context::Create(KeepAlive(std::move(exe), state_), o);
}

RuntimeStats Runtime::stats() const {
  RuntimeStats s;
  s.engine = state_->engine->stats();
  s.dispatch = state_->jit->stats();
  s.allocator = state_->allocator->stats();
  return s;
}

Status Runtime::Warmup(const std::shared_ptr<const Executable>& exe,
                       const std::map<std::string, int64_t>& dims,
                       const WarmupOptions& options) const {
  if (exe == nullptr) return InvalidArgument("warm-up: null executable");
  std::string name =
      options.function.empty() ? std::string(exe->entry_function()) : options.function;
  int index = exe->FindFunction(name);
  if (index < 0) return NotFound("warm-up: no function '" + name + "'");
  StatusOr<std::vector<Tensor>> inputs =
      ZeroInputs(exe->signature(index), dims, *state_->allocator);
  if (!inputs.ok()) return inputs.status().WithContext("warm-up");
  StatusOr<std::unique_ptr<Context>> ctx = NewContext(exe);
  if (!ctx.ok()) return ctx.status().WithContext("warm-up");
  std::vector<Tensor> outputs;
  // The startup threads compile ahead of this thread, optimized too (until every compile is
  // done: a prefetch still queued after the call must not compile the first tier).
  std::shared_ptr<void> optimized_prefetch;
  if (options.optimized) optimized_prefetch = state_->jit->OptimizedPrefetch();
  exe->Prefetch(index);
  {
    // Kernels are selected (and compiled) on this thread: optimized at once, not twice.
    std::optional<jit::OptimizedTierScope> optimized;
    if (options.optimized) optimized.emplace();
    // Hot shapes are specialized after specialize_after calls: that many make them hot now.
    const int calls =
        options.specialize ? std::max(1, state_->options.dispatch.specialize_after) : 1;
    for (int i = 0; i < calls; ++i) {
      Status s = (*ctx)->Invoke(index, *inputs, &outputs);
      if (!s.ok()) return s.WithContext("warm-up");
    }
  }
  if (options.optimized) WaitForBackgroundCompiles();
  return Status::Ok();
}

void Runtime::Prefetch(const std::shared_ptr<const Executable>& exe,
                       const std::string& function) const {
  if (exe == nullptr) return;
  exe->Prefetch(exe->FindFunction(function.empty() ? exe->entry_function() : function));
}

std::vector<int64_t> WarmupBucketValues(int64_t lo, int64_t hi, jit::Bucketing bucketing) {
  return jit::BucketRepresentatives(lo, hi, bucketing);
}

void Runtime::WaitForBackgroundCompiles() const { state_->jit->WaitForBackgroundCompiles(); }
Allocator& Runtime::allocator() const { return *state_->allocator; }
ExternalRegistry& Runtime::vendors() const { return *state_->registry; }
const LoadOptions& Runtime::load_options() const { return state_->load; }
const RuntimeOptions& Runtime::options() const { return state_->options; }

const char* LlvmVersion() { return LLVM_VERSION_STRING; }

const std::string& Runtime::jit_cache_dir() const { return state_->engine->object_cache_dir(); }

int Runtime::num_threads() const {
  return state_->options.num_threads > 0 ? state_->options.num_threads : omp_get_max_threads();
}

}  // namespace kiln
