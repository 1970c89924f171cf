// Loading served models and describing them in KServe metadata.
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
  w.String("1");
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

StatusOr<std::shared_ptr<const ModelRepository>> ModelRepository::Load(
    const std::vector<ModelSource>& sources, std::shared_ptr<const Runtime> runtime) {
  if (runtime == nullptr && !sources.empty()) {
    return InvalidArgument("ModelRepository::Load: models need a runtime");
  }
  auto repo = std::shared_ptr<ModelRepository>(new ModelRepository());
  repo->runtime_ = std::move(runtime);
  for (const ModelSource& source : sources) {
    std::string where = "model '" + source.name + "' (" + source.path + ")";
    if (repo->Find(source.name) != nullptr)
      return InvalidArgument(where + ": duplicate model name");
    Model model;
    model.name = source.name;
    model.path = source.path;
    auto exe = repo->runtime_->LoadFile(source.path);
    if (!exe.ok()) return exe.status().WithContext(where);
    model.exe = std::move(*exe);
    std::string entry(model.exe->entry_function());
    model.function = model.exe->FindFunction(entry);
    if (model.function < 0) return NotFound(where + ": no entry function '" + entry + "'");
    if (Status st = CheckServable(model.signature()); !st.ok()) return st.WithContext(where);
    repo->models_.push_back(std::move(model));
  }
  return std::shared_ptr<const ModelRepository>(std::move(repo));
}

StatusOr<std::unique_ptr<Context>> ModelRepository::NewContext(const Model& model) const {
  return runtime_->NewContext(model.exe);
}

const Model* ModelRepository::Find(std::string_view name) const {
  for (const Model& m : models_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace kiln::serving
