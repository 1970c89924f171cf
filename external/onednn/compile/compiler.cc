// The oneDNN compiler: rules.h and codegen.h behind the compiler::ExternalCompiler interface.
#include "external/onednn/compile/compiler.h"

#include <memory>

#include "external/onednn/compile/codegen.h"
#include "external/onednn/compile/rules.h"
#include "external/onednn/region.h"

namespace kiln::onednn {
namespace {

class OneDnnCompiler : public compiler::ExternalCompiler {
 public:
  std::string_view name() const override { return kVendorName; }

  StatusOr<compiler::VendorRules> Rules(const compiler::ExternalOptions& options) const override {
    ASSIGN_OR_RETURN(RulesOptions parsed, ParseRulesOptions(options));
    return onednn::Rules(parsed);
  }

  StatusOr<compiler::ExternalCode> Codegen(
      const compiler::Graph& graph, const compiler::PartitionedRegion& region) const override {
    return onednn::Codegen(graph, region.nodes, region.inputs, region.outputs);
  }
};

}  // namespace

Status RegisterOneDnnCompiler(compiler::ExternalCompilerRegistry& registry) {
  // Find-then-register can race with another registrant; a duplicate from that race is the
  // same outcome (a compiler named "onednn" is present), so it is not an error either.
  if (registry.Find(kVendorName) != nullptr) return Status::Ok();
  Status s = registry.Register(std::make_shared<OneDnnCompiler>());
  if (!s.ok() && registry.Find(kVendorName) != nullptr) return Status::Ok();
  return s;
}

}  // namespace kiln::onednn
