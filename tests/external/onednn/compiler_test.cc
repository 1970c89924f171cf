// The oneDNN compile side behind compiler::ExternalCompiler (external/onednn/compile/compiler.h):
// registration by name (idempotent) and its string options.
#define BOOST_TEST_MODULE onednn_compiler_test
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>

#include "compiler/external_compiler.h"
#include "external/onednn/compile/compiler.h"
#include "external/onednn/compile/rules.h"

namespace kiln::onednn {
namespace {

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

BOOST_AUTO_TEST_CASE(registers_once_under_its_vendor_name) {
  compiler::ExternalCompilerRegistry registry;
  BOOST_REQUIRE(RegisterOneDnnCompiler(registry).ok());
  std::shared_ptr<const compiler::ExternalCompiler> c = registry.Find("onednn");
  BOOST_REQUIRE(c != nullptr);
  BOOST_TEST(c->name() == "onednn");
  // Again: OK, and the first registration stays.
  BOOST_REQUIRE(RegisterOneDnnCompiler(registry).ok());
  BOOST_TEST(registry.Find("onednn") == c);
  BOOST_TEST(registry.names() == std::vector<std::string>({"onednn"}));
}

BOOST_AUTO_TEST_CASE(options_are_string_keys_with_boolean_values) {
  StatusOr<RulesOptions> dflt = ParseRulesOptions({});
  BOOST_REQUIRE(dflt.ok());
  BOOST_TEST(!dflt->constant_weight_gemms);
  BOOST_TEST(!dflt->regions_without_conv);
  StatusOr<RulesOptions> on =
      ParseRulesOptions({{"constant_weight_gemms", "1"}, {"regions_without_conv", "true"}});
  BOOST_REQUIRE(on.ok());
  BOOST_TEST(on->constant_weight_gemms);
  BOOST_TEST(on->regions_without_conv);
  StatusOr<RulesOptions> off =
      ParseRulesOptions({{"constant_weight_gemms", "false"}, {"regions_without_conv", "0"}});
  BOOST_REQUIRE(off.ok());
  BOOST_TEST(!off->constant_weight_gemms);
  BOOST_TEST(!off->regions_without_conv);

  StatusOr<RulesOptions> bad = ParseRulesOptions({{"regions_without_conv", "yes"}});
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(bad.status().message() ==
             "onednn option regions_without_conv=yes: expected 0, 1, false or true");
  StatusOr<RulesOptions> unknown = ParseRulesOptions({{"fast", "1"}});
  BOOST_REQUIRE(!unknown.ok());
  BOOST_TEST(unknown.status().message() ==
             "onednn option 'fast' is unknown (options: constant_weight_gemms, "
             "regions_without_conv)");
}

BOOST_AUTO_TEST_CASE(the_compilers_rules_follow_its_options) {
  compiler::ExternalCompilerRegistry registry;
  BOOST_REQUIRE(RegisterOneDnnCompiler(registry).ok());
  auto c = registry.Find("onednn");
  StatusOr<compiler::VendorRules> dflt = c->Rules({});
  BOOST_REQUIRE(dflt.ok());
  BOOST_TEST(dflt->vendor == "onednn");
  BOOST_TEST(Has(dflt->anchor_ops, "Conv"));
  BOOST_TEST(!Has(dflt->anchor_ops, "Softmax"));
  BOOST_TEST(!Has(dflt->anchor_ops, "MatMul"));
  StatusOr<compiler::VendorRules> gemms = c->Rules({{"constant_weight_gemms", "1"}});
  BOOST_REQUIRE(gemms.ok());
  BOOST_TEST(Has(gemms->anchor_ops, "MatMul"));
  StatusOr<compiler::VendorRules> all = c->Rules({{"regions_without_conv", "1"}});
  BOOST_REQUIRE(all.ok());
  BOOST_TEST(Has(all->anchor_ops, "Softmax"));
  BOOST_TEST(c->Rules({{"regions_without_conv", "2"}}).status().code() ==
             StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::onednn
