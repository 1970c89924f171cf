// Loading, reloading and unloading served models; their context pools; KServe metadata.
#include "examples/serving/model_repository.h"

#include "examples/serving/tensor_json.h"

namespace kiln::serving {

namespace {

void WriteTensorSpecs(const std::vector<ValueSpec>& specs, JsonWriter& w) {
  w.BeginArray();
  for (const ValueSpec& v : specs) {
    w.BeginObject();
    w.Key("name");
    w.String(v.name);
    w.Key("datatype");
    w.String(KServeDatatype(v.dtype));
    w.Key("shape");
    w.BeginArray();
    for (const DimSpec& d : v.shape) w.Int(d.fixed() ? d.value : -1);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

Status CheckServable(const FunctionSignature& sig) {
  for (const auto* list : {&sig.params, &sig.results}) {
    for (const ValueSpec& v : *list) {
      if (v.is_tuple)
        return InvalidArgument("'" + v.name + "' is a tuple, which KServe cannot express");
      if (std::string(KServeDatatype(v.dtype)) == "INVALID") {
        return InvalidArgument("'" + v.name + "' has no KServe datatype");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

std::string Model::MetadataJson() const {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("name");
  w.String(name);
  w.Key("versions");
  w.BeginArray();
  w.String(version);
  w.EndArray();
  w.Key("platform");
  w.String("kiln");
  w.Key("inputs");
  WriteTensorSpecs(signature().params, w);
  w.Key("outputs");
  WriteTensorSpecs(signature().results, w);
  w.EndObject();
  return out;
}

void ContextLease::Return() {
  if (ctx_ == nullptr) return;
  std::lock_guard<std::mutex> lock(model_->mu_);
  model_->idle_contexts_.push_back(std::move(ctx_));
}

ContextLease& ContextLease::operator=(ContextLease&& other) {
  if (this != &other) {
    Return();
    model_ = std::move(other.model_);
    ctx_ = std::move(other.ctx_);
  }
  return *this;
}

StatusOr<ContextLease> Model::AcquireContext() const {
  std::shared_ptr<const Model> self = shared_from_this();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_contexts_.empty()) {
      std::unique_ptr<Context> ctx = std::move(idle_contexts_.back());
      idle_contexts_.pop_back();
      return ContextLease(std::move(self), std::move(ctx));
    }
  }
  // Contexts are cheap (registers and scratch); at most one per concurrent request is made.
  ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, runtime_->NewContext(exe));
  return ContextLease(std::move(self), std::move(ctx));
}

Batcher* Model::GetBatcher(const BatchOptions& options) const {
  if (options.max_batch <= 1) return nullptr;
  std::call_once(batcher_once_, [&] {
    if (IsBatchable(signature())) batcher_ = std::make_unique<Batcher>(*this, options);
  });
  return batcher_.get();
}

StatusOr<ModelSource> ParseModelFlag(std::string_view flag) {
  size_t eq = flag.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == flag.size()) {
    return InvalidArgument("wants NAME=FILE, got '" + std::string(flag) + "'");
  }
  ModelSource source{std::string(flag.substr(0, eq)), std::string(flag.substr(eq + 1))};
  for (char c : source.name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) {
      return InvalidArgument("model name '" + source.name +
                             "' may only contain letters, digits, '_', '.' and '-'");
    }
  }
  return source;
}

StatusOr<std::shared_ptr<Model>> ModelRepository::LoadOne(const ModelSource& source,
                                                          int version) const {
  std::string where = "model '" + source.name + "' (" + source.path + ")";
  auto model = std::make_shared<Model>();
  model->name = source.name;
  model->path = source.path;
  model->version = std::to_string(version);
  model->runtime_ = runtime_;
  auto exe = runtime_->LoadFile(source.path);
  if (!exe.ok()) return exe.status().WithContext(where);
  model->exe = std::move(*exe);
  std::string entry(model->exe->entry_function());
  model->function = model->exe->FindFunction(entry);
  if (model->function < 0) return NotFound(where + ": no entry function '" + entry + "'");
  if (Status st = CheckServable(model->signature()); !st.ok()) return st.WithContext(where);
  return model;
}

StatusOr<std::shared_ptr<ModelRepository>> ModelRepository::Load(
    const std::vector<ModelSource>& sources, std::shared_ptr<const Runtime> runtime) {
  if (runtime == nullptr && !sources.empty()) {
    return InvalidArgument("ModelRepository::Load: models need a runtime");
  }
  auto repo = std::shared_ptr<ModelRepository>(new ModelRepository());
  repo->runtime_ = std::move(runtime);
  for (const ModelSource& source : sources) {
    if (repo->slots_.count(source.name)) {
      return InvalidArgument("model '" + source.name + "' (" + source.path +
                             "): duplicate model name");
    }
    ASSIGN_OR_RETURN(std::shared_ptr<Model> model, repo->LoadOne(source, 1));
    repo->slots_[source.name] = Slot{source.path, 1, std::move(model), ""};
  }
  return repo;
}

Status ModelRepository::LoadModel(std::string_view name, const Prepare& prepare) {
  std::lock_guard<std::mutex> serial(load_mu_);
  ModelSource source;
  int version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(name);
    if (it == slots_.end()) return NotFound("no model '" + std::string(name) + "' to load");
    source = {it->first, it->second.path};
    version = it->second.version + 1;
  }
  // Loading (verification, vendor set-up) may take a while: requests keep being served by the
  // current version meanwhile.
  auto model = LoadOne(source, version);
  if (model.ok() && prepare) {
    if (Status st = prepare(**model); !st.ok()) model = st.WithContext("model '" + source.name + "'");
  }
  std::shared_ptr<const Model> old;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_.find(name)->second;
  if (!model.ok()) {
    if (slot.current == nullptr) slot.reason = model.status().ToString();
    return model.status();
  }
  slot.version = version;
  old = std::move(slot.current);
  slot.current = std::move(*model);
  slot.reason.clear();
  return Status::Ok();
}

Status ModelRepository::UnloadModel(std::string_view name) {
  std::lock_guard<std::mutex> serial(load_mu_);
  std::shared_ptr<const Model> old;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end() || it->second.current == nullptr) {
    return NotFound("model '" + std::string(name) + "' is not loaded");
  }
  old = std::move(it->second.current);
  it->second.reason = "unloaded";
  return Status::Ok();
}

std::vector<RepositoryEntry> ModelRepository::Index() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RepositoryEntry> out;
  for (const auto& [name, slot] : slots_) {
    out.push_back({name, std::to_string(slot.version), slot.current ? "READY" : "UNAVAILABLE",
                   slot.reason});
  }
  return out;
}

std::shared_ptr<const Model> ModelRepository::Find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : it->second.current;
}

std::vector<std::shared_ptr<const Model>> ModelRepository::models() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const Model>> out;
  for (const auto& [name, slot] : slots_) {
    if (slot.current) out.push_back(slot.current);
  }
  return out;
}

}  // namespace kiln::serving
