// The models a server serves: loaded once through a kiln::Runtime, shared by all workers.
#ifndef KILN_EXAMPLES_SERVING_MODEL_REPOSITORY_H_
#define KILN_EXAMPLES_SERVING_MODEL_REPOSITORY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "embed/runtime.h"
#include "examples/serving/json.h"
#include "vm/context.h"
#include "vm/executable.h"

namespace kiln::serving {

/// One served model: an executable and the function requests run (the entry function).
/// Immutable after loading; shared by every worker thread.
struct Model {
  std::string name;
  std::string path;
  std::shared_ptr<const Executable> exe;
  int function = -1;
  /// Per-input and per-output metadata of `function` (exe->signature(function)).
  const FunctionSignature& signature() const { return exe->signature(function); }
  /// KServe model metadata: {"name","versions","platform":"kiln","inputs":[...],"outputs":[...]}
  /// with dynamic dims as -1.
  std::string MetadataJson() const;
};

/// A `--model NAME=FILE` argument.
struct ModelSource {
  std::string name;
  std::string path;
};

/// Parses "NAME=FILE". InvalidArgument if either side is empty or the name has characters
/// other than [A-Za-z0-9_.-] (names appear in URL paths).
StatusOr<ModelSource> ParseModelFlag(std::string_view flag);

/// The set of models, by name. Thread-safe to read (it is never modified after Load).
class ModelRepository {
 public:
  /// Loads and verifies every source with `runtime` (its JIT, vendors, threads and allocator
  /// serve every model; the repository keeps it alive). Errors name the model and file;
  /// InvalidArgument for a null runtime with sources, a duplicate name or a model whose entry
  /// function has a tuple input or output (not expressible in KServe).
  static StatusOr<std::shared_ptr<const ModelRepository>> Load(
      const std::vector<ModelSource>& sources, std::shared_ptr<const Runtime> runtime);

  /// A context for `model` (one of models()) allocating from the runtime's allocator. Errors
  /// are Runtime::NewContext's.
  StatusOr<std::unique_ptr<Context>> NewContext(const Model& model) const;

  /// Null if no model is called `name`.
  const Model* Find(std::string_view name) const;
  const std::vector<Model>& models() const { return models_; }

 private:
  std::vector<Model> models_;
  std::shared_ptr<const Runtime> runtime_;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_MODEL_REPOSITORY_H_
