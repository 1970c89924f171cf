// The registry of external compilers (compile side of BYOC).
#include "compiler/external_compiler.h"

#include <utility>

namespace kiln::compiler {
namespace {

// Names become region names ("<name>_0") and `--external=` values: keep them plain.
bool IsValidName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

ExternalCompilerRegistry& ExternalCompilerRegistry::Global() {
  static ExternalCompilerRegistry* registry = new ExternalCompilerRegistry();
  return *registry;
}

Status ExternalCompilerRegistry::Register(std::shared_ptr<const ExternalCompiler> compiler) {
  if (compiler == nullptr) return InvalidArgument("external compiler: null");
  std::string name(compiler->name());
  if (!IsValidName(name)) {
    return InvalidArgument("external compiler '" + name +
                           "': a name is lower-case letters, digits and '_'");
  }
  if (name == "none") {
    return InvalidArgument("external compiler 'none': the name means no external compiler");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!compilers_.emplace(name, std::move(compiler)).second) {
    return InvalidArgument("external compiler '" + name + "' is already registered");
  }
  return Status::Ok();
}

std::shared_ptr<const ExternalCompiler> ExternalCompilerRegistry::Find(
    std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = compilers_.find(name);
  return it == compilers_.end() ? nullptr : it->second;
}

std::vector<std::string> ExternalCompilerRegistry::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, compiler] : compilers_) out.push_back(name);
  return out;
}

}  // namespace kiln::compiler
