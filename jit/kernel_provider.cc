// JitKernelProvider: payload decoding and table checks at load; stack-only argument marshalling.
#include "jit/kernel_provider.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "base/epoch.h"
#include "jit/aot_objects.h"
#include "jit/kernel_ir_serialize.h"
#include "jit/precondition.h"
#include "jit/runtime.h"

namespace kiln::jit {
namespace {

// The last shape key whose arguments passed a kernel's preconditions, so that the steady state
// (one shape call after call) compares the key instead of evaluating the preconditions again:
// they read dims only, and the key holds every argument's dims. A seqlock of atomics, so any
// number of threads read it at once without a lock (and without a data race); a writer that
// finds another writing skips its update. A reader that sees a write in progress, or a key that
// differs, evaluates the preconditions as without the memo.
class PassedShapeMemo {
 public:
  explicit PassedShapeMemo(int key_size) : key_(static_cast<size_t>(key_size)) {}

  bool Holds(const int64_t* key) const {
    const uint64_t seq = seq_.load(std::memory_order_acquire);
    if (seq == 0 || (seq & 1) != 0) return false;  // nothing recorded yet, or a write under way
    bool same = true;
    for (size_t i = 0; i < key_.size(); ++i) {
      same &= key_[i].load(std::memory_order_relaxed) == key[i];
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    return same && seq_.load(std::memory_order_relaxed) == seq;
  }

  void Record(const int64_t* key) {
    if (writing_.exchange(true, std::memory_order_acquire)) return;
    const uint64_t seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    for (size_t i = 0; i < key_.size(); ++i) key_[i].store(key[i], std::memory_order_relaxed);
    seq_.store(seq + 2, std::memory_order_release);
    writing_.store(false, std::memory_order_release);
  }

 private:
  std::atomic<uint64_t> seq_{0};  // odd while a write is under way; 0: no key yet
  std::atomic<bool> writing_{false};
  std::vector<std::atomic<int64_t>> key_;
};

class JitTensorFunction : public TensorFunction {
 public:
  JitTensorFunction(std::shared_ptr<KernelDispatcher> dispatcher, PreconditionProgram pre,
                    std::weak_ptr<StartupCompiler> startup,
                    std::shared_ptr<const std::atomic<int>> optimized_prefetch)
      : dispatcher_(std::move(dispatcher)),
        pre_(std::move(pre)),
        sites_(IndexCheckSites(dispatcher_->kernel())),
        passed_(dispatcher_->key_size()),
        startup_(std::move(startup)),
        optimized_prefetch_(std::move(optimized_prefetch)) {}

  void Prefetch() override {
    // The provider (which owns the threads) may be gone: then the first call compiles.
    if (std::shared_ptr<StartupCompiler> startup = startup_.lock()) {
      dispatcher_->Prefetch(*startup, optimized_prefetch_);
    }
  }

  Status Run(const Tensor* const* args, int num_inputs, int num_outputs) override {
    EpochGuard guard;  // nested (a thread-local count) inside the VM's per-run guard
    const Kernel& k = dispatcher_->kernel();
    const int n = num_inputs + num_outputs;
    if (n != static_cast<int>(k.buffers.size())) {
      return InvalidArgument("kernel '" + k.name + "': " + std::to_string(n) + " arguments for " +
                             std::to_string(k.buffers.size()) + " buffers");
    }
    // Sizes were checked at Prepare, so these fixed arrays always suffice.
    void* buffers[kMaxDispatchBuffers];
    const int64_t* shapes[kMaxDispatchBuffers];
    const int64_t* strides[kMaxDispatchBuffers];
    int64_t key[kMaxShapeKey];
    int64_t dims[kMaxDispatchDims];
    int pos = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor* t = args[i];
      const BufferNode& b = *k.buffers[i];
      if (t == nullptr || t->empty()) return ArgError(i, "is empty");
      if (t->rank() != b.rank || t->dtype() != b.dtype) {
        return ArgError(i, "is " + t->TypeString() + ", the kernel expects " +
                               DTypeShortName(b.dtype) + " of rank " + std::to_string(b.rank));
      }
      if (b.contiguous && !t->IsContiguous()) return ArgError(i, "is not contiguous");
      buffers[i] = t->data();
      shapes[i] = t->shape().data();
      strides[i] = t->strides();
      for (int d = 0; d < b.rank; ++d) key[pos++] = t->dim(d);
    }
    if (!pre_.empty() && !passed_.Holds(key)) {
      int failed = pre_.Check(shapes);
      if (failed >= 0) {
        std::string got;
        for (int i = 0; i < n; ++i) got += (i ? ", " : "") + args[i]->TypeString();
        std::string why = pre_.Explain(failed, shapes);
        return InvalidArgument("kernel '" + k.name + "': the arguments (" + got +
                               ") violate its precondition " + pre_.Describe(failed) +
                               (why.empty() ? "" : ": " + why));
      }
      passed_.Record(key);
    }
    const std::vector<DimBinding>& bindings = dispatcher_->dim_bindings();
    for (size_t i = 0; i < bindings.size(); ++i) {
      dims[i] = args[bindings[i].buffer]->dim(bindings[i].axis);
    }
    auto timing = KernelDispatcher::CallTiming::kNone;
    ASSIGN_OR_RETURN(KernelFn fn, dispatcher_->Select(key, &timing));
    KernelErrorScope errors;
    // Timed for the payback rule (each kernel's share of the run time, and its credit).
    const bool timed = timing != KernelDispatcher::CallTiming::kNone;
    int64_t start = timed ? dispatcher_->Now() : 0;
    fn(buffers, shapes, strides, bindings.empty() ? nullptr : dims);
    if (timed) dispatcher_->Record(timing, dispatcher_->Now() - start);
    if (errors.failed()) return errors.ToStatus(sites_).WithContext("kernel '" + k.name + "'");
    return Status::Ok();
  }

 private:
  Status ArgError(int i, const std::string& what) const {
    const Kernel& k = dispatcher_->kernel();
    return InvalidArgument("kernel '" + k.name + "': argument " + std::to_string(i) + " ('" +
                           k.buffers[i]->name + "') " + what);
  }

  std::shared_ptr<KernelDispatcher> dispatcher_;
  PreconditionProgram pre_;
  std::vector<std::string> sites_;  // IndexCheckSites of the kernel, for its error messages
  PassedShapeMemo passed_;          // skips pre_ for the last key that passed it
  std::weak_ptr<StartupCompiler> startup_;
  std::shared_ptr<const std::atomic<int>> optimized_prefetch_;
};

std::string Quote(std::string_view what, std::string_view name) {
  return std::string(what) + " '" + std::string(name) + "'";
}

}  // namespace

JitKernelProvider::JitKernelProvider(std::shared_ptr<Engine> engine,
                                     const JitProviderOptions& options)
    : engine_(std::move(engine)),
      options_(options),
      compiler_(std::make_shared<BackgroundCompiler>(options.dispatch.compile_cpu_share,
                                                     options.dispatch.compile_window_ms)),
      counters_(std::make_shared<DispatchCounters>()) {
  int threads = options.dispatch.startup_compile_threads;
  if (threads < 0) threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
  if (threads > 0) startup_ = std::make_shared<StartupCompiler>(threads);
}

JitKernelProvider::~JitKernelProvider() = default;

void JitKernelProvider::WaitForBackgroundCompiles() {
  if (startup_) startup_->WaitIdle();
  compiler_->WaitIdle();
}

std::shared_ptr<void> JitKernelProvider::OptimizedPrefetch() {
  optimized_prefetch_->fetch_add(1);
  return std::shared_ptr<void>(nullptr, [count = optimized_prefetch_](void*) { count->fetch_sub(1); });
}

StatusOr<KernelPayload> JitKernelProvider::Decode(std::string_view what, std::string_view name,
                                                  std::string_view format, const uint8_t* payload,
                                                  size_t size, size_t num_buffers) {
  const std::string where = Quote(what, name);
  if (format != kPayloadFormat) {
    return Unsupported(where + ": payload format '" + std::string(format) + "' is not '" +
                       kPayloadFormat + "'");
  }
  StatusOr<KernelPayload> p = DeserializeKernelPayload(payload, size);
  if (!p.ok()) return p.status().WithContext(where);
  const Kernel& k = p->kernel;
  if (k.buffers.size() != num_buffers) {
    return InvalidArgument(where + ": the payload kernel has " + std::to_string(k.buffers.size()) +
                           " buffers, the table declares " + std::to_string(num_buffers) +
                           " inputs and outputs");
  }
  int key_size = 0;
  for (const Buffer& b : k.buffers) key_size += b->rank;
  if (k.buffers.size() > static_cast<size_t>(kMaxDispatchBuffers) ||
      k.dims.size() > static_cast<size_t>(kMaxDispatchDims) || key_size > kMaxShapeKey) {
    return Unsupported(where + ": more than " + std::to_string(kMaxDispatchBuffers) + " buffers, " +
                       std::to_string(kMaxDispatchDims) + " dims or " +
                       std::to_string(kMaxShapeKey) + " buffer dims in all");
  }
  return p;
}

int JitKernelProvider::SelectCodeTarget(const std::vector<CodeTargetSpec>& targets) {
  CodegenOptions options;
  options.use_libmvec = engine_->uses_libmvec();
  return ChooseCodeTarget(targets, engine_->target(), AotAbi(options), nullptr,
                          options_.dispatch.tiering ? NarrowerCode::kFirstTier
                                                    : NarrowerCode::kIgnore);
}

StatusOr<KernelRef> JitKernelProvider::LinkCode(const CodeObjectSpec& code, const Kernel& kernel) {
  if (code.empty()) return KernelRef();
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::MemoryBuffer> object,
                   LoadCodeObject(code, engine_->target()));
  // Code for narrower vectors than the host's (SelectCodeTarget chose it only with tiering on)
  // is a first tier, which the dispatcher tiers up as it would the JIT's.
  const Tier tier = HostHasWiderVectors(code.target_features, engine_->target()) ? Tier::kFast
                                                                                  : Tier::kOptimized;
  bool compiled = false;
  ASSIGN_OR_RETURN(KernelRef ref, engine_->AcquireObject(kernel, std::move(object),
                                                         std::string(code.symbol), &compiled, tier));
  (compiled ? counters_->compilations : counters_->aot_kernels).fetch_add(1);
  if (compiled && ref.tier() == Tier::kFast) counters_->fast_generics.fetch_add(1);
  if (!compiled && ref.tier() == Tier::kFast) counters_->aot_first_tier.fetch_add(1);
  return ref;
}

StatusOr<std::unique_ptr<TensorFunction>> JitKernelProvider::PrepareKernel(const KernelSpec& spec) {
  std::vector<DType> dtypes = spec.input_dtypes;
  dtypes.insert(dtypes.end(), spec.output_dtypes.begin(), spec.output_dtypes.end());
  ASSIGN_OR_RETURN(KernelPayload p, Decode("kernel", spec.name, spec.payload_format, spec.payload,
                                           spec.payload_size, dtypes.size()));
  for (size_t i = 0; i < dtypes.size(); ++i) {
    DType want = p.kernel.buffers[i]->dtype;
    if (want != dtypes[i]) {
      return InvalidArgument(Quote("kernel", spec.name) + ": buffer " + std::to_string(i) + " ('" +
                             p.kernel.buffers[i]->name + "') is " + DTypeShortName(want) +
                             " but the table says " + DTypeShortName(dtypes[i]));
    }
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> hints;
  for (const DispatchHintSpec& h : spec.dispatch_hints) {
    hints.emplace_back(std::string(h.symbol), h.buckets);
  }
  ASSIGN_OR_RETURN(PreconditionProgram pre, PreconditionProgram::Compile(p.kernel, p.preconditions));
  ASSIGN_OR_RETURN(KernelRef generic, LinkCode(spec.code, p.kernel));
  auto dispatcher = KernelDispatcher::Create(engine_, compiler_, counters_, std::move(p),
                                             options_.dispatch, hints, std::move(generic));
  return std::unique_ptr<TensorFunction>(new JitTensorFunction(
      std::move(dispatcher), std::move(pre), startup_, optimized_prefetch_));
}

StatusOr<std::unique_ptr<TensorFunction>> JitKernelProvider::PrepareShapeFunction(
    const ShapeFunctionSpec& spec) {
  ASSIGN_OR_RETURN(
      KernelPayload p,
      Decode("shape function", spec.name, spec.payload_format, spec.payload, spec.payload_size,
             static_cast<size_t>(spec.num_inputs + spec.num_outputs)));
  for (int i = spec.num_inputs; i < spec.num_inputs + spec.num_outputs; ++i) {
    const BufferNode& b = *p.kernel.buffers[i];
    if (b.dtype != DType::kI64 || b.rank != 1) {
      return InvalidArgument(Quote("shape function", spec.name) + ": output buffer '" + b.name +
                             "' must be i64 of rank 1");
    }
  }
  ASSIGN_OR_RETURN(PreconditionProgram pre, PreconditionProgram::Compile(p.kernel, p.preconditions));
  ASSIGN_OR_RETURN(KernelRef generic, LinkCode(spec.code, p.kernel));
  auto dispatcher = KernelDispatcher::Create(engine_, compiler_, counters_, std::move(p),
                                             options_.dispatch, {}, std::move(generic));
  return std::unique_ptr<TensorFunction>(new JitTensorFunction(
      std::move(dispatcher), std::move(pre), startup_, optimized_prefetch_));
}

}  // namespace kiln::jit
