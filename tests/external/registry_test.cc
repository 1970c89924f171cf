// The vendor registry: C++ vendors, plugins through the C ABI, and every load-time failure.
#define BOOST_TEST_MODULE registry_test
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>

#include "base/deadline.h"
#include "external/registry/registry.h"
#include "vm/builder.h"
#include "vm/context.h"

namespace kiln {
namespace {

const char kExamplePlugin[] = "examples/vendor_plugin/libkiln_example_vendor.so";

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ValueSpec F32(const char* name, int64_t n) { return ValueSpec{name, DType::kF32, {{n, ""}}, false}; }

// @main(a, b: f32[4]) -> y: f32[4] = region(a, b) (or region(a) for a unary blob).
std::vector<uint8_t> RegionProgram(const std::string& vendor, const std::string& blob, int inputs) {
  ExecutableBuilder b;
  int region = b.AddExternalRegion({vendor + "_0", vendor, {blob.begin(), blob.end()}, {}, inputs, 1});
  FunctionBuilder& f = b.AddFunction("main");
  std::vector<int> ins;
  for (int i = 0; i < inputs; ++i) ins.push_back(f.AddParam(F32(i ? "b" : "a", 4)));
  f.AddResult(F32("y", 4));
  f.LoadConsti(10, 16);
  f.AllocStorage(11, 10);
  f.AllocTensor(12, 11, 0, DType::kF32, {4});
  f.InvokeExternal(region, ins, {12});
  f.Ret({12});
  return *b.Finish();
}

StatusOr<std::shared_ptr<const Executable>> Load(const std::vector<uint8_t>& bytes,
                                                 std::shared_ptr<ExternalRegistry> registry) {
  LoadOptions options;
  options.externals = std::move(registry);
  return Executable::LoadBytes(bytes.data(), bytes.size(), options);
}

std::vector<float> Run(std::shared_ptr<const Executable> exe, std::vector<float> a, std::vector<float> b) {
  auto ctx = *Context::Create(exe);
  std::vector<Tensor> in = {Tensor::Wrap(a.data(), DType::kF32, Shape{4})};
  if (!b.empty()) in.push_back(Tensor::Wrap(b.data(), DType::kF32, Shape{4}));
  auto out = ctx->Invoke("main", in);
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  const float* y = (*out)[0].data_as<float>();
  return std::vector<float>(y, y + 4);
}

// A C++ vendor that counts the regions it creates.
struct CountingVendor : VendorRuntime {
  int created = 0;
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override {
    ++created;
    struct Copy : TensorFunction {
      Status Run(const Tensor* const* args, int, int) override {
        std::memcpy(args[1]->data(), args[0]->data(), args[0]->NumBytes());
        return Status::Ok();
      }
    };
    return std::unique_ptr<TensorFunction>(new Copy());
  }
};

BOOST_AUTO_TEST_CASE(cpp_vendor_creates_each_region_once_and_runs_it) {
  auto registry = std::make_shared<ExternalRegistry>();
  auto vendor = std::make_shared<CountingVendor>();
  BOOST_REQUIRE(registry->Register("copy", vendor).ok());
  auto exe = Load(RegionProgram("copy", "", 1), registry);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST(vendor->created == 1);
  BOOST_TEST((Run(*exe, {1, 2, 3, 4}, {}) == std::vector<float>{1, 2, 3, 4}));
  BOOST_TEST((Run(*exe, {5, 6, 7, 8}, {}) == std::vector<float>{5, 6, 7, 8}));
  BOOST_TEST(vendor->created == 1);
}

BOOST_AUTO_TEST_CASE(duplicate_and_empty_vendor_names_are_rejected) {
  ExternalRegistry registry;
  BOOST_REQUIRE(registry.Register("v", std::make_shared<CountingVendor>()).ok());
  Status s = registry.Register("v", std::make_shared<CountingVendor>());
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message() == "vendor 'v' is already registered");
  BOOST_TEST(registry.Register("", std::make_shared<CountingVendor>()).message() == "vendor name is empty");
}

BOOST_AUTO_TEST_CASE(unregistered_vendor_fails_at_load_naming_vendor_and_region) {
  auto registry = std::make_shared<ExternalRegistry>();
  BOOST_REQUIRE(registry->Register("onednn", std::make_shared<CountingVendor>()).ok());
  auto exe = Load(RegionProgram("tensorrt", "x", 1), registry);
  BOOST_REQUIRE(!exe.ok());
  BOOST_TEST(exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(exe.status().message() ==
             "external_regions[0] 'tensorrt_0' (vendor 'tensorrt'): no runtime is registered for "
             "vendor 'tensorrt' (needed by region 'tensorrt_0'; registered: onednn)");
}

BOOST_AUTO_TEST_CASE(example_plugin_runs_add_mul_relu) {
  auto registry = std::make_shared<ExternalRegistry>();
  BOOST_REQUIRE_MESSAGE(registry->LoadPlugin(kExamplePlugin).ok(), registry->LoadPlugin(kExamplePlugin).ToString());
  BOOST_TEST((registry->vendors() == std::vector<std::string>{"example"}));
  BOOST_TEST(registry->LoadPlugin(kExamplePlugin).ok());  // loading twice is a no-op
  auto add = Load(RegionProgram("example", "Add", 2), registry);
  auto mul = Load(RegionProgram("example", "Mul", 2), registry);
  auto relu = Load(RegionProgram("example", "Relu", 1), registry);
  BOOST_REQUIRE_MESSAGE(add.ok(), add.status().ToString());
  BOOST_REQUIRE(mul.ok() && relu.ok());
  BOOST_TEST((Run(*add, {1, 2, 3, 4}, {10, 20, 30, 40}) == std::vector<float>{11, 22, 33, 44}));
  BOOST_TEST((Run(*mul, {1, 2, 3, 4}, {2, 2, -1, 0}) == std::vector<float>{2, 4, -3, 0}));
  BOOST_TEST((Run(*relu, {-1, 2, -3, 0.5f}, {}) == std::vector<float>{0, 2, 0, 0.5f}));
}

BOOST_AUTO_TEST_CASE(blob_the_vendor_rejects_fails_at_load) {
  auto registry = std::make_shared<ExternalRegistry>();
  BOOST_REQUIRE(registry->LoadPlugin(kExamplePlugin).ok());
  auto exe = Load(RegionProgram("example", "Frobnicate", 1), registry);
  BOOST_REQUIRE(!exe.ok());
  BOOST_TEST(Contains(exe.status().message(),
                      "vendor 'example' rejected the region: region 'example_0': unknown op 'Frobnicate'"),
             exe.status().message());
  exe = Load(RegionProgram("example", "Add", 1), registry);  // arity the vendor refuses
  BOOST_TEST(Contains(exe.status().message(), "Add takes 2 inputs and 1 output, not 1 and 1"));
}

BOOST_AUTO_TEST_CASE(vendor_run_errors_are_statuses) {
  auto registry = std::make_shared<ExternalRegistry>();
  BOOST_REQUIRE(registry->LoadPlugin(kExamplePlugin).ok());
  ExecutableBuilder b;
  std::string blob = "Relu";
  int region = b.AddExternalRegion({"example_0", "example", {blob.begin(), blob.end()}, {}, 1, 1});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"a", DType::kI64, {{4, ""}}, false});  // the vendor wants f32
  f.AddResult(ValueSpec{"y", DType::kI64, {{4, ""}}, false});
  f.LoadConsti(10, 32);
  f.AllocStorage(11, 10);
  f.AllocTensor(12, 11, 0, DType::kI64, {4});
  f.InvokeExternal(region, {0}, {12});
  f.Ret({12});
  auto bytes = *b.Finish();
  auto exe = Load(bytes, registry);
  BOOST_REQUIRE(exe.ok());
  int64_t a[4] = {};
  auto out = (*Context::Create(*exe))->Invoke("main", {Tensor::Wrap(a, DType::kI64, Shape{4})});
  BOOST_TEST(out.status().code() == StatusCode::kInternal);
  BOOST_TEST(Contains(out.status().message(),
                      "external region 'example_0' (example): vendor 'example' failed running region "
                      "'example_0': operand 0: expected f32 of the output's shape"),
             out.status().message());
}

BOOST_AUTO_TEST_CASE(bad_plugins_are_clear_errors) {
  ExternalRegistry registry;
  Status s = registry.LoadPlugin("tests/external/does_not_exist.so");
  BOOST_TEST(s.code() == StatusCode::kNotFound);
  BOOST_TEST(s.message() == "plugin tests/external/does_not_exist.so: no such file");

  std::string text = std::string(std::getenv("TEST_TMPDIR")) + "/not_a_library.so";
  std::ofstream(text) << "hello";
  s = registry.LoadPlugin(text);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(Contains(s.message(), "cannot load"));

  s = registry.LoadPlugin("tests/external/libno_entry_plugin.so");
  BOOST_TEST(Contains(s.message(), "exports no kiln_plugin_register function"), s.message());

  s = registry.LoadPlugin("tests/external/libwrong_vendor_abi_plugin.so");
  BOOST_TEST(Contains(s.message(), "vendor 'future' was built for plugin ABI 99; this kiln speaks ABI 1"),
             s.message());

  s = registry.LoadPlugin("tests/external/librefuses_abi_plugin.so");
  BOOST_TEST(Contains(s.message(), "registration failed: this plugin needs ABI 99, kiln offers 1"), s.message());
  BOOST_TEST(registry.vendors().empty());
}

// Runs @main once under a profile; returns its output.
std::vector<float> RunProfiled(std::shared_ptr<const Executable> exe, std::vector<float> a,
                               std::vector<float> b, Profile* profile) {
  auto ctx = *Context::Create(exe);
  std::vector<Tensor> in = {Tensor::Wrap(a.data(), DType::kF32, Shape{4})};
  if (!b.empty()) in.push_back(Tensor::Wrap(b.data(), DType::kF32, Shape{4}));
  InvokeOptions options;
  options.profile = profile;
  auto out = ctx->Invoke("main", in, options);
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  const float* y = (*out)[0].data_as<float>();
  return std::vector<float>(y, y + 4);
}

BOOST_AUTO_TEST_CASE(version_3_plugin_reports_its_steps_while_profiling) {
  auto registry = std::make_shared<ExternalRegistry>();
  BOOST_REQUIRE(registry->LoadPlugin(kExamplePlugin).ok());
  auto add = Load(RegionProgram("example", "Add", 2), registry);
  BOOST_REQUIRE_MESSAGE(add.ok(), add.status().ToString());
  Profile profile;
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST((RunProfiled(*add, {1, 2, 3, 4}, {10, 20, 30, 40}, &profile) ==
                std::vector<float>{11, 22, 33, 44}));
  }
  BOOST_REQUIRE(profile.steps().size() == 1u);
  const Profile::StepRow& step = profile.steps()[0];
  BOOST_TEST(Profile::StepName(**add, step) == "example:add(scalar_loop)");
  BOOST_TEST(step.calls == 3);
  BOOST_TEST(!step.reference);
  BOOST_TEST(step.total_ms <= profile.ByExternalRegion(**add)[0].total_ms);
  // Not profiling: run_in_context with nothing to report to.
  BOOST_TEST((Run(*add, {1, 2, 3, 4}, {1, 1, 1, 1}) == std::vector<float>{2, 3, 4, 5}));
}

BOOST_AUTO_TEST_CASE(version_2_plugin_still_loads_and_profiles_through_run_profiled) {
  auto registry = std::make_shared<ExternalRegistry>();
  Status s = registry->LoadPlugin("tests/external/libv2_vendor_plugin.so");
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  auto exe = Load(RegionProgram("old", "", 1), registry);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  Profile profile;
  BOOST_TEST((RunProfiled(*exe, {1, 2, 3, 4}, {}, &profile) == std::vector<float>{2, 4, 6, 8}));
  BOOST_REQUIRE(profile.steps().size() == 1u);
  BOOST_TEST(Profile::StepName(**exe, profile.steps()[0]) == "old:double(v2_loop)");
  BOOST_TEST((Run(*exe, {1, 2, 3, 4}, {}) == std::vector<float>{2, 4, 6, 8}));
}

// The example plugin (vendor struct version 3) asks run_in_context's should_stop before each
// chunk of its loop: under a deadline that has passed it writes nothing and says where it
// stopped, and kiln turns that into DeadlineExceeded. Older structs cannot be asked; they are
// checked after they return (the VM's check).
BOOST_AUTO_TEST_CASE(version_3_plugin_stops_at_the_deadline) {
  auto registry = std::make_shared<ExternalRegistry>();
  BOOST_REQUIRE(registry->LoadPlugin(kExamplePlugin).ok());
  std::string blob = "Relu";
  ExternalRegionSpec spec;
  spec.name = "example_0";
  spec.vendor = "example";
  spec.blob = reinterpret_cast<const uint8_t*>(blob.data());
  spec.blob_size = blob.size();
  spec.num_inputs = 1;
  spec.num_outputs = 1;
  auto region = registry->CreateRegion(spec);
  BOOST_REQUIRE_MESSAGE(region.ok(), region.status().ToString());
  std::vector<float> x = {1, -2, 3, -4}, y = {7, 7, 7, 7};
  Tensor in = Tensor::Wrap(x.data(), DType::kF32, Shape{4});
  Tensor out = Tensor::Wrap(y.data(), DType::kF32, Shape{4});
  const Tensor* args[] = {&in, &out};
  {
    ScopedDeadline expired(Clock::now() - std::chrono::milliseconds(1));
    Status s = (*region)->Run(args, 1, 1);
    BOOST_TEST(s.code() == StatusCode::kDeadlineExceeded);
    BOOST_TEST(s.message() ==
               "vendor 'example' stopped region 'example_0' at the deadline: stopped before "
               "element 0 of 4");
    BOOST_TEST((y == std::vector<float>{7, 7, 7, 7}));
  }
  {
    ScopedDeadline far(Clock::now() + std::chrono::hours(1));
    Status s = (*region)->Run(args, 1, 1);
    BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
    BOOST_TEST((y == std::vector<float>{1, 0, 3, 0}));
  }
}

BOOST_AUTO_TEST_CASE(version_1_plugin_still_loads_and_profiles_as_one_row) {
  auto registry = std::make_shared<ExternalRegistry>();
  Status s = registry->LoadPlugin("tests/external/libv1_vendor_plugin.so");
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  auto exe = Load(RegionProgram("old", "", 1), registry);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  Profile profile;
  BOOST_TEST((RunProfiled(*exe, {1, 2, 3, 4}, {}, &profile) == std::vector<float>{2, 4, 6, 8}));
  BOOST_TEST(profile.steps().empty());
  BOOST_REQUIRE(profile.ByExternalRegion(**exe).size() == 1u);
  BOOST_TEST(profile.ByExternalRegion(**exe)[0].name == "old_0 (old)");
  BOOST_TEST(profile.ByExternalRegion(**exe)[0].calls == 1);
}

BOOST_AUTO_TEST_CASE(kiln_plugins_environment_variable) {
  ExternalRegistry registry;
  BOOST_REQUIRE(setenv("KILN_PLUGINS", (std::string(kExamplePlugin) + ":").c_str(), 1) == 0);
  BOOST_TEST(registry.LoadPluginsFromEnvironment().ok());
  BOOST_TEST((registry.vendors() == std::vector<std::string>{"example"}));
  ExternalRegistry other;
  BOOST_REQUIRE(setenv("KILN_PLUGINS", "/nonexistent/plugin.so", 1) == 0);
  Status s = other.LoadPluginsFromEnvironment();
  BOOST_TEST(s.message() == "KILN_PLUGINS: plugin /nonexistent/plugin.so: no such file");
  unsetenv("KILN_PLUGINS");
}

}  // namespace
}  // namespace kiln
