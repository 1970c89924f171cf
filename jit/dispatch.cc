// Per-kernel dispatch: shape-keyed variant table, background specialization, bucket hints.
#include "jit/dispatch.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>

namespace kiln::jit {
namespace {

uint64_t HashKey(const int64_t* key, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < n; ++i) {
    h ^= static_cast<uint64_t>(key[i]);
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

// Rebuilds only the nodes whose subtrees contain something folded; shared nodes stay shared.
class Folder {
 public:
  Folder(const Kernel& k, const std::vector<const int64_t*>& shapes, const int64_t* dims,
         const std::vector<bool>& fold_dim, const std::vector<bool>& fold_shape)
      : shapes_(shapes), fold_shape_(fold_shape) {
    int pos = 0;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      params_[k.buffers[b].get()] = {static_cast<int>(b), pos};
      pos += k.buffers[b]->rank;
    }
    for (size_t i = 0; i < k.dims.size(); ++i) {
      if (fold_dim.empty() || fold_dim[i]) dim_values_[k.dims[i].get()] = dims[i];
    }
  }

  Expr Fold(const Expr& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    Expr out = FoldNew(e);
    memo_[e.get()] = out;
    return out;
  }

  Stmt Fold(const Stmt& s) {
    bool changed = false;
    StmtNode node = *s.get();
    for (Expr& e : node.exprs) {
      Expr f = Fold(e);
      changed |= f.get() != e.get();
      e = f;
    }
    for (auto& b : node.body) {
      if (!b) continue;
      Stmt f = Fold(Stmt(b));
      changed |= f.get() != b.get();
      b = f.node();
    }
    return changed ? Stmt(std::make_shared<const StmtNode>(std::move(node))) : s;
  }

 private:
  Expr FoldNew(const Expr& e) {
    const ExprNode& n = *e;
    if (n.op == ExprOp::kVar) {
      auto it = dim_values_.find(e.get());
      return it == dim_values_.end() ? e : IntImm(it->second, n.dtype);
    }
    if (n.op == ExprOp::kDim) {
      auto it = params_.find(n.buffer.get());
      if (it == params_.end()) return e;
      int pos = it->second.second + static_cast<int>(n.int_value);
      if (!fold_shape_.empty() && !fold_shape_[pos]) return e;
      return IntImm(shapes_[it->second.first][n.int_value], DType::kI64);
    }
    bool changed = false;
    ExprNode node = n;
    for (Expr& a : node.args) {
      Expr f = Fold(a);
      changed |= f.get() != a.get();
      a = f;
    }
    return changed ? Expr(std::make_shared<const ExprNode>(std::move(node))) : e;
  }

  const std::vector<const int64_t*>& shapes_;
  const std::vector<bool>& fold_shape_;
  std::unordered_map<const BufferNode*, std::pair<int, int>> params_;  // buffer, key offset
  std::unordered_map<const ExprNode*, int64_t> dim_values_;
  std::unordered_map<const ExprNode*, Expr> memo_;
};

int64_t ThreadCpuNanos() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// (Re-)registers the exit hook that stops every background compiler (below). LLVM constructs
// function-local statics lazily, during the first compiles (SDNode::getValueTypeList's type
// set, the pass print lists, TargetLibraryInfo's name table, ...), and exit destroys them
// before every atexit hook registered earlier: a hook registered only once, before those
// compiles, ran after the value-type set was gone and a compile still in progress aborted with
// "Do not know how to split the result of this operator!" (tests/embed/exit_test, 5% of runs).
// So the hook is registered again after compiles: every one of the first 256 (which construct
// nearly all of those statics), then the 512th, 1024th, ... (a few dozen entries of glibc's
// exit list over a process's life). Each registration runs at exit; the later ones find the
// compilers stopped.
void RegisterExitHook();
void NoteCompileForExitHook();

// Compiles through the engine and counts it; *cpu_nanos (if given) is the CPU time it took on
// this thread (what the payback rule and the budget reason about: wall time on a loaded machine
// says more about the other processes).
StatusOr<KernelRef> CompileTimed(Engine& engine, DispatchCounters& counters, const Kernel& k,
                                 Tier tier = Tier::kOptimized, int64_t* cpu_nanos = nullptr) {
  auto start = std::chrono::steady_clock::now();
  int64_t cpu_start = cpu_nanos != nullptr ? ThreadCpuNanos() : 0;
  StatusOr<KernelRef> fn = engine.Acquire(k, tier);
  if (cpu_nanos != nullptr) *cpu_nanos = ThreadCpuNanos() - cpu_start;
  NoteCompileForExitHook();
  auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  counters.compilations.fetch_add(1);
  counters.compile_nanos.fetch_add(nanos);
  return fn;
}

bool IsPowerOfTwo(int64_t v) { return v <= 0 || (v & (v - 1)) == 0; }

// The smallest power of two >= v (v itself when v <= 1).
int64_t RoundUpToPowerOfTwo(int64_t v) {
  int64_t p = 1;
  while (p < v && p < (int64_t{1} << 62)) p <<= 1;
  return v <= 1 ? v : p;
}

thread_local int optimized_tier_scopes = 0;

}  // namespace

OptimizedTierScope::OptimizedTierScope() { ++optimized_tier_scopes; }
OptimizedTierScope::~OptimizedTierScope() { --optimized_tier_scopes; }
bool OptimizedTierScope::Active() { return optimized_tier_scopes > 0; }

DispatchStats DispatchCounters::Snapshot() const {
  DispatchStats s;
  s.compilations = compilations.load();
  s.hits = hits.load();
  s.misses = misses.load();
  s.specializations = specializations.load();
  s.evictions = evictions.load();
  s.aot_kernels = aot_kernels.load();
  s.aot_first_tier = aot_first_tier.load();
  s.fast_generics = fast_generics.load();
  s.tier_ups = tier_ups.load();
  s.compile_seconds = static_cast<double>(compile_nanos.load()) * 1e-9;
  return s;
}

// ---- BackgroundCompiler. The queue state is shared with the thread so that the compiler may be
// destroyed from inside one of its own tasks (the last owner of a dispatcher can be a task). ----

struct BackgroundCompiler::State {
  State(double cpu_share, int window_ms, bool lowest_priority)
      : budget(cpu_share, int64_t{window_ms} * 1'000'000), lowest_priority(lowest_priority) {}
  std::mutex mu;
  std::condition_variable cv, idle_cv;
  std::deque<std::function<void()>> queue;
  bool running_task = false, stop = false;
  int waiters = 0;   // threads in WaitIdle: while > 0, no budget and the normal priority
  pid_t tid = 0;     // the worker's thread id, once its priority is lowered
  CpuBudget budget;  // used by the worker thread only
  const bool lowest_priority;  // nice 19 while nobody waits; else the process's priority
};

namespace {

constexpr int kBackgroundNice = 19;

// Sets the worker's nice value (best effort: raising a priority back needs CAP_SYS_NICE or an
// RLIMIT_NICE that allows it; without, the compiles just stay at the lowest priority).
void SetNice(pid_t tid, int nice) {
  if (tid != 0) setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice);
}

// The nice value of `state`'s thread while nobody waits for it.
int IdleNice(const BackgroundCompiler::State& state) {
  return state.lowest_priority ? kBackgroundNice : 0;
}

}  // namespace

namespace {

// Every compiler's state, for the exit hook. Leaked: it is used while the process exits.
struct LiveCompilers {
  std::mutex mu;
  std::vector<std::weak_ptr<BackgroundCompiler::State>> states;
  bool exiting = false;
};

LiveCompilers& Live() {
  static LiveCompilers* live = new LiveCompilers();
  return *live;
}

// Stops one compiler: queued tasks are dropped, a task in progress is waited for, and the
// thread leaves its loop (so it never touches LLVM again).
void Stop(BackgroundCompiler::State& state) {
  std::unique_lock<std::mutex> lock(state.mu);
  state.stop = true;
  state.queue.clear();
  SetNice(state.tid, 0);  // the process waits for the compile in progress
  state.cv.notify_all();
  state.idle_cv.wait(lock, [&] { return !state.running_task; });
}

// At exit, before the static destructors of LLVM (whose statics were constructed before the
// hook was registered, so they are destroyed after it runs): a compiler of a Runtime the
// program leaked would otherwise keep compiling while LLVM's globals are torn down.
void StopEveryCompilerAtExit() {
  std::vector<std::shared_ptr<BackgroundCompiler::State>> states;
  {
    std::lock_guard<std::mutex> lock(Live().mu);
    Live().exiting = true;
    for (auto& weak : Live().states) {
      if (auto state = weak.lock()) states.push_back(std::move(state));
    }
  }
  for (auto& state : states) Stop(*state);
}

void RegisterExitHook() {
  {
    std::lock_guard<std::mutex> lock(Live().mu);
    if (Live().exiting) return;  // the hook is running or has run
  }
  std::atexit(StopEveryCompilerAtExit);  // a failure (out of memory) keeps the earlier entries
}

void NoteCompileForExitHook() {
  static std::atomic<int64_t> compiles{0};
  int64_t n = compiles.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n <= 256 || (n & (n - 1)) == 0) RegisterExitHook();
}

}  // namespace

BackgroundCompiler::BackgroundCompiler(double cpu_share, int window_ms, bool lowest_priority)
    : state_(std::make_shared<State>(cpu_share, window_ms, lowest_priority)) {
  {
    // Registered by the first compiler (after the engine has set LLVM up), and again after
    // compiles (NoteCompileForExitHook).
    static const bool registered = (RegisterExitHook(), true);
    (void)registered;
    std::lock_guard<std::mutex> lock(Live().mu);
    auto& states = Live().states;
    states.erase(std::remove_if(states.begin(), states.end(),
                                [](const auto& w) { return w.expired(); }),
                 states.end());
    states.push_back(state_);
    if (Live().exiting) state_->stop = true;  // made by a static destructor: never compiles
  }
  thread_ = std::thread([state = state_] {
    // Requests come first: a compile only makes later calls faster. (Raising one's own nice
    // value needs no privilege; a failure just leaves the default priority.)
    pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    std::unique_lock<std::mutex> lock(state->mu);
    if (state->waiters == 0 && state->lowest_priority) SetNice(tid, kBackgroundNice);
    state->tid = tid;
    for (;;) {
      state->cv.wait(lock, [&] { return state->stop || !state->queue.empty(); });
      if (state->stop) break;
      // Over budget: wait (queued tasks stay queued and count as work for WaitIdle). Not while
      // a thread waits for the queue: then the compiles are what the process is waiting for.
      int64_t delay = state->budget.Delay(SteadyNanos());
      if (delay > 0 && state->waiters == 0) {
        state->cv.wait_for(lock, std::chrono::nanoseconds(delay),
                           [&] { return state->stop || state->waiters > 0; });
        continue;
      }
      std::function<void()> task = std::move(state->queue.front());
      state->queue.pop_front();
      state->running_task = true;
      lock.unlock();
      int64_t cpu_start = ThreadCpuNanos();
      task();
      task = nullptr;
      int64_t cpu = ThreadCpuNanos() - cpu_start;
      lock.lock();
      state->budget.Charge(SteadyNanos(), cpu);
      if (state->queue.empty()) {
        // LLVM frees what a compile allocated, but glibc keeps it in this thread's arena: give it
        // back once the burst of compiles is over (tens of MiB after an O3 compile of BERT's
        // kernels; the trim itself takes well under a millisecond).
        lock.unlock();
        malloc_trim(0);
        lock.lock();
      }
      state->running_task = false;
      if (state->queue.empty()) state->idle_cv.notify_all();
    }
    state->running_task = false;
    state->idle_cv.notify_all();
  });
}

BackgroundCompiler::~BackgroundCompiler() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->queue.clear();
  }
  state_->cv.notify_all();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void BackgroundCompiler::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stop) return;
    state_->queue.push_back(std::move(task));
  }
  state_->cv.notify_one();
}

void BackgroundCompiler::WaitIdle() {
  std::unique_lock<std::mutex> lock(state_->mu);
  // Someone waits for these compiles: they run at the normal priority and without a budget
  // (at nice 19 on a busy machine, a compile can take a minute).
  if (state_->waiters++ == 0) {
    SetNice(state_->tid, 0);
    state_->cv.notify_all();
  }
  state_->idle_cv.wait(
      lock, [&] { return state_->stop || (state_->queue.empty() && !state_->running_task); });
  if (--state_->waiters == 0) SetNice(state_->tid, IdleNice(*state_));
}

StartupCompiler::StartupCompiler(int threads) : threads_(std::max(threads, 1)) {}

void StartupCompiler::Submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (workers_.empty()) {
    for (int i = 0; i < threads_; ++i) {
      workers_.push_back(std::make_unique<BackgroundCompiler>(0, 2000, /*lowest_priority=*/false));
    }
  }
  workers_[next_++ % workers_.size()]->Submit(std::move(task));
}

void StartupCompiler::WaitIdle() {
  // The wait happens outside mu_: holding it would block every Submit (a request thread
  // prefetching another program) for as long as the compiles take, and would deadlock a task
  // that submits. The workers, made once by the first Submit, live as long as this object.
  std::vector<BackgroundCompiler*> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& worker : workers_) workers.push_back(worker.get());
  }
  for (BackgroundCompiler* worker : workers) worker->WaitIdle();
}

// ---- Buckets: the rounding Lookup applies to varying dims, walked over a range. ----

std::vector<int64_t> BucketRepresentatives(int64_t lo, int64_t hi, Bucketing bucketing) {
  std::vector<int64_t> values;
  if (lo < 1 || hi < lo) return values;
  for (int64_t v = lo;;) {
    // A value keeps an exact entry (every value with kExact, powers of two with kPowerOfTwo);
    // any other shares its bucket's entry with the values up to the next power of two.
    int64_t top = v;
    if (bucketing == Bucketing::kPowerOfTwo && !IsPowerOfTwo(v)) {
      int64_t bound = RoundUpToPowerOfTwo(v);
      top = bound > v ? std::min(hi, bound - 1) : hi;  // past 2^62 the rounding saturates
    }
    values.push_back(top);
    if (top >= hi) break;
    v = top + 1;
  }
  return values;
}

// ---- Specialization. ----

Kernel SpecializeKernel(const Kernel& kernel, const std::vector<const int64_t*>& shapes,
                        const int64_t* dims, const std::vector<bool>& fold_dim,
                        const std::vector<bool>& fold_shape) {
  Folder folder(kernel, shapes, dims, fold_dim, fold_shape);
  Kernel out = kernel;
  out.body = folder.Fold(kernel.body);
  return out;
}

// ---- KernelDispatcher. ----

KernelDispatcher::CompileJob KernelDispatcher::Job() const {
  return CompileJob{engine_, counters_, payload_.kernel, payload_.dim_bindings, key_offset_};
}

std::shared_ptr<KernelDispatcher> KernelDispatcher::Create(
    std::shared_ptr<Engine> engine, std::shared_ptr<BackgroundCompiler> compiler,
    std::shared_ptr<DispatchCounters> counters, KernelPayload payload,
    const DispatchOptions& options,
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& hints, KernelRef generic) {
  std::shared_ptr<KernelDispatcher> d(new KernelDispatcher());
  d->engine_ = std::move(engine);
  d->compiler_ = std::move(compiler);
  d->counters_ = std::move(counters);
  d->payload_ = std::move(payload);
  d->options_ = options;
  d->table_ = std::make_shared<Table>(
      options.min_share, options.payback, static_cast<int64_t>(options.assumed_compile_ms * 1e6));
  d->table_->counters = d->counters_;
  d->table_->measure_compiles = options.clock == nullptr;
  if (generic) {
    // Code compiled ahead of time: final if optimized for this host's vectors, else a first
    // tier that CountFirstTierCall tiers up (not with tiering off, which the caller avoids).
    const bool final_code = generic.tier() == Tier::kOptimized || !options.tiering;
    d->table_->generic_code = std::move(generic);
    d->table_->generic_final.store(final_code, std::memory_order_relaxed);
    d->table_->generic.store(d->table_->generic_code.fn(), std::memory_order_release);
  }
  for (const Buffer& b : d->payload_.kernel.buffers) {
    d->key_offset_.push_back(d->key_size_);
    d->key_size_ += b->rank;
  }
  const Kernel& k = d->payload_.kernel;
  std::vector<std::function<void()>> tasks;
  for (const auto& [symbol, buckets] : hints) {
    for (size_t i = 0; i < k.dims.size(); ++i) {
      if (k.dims[i].name() != symbol) continue;
      const DimBinding& bind = d->payload_.dim_bindings[i];
      for (int64_t value : buckets) {
        if (value < 0 ||
            static_cast<int>(d->table_->hint_variants.size()) >= options.max_hint_variants) {
          continue;
        }
        auto hv = std::make_unique<HintVariant>();
        hv->key_pos = d->key_offset_[bind.buffer] + bind.axis;
        hv->value = value;
        HintVariant* raw = hv.get();
        d->table_->hint_variants.push_back(std::move(hv));
        std::weak_ptr<Table> weak = d->table_;
        tasks.push_back([weak, raw, i, key_size = d->key_size_, job = d->Job()] {
          if (weak.expired()) return;
          std::vector<int64_t> key(key_size, 0), dims(job.kernel.dims.size(), 0);
          key[raw->key_pos] = raw->value;
          dims[i] = raw->value;
          std::vector<const int64_t*> shapes;
          for (int off : job.key_offset) shapes.push_back(key.data() + off);
          std::vector<bool> fold_dim(dims.size(), false), fold_shape(key.size(), false);
          fold_dim[i] = true;
          fold_shape[raw->key_pos] = true;
          auto fn =
              CompileTimed(*job.engine, *job.counters,
                           SpecializeKernel(job.kernel, shapes, dims.data(), fold_dim, fold_shape));
          // `raw` is owned by the table, which the lock keeps alive.
          std::shared_ptr<Table> table = weak.lock();
          if (table && fn.ok()) {
            raw->code = *fn;
            raw->fn.store(fn->fn(), std::memory_order_release);
            table->counters->specializations.fetch_add(1);
          }
        });
      }
    }
  }
  // Submitted once hint_variants is complete: readers scan it without a lock.
  for (auto& task : tasks) d->compiler_->Submit(std::move(task));
  return d;
}

StatusOr<KernelFn> KernelDispatcher::Generic() {
  Table& t = *table_;
  KernelFn fn = t.generic.load(std::memory_order_acquire);
  if (fn) return fn;
  std::lock_guard<std::mutex> lock(t.generic_mu);
  fn = t.generic.load(std::memory_order_acquire);
  if (fn) return fn;
  if (!t.generic_error.ok()) return t.generic_error;
  return CompileGeneric(options_.tiering && !OptimizedTierScope::Active() ? Tier::kFast
                                                                         : Tier::kOptimized);
}

void KernelDispatcher::Prefetch(StartupCompiler& startup,
                                std::shared_ptr<const std::atomic<int>> optimized_requests) {
  if (table_->generic.load(std::memory_order_acquire)) return;
  startup.Submit([weak = weak_from_this(), optimized_requests] {
    std::shared_ptr<KernelDispatcher> d = weak.lock();
    if (!d) return;
    Table& t = *d->table_;
    // Held by a first call (or another prefetch) that compiles it now: nothing to do.
    std::unique_lock<std::mutex> lock(t.generic_mu, std::try_to_lock);
    if (!lock.owns_lock() || t.generic.load(std::memory_order_acquire) ||
        !t.generic_error.ok()) {
      return;
    }
    bool fast = d->options_.tiering && optimized_requests->load() == 0;
    (void)d->CompileGeneric(fast ? Tier::kFast : Tier::kOptimized);  // Select reports errors
  });
}

StatusOr<KernelFn> KernelDispatcher::CompileGeneric(Tier tier) {
  Table& t = *table_;
  int64_t cpu = 0;
  StatusOr<KernelRef> compiled = CompileTimed(*engine_, *counters_, payload_.kernel, tier, &cpu);
  if (!compiled.ok()) {
    t.generic_error = compiled.status();
    return t.generic_error;
  }
  t.generic_code = *compiled;
  if (compiled->tier() == Tier::kFast) {
    counters_->fast_generics.fetch_add(1);
  } else {
    t.generic_final.store(true);  // optimized already (e.g. from the persistent cache)
    if (t.measure_compiles) t.payback.RecordCompile(cpu);
  }
  t.generic.store(compiled->fn(), std::memory_order_release);
  return compiled->fn();
}

void KernelDispatcher::CountFirstTierCall() {
  Table& t = *table_;
  int64_t calls = t.generic_calls.fetch_add(1, std::memory_order_relaxed) + 1;
  // With a persistent cache the optimized code is compiled once for every later process, so it
  // is worth compiling (and storing) at once.
  int64_t threshold = engine_->object_cache_dir().empty() ? options_.tier_up_after : 1;
  if (calls < threshold && !OptimizedTierScope::Active()) return;
  if (t.tier_up_started.exchange(true)) return;
  compiler_->Submit([weak = std::weak_ptr<Table>(table_), job = Job()] {
    if (weak.expired()) return;
    int64_t cpu = 0;
    StatusOr<KernelRef> fn =
        CompileTimed(*job.engine, *job.counters, job.kernel, Tier::kOptimized, &cpu);
    std::shared_ptr<Table> table = weak.lock();
    if (!table) return;
    if (table->measure_compiles) table->payback.RecordCompile(cpu);
    // Released after the lock; a call that loaded the first tier's address keeps running it
    // safely: the engine frees that code only once no EpochGuard alive now remains.
    KernelRef replaced;
    {
      std::lock_guard<std::mutex> lock(table->generic_mu);
      // A failed optimized compile keeps the working first tier for good (not retried).
      if (fn.ok()) {
        replaced = std::move(table->generic_code);
        table->generic_code = *fn;
        table->generic.store(fn->fn(), std::memory_order_release);
        table->counters->tier_ups.fetch_add(1);
      }
      table->generic_final.store(true);
    }
  });
}

Tier KernelDispatcher::generic_tier() const {
  std::lock_guard<std::mutex> lock(table_->generic_mu);
  if (!table_->generic_code) return options_.tiering ? Tier::kFast : Tier::kOptimized;
  return table_->generic_code.tier();
}

KernelFn KernelDispatcher::FindHintVariant(const int64_t* key) const {
  for (const auto& hv : table_->hint_variants) {
    if (key[hv->key_pos] != hv->value) continue;
    KernelFn fn = hv->fn.load(std::memory_order_acquire);
    if (fn) return fn;
  }
  return nullptr;
}

KernelFn KernelDispatcher::Lookup(const int64_t* key, bool* submit, uint64_t* hash, Entry** hot,
                                  KernelRef* evicted, int64_t* price) {
  Table& t = *table_;
  const int n = key_size_;
  if (t.first_key.empty()) {
    t.first_key.assign(key, key + n);
    t.varying.assign(n, false);
  } else {
    for (int p = 0; p < n; ++p) {
      if (key[p] != t.first_key[p]) t.varying[p] = true;
    }
  }
  // Shapes whose varying dims are all bucket bounds keep exact entries; others share a bucket.
  bool exact = true;
  if (options_.bucketing == Bucketing::kPowerOfTwo) {
    for (int p = 0; p < n && exact; ++p) exact = !t.varying[p] || IsPowerOfTwo(key[p]);
  }
  int64_t table_key[kMaxShapeKey];
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int p = 0; p < n; ++p) {
    bool bucketed = !exact && t.varying[p];
    table_key[p] = bucketed ? RoundUpToPowerOfTwo(key[p]) : key[p];
    if (bucketed) h = (h ^ static_cast<uint64_t>(p + 1)) * 0x100000001b3ull;
  }
  h = HashKey(table_key, n) ^ (exact ? 0 : h);
  auto it = t.entries.find(h);
  if (it == t.entries.end()) {
    if (static_cast<int>(t.entries.size()) >= options_.max_shapes) {
      auto victim = t.entries.find(t.lru.back());
      *evicted = std::move(victim->second.code);
      t.entries.erase(victim);
      t.lru.pop_back();
      counters_->evictions.fetch_add(1);
    }
    t.lru.push_front(h);
    it = t.entries.emplace(h, Entry()).first;
    Entry& e = it->second;
    e.key.assign(table_key, table_key + n);
    e.exact = exact;
    if (!exact) e.varying = t.varying;
    e.lru = t.lru.begin();
  } else {
    t.lru.splice(t.lru.begin(), t.lru, it->second.lru);
  }
  Entry& e = it->second;
  // A hash collision (another entry) just runs generic for the newcomer.
  if (e.exact != exact || !std::equal(e.key.begin(), e.key.end(), table_key) ||
      (!exact && e.varying != t.varying)) {
    return nullptr;
  }
  if (KernelFn fn = e.code.fn()) return fn;
  // A hot entry waits (counting on) until the kernel's run time pays for its compile.
  if (!e.pending && ++e.count >= options_.specialize_after && t.payback.TrySpend(counters_->run_nanos.load(std::memory_order_relaxed), price)) {
    e.pending = true;
    *submit = true;
    *hash = h;
    *hot = &e;
  }
  return nullptr;
}

void KernelDispatcher::SubmitSpecialization(uint64_t h, const Entry& entry, const int64_t* key,
                                            int64_t price) {
  // Which key positions the variant folds: all for an exact entry, else those that never varied
  // (their values are the same for every shape of the bucket).
  std::vector<bool> fold_shape, fold_dim;
  if (!entry.exact) {
    for (bool v : entry.varying) fold_shape.push_back(!v);
    for (const DimBinding& b : payload_.dim_bindings) {
      fold_dim.push_back(fold_shape[key_offset_[b.buffer] + b.axis]);
    }
  }
  std::weak_ptr<Table> weak = table_;
  std::vector<int64_t> k(key, key + key_size_);
  compiler_->Submit([weak, h, price, k = std::move(k), table_key = entry.key, job = Job(),
                     fold_shape = std::move(fold_shape), fold_dim = std::move(fold_dim)] {
    if (weak.expired()) return;
    std::vector<const int64_t*> shapes;
    for (int off : job.key_offset) shapes.push_back(k.data() + off);
    std::vector<int64_t> dims;
    for (const DimBinding& b : job.bindings) dims.push_back(k[job.key_offset[b.buffer] + b.axis]);
    int64_t cpu = 0;
    StatusOr<KernelRef> fn =
        CompileTimed(*job.engine, *job.counters,
                     SpecializeKernel(job.kernel, shapes, dims.data(), fold_dim, fold_shape),
                     Tier::kOptimized, &cpu);
    std::shared_ptr<Table> table = weak.lock();
    if (!table) return;
    if (table->measure_compiles) {
      // The price was a guess: a variant another bucket had compiled already cost nothing.
      table->payback.Settle(price, cpu);
      table->payback.RecordCompile(cpu);
    }
    std::lock_guard<std::mutex> lock(table->mu);
    auto it = table->entries.find(h);
    // Evicted meanwhile: the variant is not installed (and freed with `fn`). A failed
    // compile leaves the entry pending for good, so it is not retried on every call.
    if (it == table->entries.end() || it->second.key != table_key || !fn.ok()) return;
    it->second.code = *fn;
    it->second.pending = false;
    table->counters->specializations.fetch_add(1);
  });
}

StatusOr<KernelFn> KernelDispatcher::Select(const int64_t* key, CallTiming* timing) {
  if (timing != nullptr) *timing = CallTiming::kNone;
  ASSIGN_OR_RETURN(KernelFn generic, Generic());
  KernelFn fn = nullptr;
  Table& t = *table_;
  const bool specializing = options_.specialize_after > 0 && options_.max_shapes > 0;
  bool sampled = false;  // a call the payback rule times
  if (specializing) {
    bool submit = false;
    uint64_t h = 0;
    Entry* hot = nullptr;
    int64_t price = 0;
    KernelRef evicted;  // released after the lock: the last reference retires the code
    std::lock_guard<std::mutex> lock(t.mu);
    fn = Lookup(key, &submit, &h, &hot, &evicted, &price);
    sampled = t.calls++ % std::max(options_.time_every, 1) == 0;
    if (submit) SubmitSpecialization(h, *hot, key, price);
  }
  if (!fn && !t.hint_variants.empty()) fn = FindHintVariant(key);
  const bool timed = timing != nullptr && sampled && t.payback.enabled();
  if (fn) {
    counters_->hits.fetch_add(1, std::memory_order_relaxed);
    if (timed) *timing = CallTiming::kSpecialized;
    return fn;
  }
  counters_->misses.fetch_add(1, std::memory_order_relaxed);
  if (timed) *timing = CallTiming::kUnspecialized;
  if (!t.generic_final.load(std::memory_order_relaxed) &&
      !t.tier_up_started.load(std::memory_order_relaxed)) {
    CountFirstTierCall();
  }
  return generic;
}

void KernelDispatcher::Record(CallTiming timing, int64_t run_nanos) {
  if (timing == CallTiming::kNone) return;
  const int64_t nanos = run_nanos * std::max(options_.time_every, 1);  // the calls not timed
  counters_->run_nanos.fetch_add(nanos, std::memory_order_relaxed);
  table_->payback.Record(nanos, timing == CallTiming::kSpecialized);
}

int64_t KernelDispatcher::Now() const {
  return options_.clock != nullptr ? options_.clock() : SteadyNanos();
}

int KernelDispatcher::tracked_shapes() const {
  std::lock_guard<std::mutex> lock(table_->mu);
  return static_cast<int>(table_->entries.size());
}

}  // namespace kiln::jit
