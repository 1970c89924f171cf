// The compile-side vendor interface (compiler/external_compiler.h): the registry's contract, how
// CompileGraph picks a compiler by name and reports unknown names and bad options, and that a
// region whose codegen declines stays on the JIT with the same answer.
#define BOOST_TEST_MODULE external_compiler_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/external_compiler.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A vendor that claims every Add and Relu and whose codegen declines every region. Its rules
// name another vendor on purpose: the compiler must label regions with name().
class DecliningCompiler : public ExternalCompiler {
 public:
  explicit DecliningCompiler(std::string name = "fake") : name_(std::move(name)) {}

  std::string_view name() const override { return name_; }

  StatusOr<VendorRules> Rules(const ExternalOptions& options) const override {
    for (const auto& [key, value] : options) {
      if (key != "level") return InvalidArgument("fake option '" + key + "' is unknown");
    }
    VendorRules rules;
    rules.vendor = "mislabelled";
    rules.supported = [](const Graph& g, NodeId n) {
      return g.node(n).op_type == "Add" || g.node(n).op_type == "Relu";
    };
    return rules;
  }

  StatusOr<ExternalCode> Codegen(const Graph& graph,
                                 const PartitionedRegion& region) const override {
    calls_.fetch_add(1);
    nodes_.fetch_add(static_cast<int>(region.nodes.size()));
    return Unsupported("the fake vendor declines every region");
  }

  int calls() const { return calls_.load(); }
  int nodes() const { return nodes_.load(); }

 private:
  std::string name_;
  mutable std::atomic<int> calls_{0}, nodes_{0};
};

const char* kModel = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[N, 4] x, float[4] b) => (float[N, 4] y) {
    s = Add(x, b)
    y = Relu(s)
  }
)";

BOOST_AUTO_TEST_CASE(registry_registers_finds_and_lists_by_name) {
  ExternalCompilerRegistry registry;
  BOOST_TEST(registry.Find("fake") == nullptr);
  BOOST_TEST(registry.names().empty());
  auto fake = std::make_shared<DecliningCompiler>();
  BOOST_REQUIRE(registry.Register(fake).ok());
  BOOST_REQUIRE(registry.Register(std::make_shared<DecliningCompiler>("another_1")).ok());
  BOOST_TEST(registry.Find("fake") == fake);
  BOOST_TEST(registry.Find("fak") == nullptr);
  BOOST_TEST(registry.names() == std::vector<std::string>({"another_1", "fake"}));
}

BOOST_AUTO_TEST_CASE(registry_rejects_duplicates_null_and_bad_names) {
  ExternalCompilerRegistry registry;
  auto first = std::make_shared<DecliningCompiler>();
  BOOST_REQUIRE(registry.Register(first).ok());
  Status dup = registry.Register(std::make_shared<DecliningCompiler>());
  BOOST_TEST(dup.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(Contains(dup.message(), "'fake' is already registered"), dup.message());
  BOOST_TEST(registry.Find("fake") == first);  // the first stays
  BOOST_TEST(registry.Register(nullptr).code() == StatusCode::kInvalidArgument);
  for (const char* bad : {"", "none", "Fake", "on-dnn", "a b"}) {
    Status s = registry.Register(std::make_shared<DecliningCompiler>(bad));
    BOOST_TEST(s.code() == StatusCode::kInvalidArgument, bad);
    BOOST_TEST(Contains(s.message(), "'" + std::string(bad) + "'"), s.message());
  }
  BOOST_TEST(registry.names() == std::vector<std::string>({"fake"}));
}

BOOST_AUTO_TEST_CASE(an_unknown_name_is_unsupported_listing_the_choices) {
  std::string bytes = testing::ModelBytes(kModel);
  ExternalCompilerRegistry registry;
  CompileOptions o;
  o.external = "tpu";
  o.external_compilers = &registry;
  auto empty = CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE(!empty.ok());
  BOOST_TEST(empty.status().code() == StatusCode::kUnsupported);
  // Nothing registered: the message says who registers the built-in compilers.
  BOOST_TEST(Contains(empty.status().message(), "RegisterBuiltInCompilers"),
             empty.status().message());
  BOOST_REQUIRE(registry.Register(std::make_shared<DecliningCompiler>()).ok());
  BOOST_REQUIRE(registry.Register(std::make_shared<DecliningCompiler>("gpu")).ok());
  auto r = CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(Contains(r.status().message(), "--external=tpu"), r.status().message());
  BOOST_TEST(Contains(r.status().message(), "(kiln has: none, fake, gpu)"), r.status().message());
}

BOOST_AUTO_TEST_CASE(the_compilers_option_errors_name_the_compiler) {
  std::string bytes = testing::ModelBytes(kModel);
  ExternalCompilerRegistry registry;
  BOOST_REQUIRE(registry.Register(std::make_shared<DecliningCompiler>()).ok());
  CompileOptions o;
  o.external = "fake";
  o.external_compilers = &registry;
  o.external_options = {{"speed", "max"}};
  auto r = CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(Contains(r.status().message(), "--external=fake: fake option 'speed' is unknown"),
             r.status().message());
  o.external_options = {{"level", "2"}};
  BOOST_TEST(CompileOnnxBytes(bytes.data(), bytes.size(), o).ok());
  // "none" asks no compiler, so its options are not read.
  o.external = "none";
  o.external_options = {{"speed", "max"}};
  BOOST_TEST(CompileOnnxBytes(bytes.data(), bytes.size(), o).ok());
}

BOOST_AUTO_TEST_CASE(a_declined_region_stays_on_the_jit_with_the_same_answer) {
  std::string bytes = testing::ModelBytes(kModel);
  ExternalCompilerRegistry registry;
  auto fake = std::make_shared<DecliningCompiler>();
  BOOST_REQUIRE(registry.Register(fake).ok());
  CompileOptions o;
  o.external = "fake";
  o.external_compilers = &registry;
  std::vector<std::string> progress;
  o.progress = [&](std::string_view line) { progress.emplace_back(line); };
  CompileStats stats;
  auto kiln = CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  // The partitioner offered one region of both nodes; the codegen saw it and declined.
  BOOST_TEST(fake->calls() == 1);
  BOOST_TEST(fake->nodes() == 2);
  BOOST_TEST(stats.external_regions == 0);
  BOOST_TEST(stats.external_nodes == 0);
  bool reported = false;
  for (const std::string& line : progress) {
    reported |= Contains(line, "fake codegen declined region 0: the fake vendor declines");
  }
  BOOST_TEST(reported);
  // Loaded with no vendor runtime at all: a region in the executable would fail to load.
  auto exe = testing::LoadWithJit(*kiln);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  auto x = testing::RandomTensor(DType::kF32, {3, 4}, -1, 1, 7);
  auto b = testing::RandomTensor(DType::kF32, {4}, -1, 1, 8);
  auto y = testing::RunExecutable(*exe, {x, b});
  BOOST_REQUIRE_MESSAGE(y.ok(), y.status().ToString());
  std::vector<double> xv = x->ToDoubles(), bv = b->ToDoubles(), want(12);
  for (int i = 0; i < 12; ++i) want[i] = std::max(0.0, xv[i] + bv[i % 4]);
  std::string diff = testing::Compare(*(*y)[0], *testing::F32({3, 4}, want), 1e-6, 1e-7);
  BOOST_TEST(diff.empty(), diff);
}

}  // namespace
}  // namespace kiln::compiler
