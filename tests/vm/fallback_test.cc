// Region fallbacks (vm/executable.cc BindRegions, the interpreter's invoke_external): a region
// its vendor declines, or whose vendor is absent, runs its fallback function with one notice
// per vendor; require_vendor makes both load errors naming vendor and region; files without
// fallbacks (format 1.1) load and run as before.
#define BOOST_TEST_MODULE fallback_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "serializer/version.h"
#include "tests/vm/test_programs.h"

namespace kiln::testing {
namespace {

const ValueSpec kVec{"x", DType::kF32, {{4, ""}}, false};

// main(x: f32[4]) -> region test_1(region test_0(x)), both of `vendor` with `blob` (the test
// vendor's blob "2" doubles; "decline" declines). With `fallbacks`, each region's fallback
// doubles through the kernel "twice". Written as format 1.`minor`.
std::vector<uint8_t> Build(const std::string& vendor, const std::string& blob, bool fallbacks,
                           uint16_t minor = kFormatMinor) {
  ExecutableBuilder b;
  b.SetVersion(kFormatMajor, minor);
  FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(kVec);
  main.AddResult(kVec);
  int twice = fallbacks ? b.AddKernel(KernelDef{"twice", {DType::kF32}, {DType::kF32}, "", {}, {}})
                        : -1;
  for (int r = 0; r < 2; ++r) {
    ExternalRegionDef def;
    def.name = "test_" + std::to_string(r);
    def.vendor = vendor;
    def.blob.assign(blob.begin(), blob.end());
    def.num_inputs = def.num_outputs = 1;
    int region = b.AddExternalRegion(def);
    EmitAlloc(main, 2 + 3 * r, 3 + 3 * r, DType::kF32, {4});
    main.InvokeExternal(region, {r == 0 ? 0 : 2}, {2 + 3 * r});
    if (!fallbacks) continue;
    FunctionBuilder& f = b.AddFunction(def.name + "/fallback");
    f.AddParam(kVec);
    f.AddResult(kVec);
    EmitAlloc(f, 1, 2, DType::kF32, {4});
    f.InvokeKernel(twice, {0}, {1});
    f.Ret({1});
    b.SetRegionFallback(region, f.index());
  }
  main.Ret({5});
  auto bytes = b.Finish();
  if (!bytes.ok()) throw std::runtime_error(bytes.status().ToString());
  return std::move(*bytes);
}

// Loads with the test providers (plus "twice", counting its calls) and collects notices.
struct Loaded {
  std::vector<std::string> notices;
  std::shared_ptr<std::atomic<int>> twice_calls = std::make_shared<std::atomic<int>>(0);
  StatusOr<std::shared_ptr<const Executable>> exe = Status(Internal("not loaded"));

  Loaded(const std::vector<uint8_t>& bytes, bool require_vendor = false) {
    LoadOptions options = TestLoadOptions();
    auto calls = twice_calls;
    static_cast<TestKernelProvider*>(options.kernels.get())
        ->Add("twice", [calls](const Tensor* const* args, int, int) {
          ++*calls;
          for (int64_t i = 0; i < args[0]->NumElements(); ++i) {
            args[1]->data_as<float>()[i] = 2 * args[0]->data_as<float>()[i];
          }
          return Status::Ok();
        });
    options.require_vendor = require_vendor;
    options.notice = [this](const std::string& line) { notices.push_back(line); };
    exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  }

  // Runs main on [1, 2, 3, 4]; the program quadruples.
  std::vector<float> Run() {
    BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
    auto ctx = Context::Create(*exe);
    BOOST_REQUIRE(ctx.ok());
    float x[4] = {1, 2, 3, 4};
    Tensor in = Tensor::Wrap(x, DType::kF32, Shape{4});
    auto out = (*ctx)->Invoke("main", {in});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    const float* y = (*out)[0].data_as<float>();
    return std::vector<float>(y, y + 4);
  }
};

const std::vector<float> kQuadrupled = {4, 8, 12, 16};

BOOST_AUTO_TEST_CASE(the_vendor_runs_the_regions_it_accepts) {
  Loaded l(Build("test", "2", true));
  BOOST_TEST(l.Run() == kQuadrupled, boost::test_tools::per_element());
  BOOST_TEST(*l.twice_calls == 0);
  BOOST_TEST(l.notices.empty());
  BOOST_TEST((*l.exe)->external_region(0) != nullptr);
  BOOST_TEST((*l.exe)->external_fallback(0) == -1);
}

BOOST_AUTO_TEST_CASE(declined_regions_run_their_fallbacks_with_one_notice) {
  Loaded l(Build("test", "decline", true));
  BOOST_TEST(l.Run() == kQuadrupled, boost::test_tools::per_element());
  BOOST_TEST(*l.twice_calls == 2);
  BOOST_TEST(l.Run() == kQuadrupled, boost::test_tools::per_element());  // the context again
  BOOST_TEST(*l.twice_calls == 4);
  const Executable& exe = **l.exe;
  BOOST_TEST(exe.external_region(1) == nullptr);
  BOOST_TEST(exe.external_fallback(0) == 1);
  BOOST_TEST(exe.external_fallback(1) == 2);
  BOOST_TEST(exe.external_fallback_reason(1) ==
             "the vendor declined the region: region 'test_1': the test vendor declines it");
  BOOST_REQUIRE(l.notices.size() == 1u);
  BOOST_TEST(l.notices[0] ==
             "vendor 'test' declined 2 of 2 regions, which run their fallback functions (kiln's "
             "JIT) instead: region 'test_0': the test vendor declines it; region 'test_1': the "
             "test vendor declines it (--require-vendor makes this an error)");
}

BOOST_AUTO_TEST_CASE(an_absent_vendors_regions_run_their_fallbacks_with_one_notice) {
  Loaded l(Build("acme", "opaque", true));
  BOOST_TEST(l.Run() == kQuadrupled, boost::test_tools::per_element());
  BOOST_TEST(*l.twice_calls == 2);
  BOOST_TEST((*l.exe)->external_fallback_reason(0) ==
             "no runtime is registered for vendor 'acme'");
  BOOST_REQUIRE(l.notices.size() == 1u);
  BOOST_TEST(l.notices[0] ==
             "no runtime is registered for vendor 'acme': its regions test_0, test_1 run their "
             "fallback functions (kiln's JIT) instead (--require-vendor makes this an error)");
}

BOOST_AUTO_TEST_CASE(require_vendor_makes_declining_and_absence_errors) {
  Loaded declined(Build("test", "decline", true), true);
  BOOST_REQUIRE(!declined.exe.ok());
  BOOST_TEST(declined.exe.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(declined.exe.status().message() ==
             "external_regions[0] 'test_0' (vendor 'test'): the vendor declined the region: "
             "region 'test_0': the test vendor declines it; the vendor is required "
             "(--require-vendor)");
  Loaded absent(Build("acme", "opaque", true), true);
  BOOST_REQUIRE(!absent.exe.ok());
  BOOST_TEST(absent.exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(absent.exe.status().message() ==
             "external_regions[0] 'test_0' (vendor 'acme'): no runtime is registered for vendor "
             "'acme'; the vendor is required (--require-vendor)");
  BOOST_TEST(declined.notices.empty());
  BOOST_TEST(absent.notices.empty());
}

// A 1.1 file has no fallback field: it loads and runs on its vendor as before (which may not
// decline: the region has nothing else to run), and an absent vendor is the load error it was.
BOOST_AUTO_TEST_CASE(files_without_fallbacks_load_and_run_as_before) {
  Loaded old(Build("test", "2", false, 1));
  BOOST_TEST((*old.exe)->version_minor() == 1);
  BOOST_TEST(old.Run() == kQuadrupled, boost::test_tools::per_element());
  BOOST_TEST((*old.exe)->external_fallback(0) == -1);

  Loaded absent(Build("acme", "opaque", false, 1));
  BOOST_REQUIRE(!absent.exe.ok());
  BOOST_TEST(absent.exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(absent.exe.status().message() ==
             "external_regions[0] 'test_0' (vendor 'acme'): no runtime registered for vendor "
             "'acme'");
  Loaded would_decline(Build("test", "decline", false, 1));
  BOOST_TEST(would_decline.Run() == kQuadrupled, boost::test_tools::per_element());
  BOOST_TEST((*would_decline.exe)->external_region(0) != nullptr);
  BOOST_TEST(would_decline.notices.empty());
  // With require_vendor the vendor may decline, and that is the error.
  Loaded required(Build("test", "decline", false, 1), true);
  BOOST_REQUIRE(!required.exe.ok());
  BOOST_TEST(required.exe.status().code() == StatusCode::kUnsupported);
}

// A region whose fallback `kiln compile` gave up on has only the function it abandoned, a
// fatal saying why: the load that needs the fallback fails naming the region and quoting it.
BOOST_AUTO_TEST_CASE(an_impossible_fallback_fails_the_load_saying_why) {
  const std::string why =
      "no fallback function for region 'test_0' (acme): uses 1 op type(s) kiln cannot lower: "
      "Frobnicate (node 'frob')";
  ExecutableBuilder b;
  FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(kVec);
  main.AddResult(kVec);
  ExternalRegionDef def;
  def.name = "test_0";
  def.vendor = "acme";
  def.num_inputs = def.num_outputs = 1;
  int region = b.AddExternalRegion(def);
  EmitAlloc(main, 1, 2, DType::kF32, {4});
  main.InvokeExternal(region, {0}, {1});
  main.Ret({1});
  FunctionBuilder& abandoned = b.AddFunction("test_0/fallback");
  abandoned.Fatal(b.AddString(why));
  auto bytes = b.Finish();
  BOOST_REQUIRE(bytes.ok());
  Loaded absent(*bytes);
  BOOST_REQUIRE(!absent.exe.ok());
  BOOST_TEST(absent.exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(absent.exe.status().message() ==
             "external_regions[0] 'test_0' (vendor 'acme'): no runtime registered for vendor "
             "'acme'; " + why);
}

}  // namespace
}  // namespace kiln::testing
