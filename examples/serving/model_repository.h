// The models a server serves: loaded through a kiln::Runtime, swapped in and out by name while
// requests run (a request holds its model version by shared_ptr until it finishes).
#ifndef KILN_EXAMPLES_SERVING_MODEL_REPOSITORY_H_
#define KILN_EXAMPLES_SERVING_MODEL_REPOSITORY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "embed/runtime.h"
#include "examples/serving/batcher.h"
#include "examples/serving/json.h"
#include "vm/context.h"
#include "vm/executable.h"

namespace kiln::serving {

class Model;

/// A context of one model version, taken from the model's pool for one request and returned
/// to it when destroyed. Move-only; keeps the model alive.
class ContextLease {
 public:
  ContextLease() = default;
  ContextLease(std::shared_ptr<const Model> model, std::unique_ptr<Context> ctx)
      : model_(std::move(model)), ctx_(std::move(ctx)) {}
  ContextLease(ContextLease&&) = default;
  /// Returns the context held (if any) to its pool, then takes `other`'s.
  ContextLease& operator=(ContextLease&& other);
  ~ContextLease() { Return(); }
  Context& operator*() const { return *ctx_; }
  Context* operator->() const { return ctx_.get(); }

 private:
  void Return();
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Context> ctx_;
};

/// One loaded version of a served model: an executable and the function requests run (the
/// entry function), plus a pool of VM contexts for it. Immutable apart from the (internally
/// locked) context pool; shared by every thread, and kept alive by the requests using it, so
/// replacing or unloading it never disturbs a request in flight.
class Model : public std::enable_shared_from_this<Model> {
 public:
  std::string name;
  std::string path;
  /// "1" for the first load of `name`, then "2", ... for each reload.
  std::string version = "1";
  std::shared_ptr<const Executable> exe;
  int function = -1;
  /// Per-input and per-output metadata of `function` (exe->signature(function)).
  const FunctionSignature& signature() const { return exe->signature(function); }
  /// KServe model metadata: {"name","versions","platform":"kiln","inputs":[...],"outputs":[...]}
  /// with dynamic dims as -1.
  std::string MetadataJson() const;
  /// A context from the pool, or a new one (errors are Runtime::NewContext's). Thread-safe.
  StatusOr<ContextLease> AcquireContext() const;
  /// This version's batcher, made on first use with `options`; null if batching is off
  /// (max_batch <= 1) or the model has no common symbolic batch dim (IsBatchable).
  Batcher* GetBatcher(const BatchOptions& options) const;
  /// The runtime the version was loaded with (its JIT compiles the model's kernels).
  const Runtime& runtime() const { return *runtime_; }

 private:
  friend class ModelRepository;
  friend class ContextLease;
  std::shared_ptr<const Runtime> runtime_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Context>> idle_contexts_;
  mutable std::once_flag batcher_once_;
  mutable std::unique_ptr<Batcher> batcher_;
};

/// A `--model NAME=FILE` argument.
struct ModelSource {
  std::string name;
  std::string path;
};

/// Parses "NAME=FILE". InvalidArgument if either side is empty or the name has characters
/// other than [A-Za-z0-9_.-] (names appear in URL paths).
StatusOr<ModelSource> ParseModelFlag(std::string_view flag);

/// One row of the repository index (KServe's repository extension).
struct RepositoryEntry {
  std::string name;
  std::string version;  // of the loaded version; the last one served when unloaded
  std::string state;    // "READY" or "UNAVAILABLE"
  std::string reason;   // why unavailable ("unloaded", or the load error)
};

/// The set of models, by name. Every method is thread-safe; Find hands out the current version,
/// which stays valid for as long as the caller holds it, whatever loads and unloads happen.
class ModelRepository {
 public:
  /// Loads and verifies every source with `runtime` (its JIT, vendors, threads and allocator
  /// serve every model; the repository keeps it alive). Errors name the model and file;
  /// InvalidArgument for a null runtime with sources, a duplicate name or a model whose entry
  /// function has a tuple input or output (not expressible in KServe).
  static StatusOr<std::shared_ptr<ModelRepository>> Load(const std::vector<ModelSource>& sources,
                                                        std::shared_ptr<const Runtime> runtime);

  /// Runs on a new version before it is served (warm-up); an error keeps the old version.
  using Prepare = std::function<Status(const Model&)>;
  /// Loads `name` (again) from the file it was last loaded from, runs `prepare` on it, then
  /// swaps it in atomically; requests already running finish on the old version. NotFound for
  /// a name the repository never had; load and `prepare` errors as Load's (the current version,
  /// if any, stays).
  Status LoadModel(std::string_view name, const Prepare& prepare = nullptr);
  /// Stops serving `name` (requests in flight finish). NotFound if it is not loaded.
  Status UnloadModel(std::string_view name);
  /// Every model ever loaded, by name, loaded or not.
  std::vector<RepositoryEntry> Index() const;

  /// The current version of `name`; null if no such model is loaded.
  std::shared_ptr<const Model> Find(std::string_view name) const;
  /// The loaded models, by name.
  std::vector<std::shared_ptr<const Model>> models() const;
  /// The runtime serving every model (null for an empty repository without one).
  const std::shared_ptr<const Runtime>& runtime() const { return runtime_; }

 private:
  StatusOr<std::shared_ptr<Model>> LoadOne(const ModelSource& source, int version) const;

  struct Slot {
    std::string path;
    int version = 0;
    std::shared_ptr<const Model> current;  // null when unloaded
    std::string reason;
  };
  std::shared_ptr<const Runtime> runtime_;
  mutable std::mutex mu_;
  std::map<std::string, Slot, std::less<>> slots_;
  std::mutex load_mu_;  // one load or unload at a time (loads run outside mu_)
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_MODEL_REPOSITORY_H_
