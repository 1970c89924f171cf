// Profiling: one event per executed instruction, summaries by instruction kind, kernel and
// region that add up, a Chrome trace naming kernels and nodes, and no effect on results.
#define BOOST_TEST_MODULE profile_test
#include <boost/test/unit_test.hpp>

#include "tests/vm/test_programs.h"

namespace kiln::testing {
namespace {

int64_t Calls(const std::vector<Profile::Row>& rows, const std::string& name) {
  for (const Profile::Row& r : rows) {
    if (r.name == name) return r.calls;
  }
  return 0;
}

BOOST_AUTO_TEST_CASE(profile_counts_every_instruction_and_every_kernel_call) {
  ExecutableBuilder b;
  BuildSumLoop(b, AddLoopKernels(b));
  auto exe = LoadOrDie(b);
  auto ctx = *Context::Create(exe);
  Profile profile;
  InvokeOptions options;
  options.profile = &profile;
  auto out = ctx->Invoke("main", {I64Scalar(10)}, options);
  BOOST_REQUIRE(out.ok());
  BOOST_TEST(*(*out)[0].data_as<int64_t>() == 45);
  BOOST_TEST(profile.events().size() == ctx->instructions_executed());
  // 11 loop tests (less), 10 bodies with two adds each.
  BOOST_TEST(Calls(profile.ByKernel(*exe), "less") == 11);
  BOOST_TEST(Calls(profile.ByKernel(*exe), "add") == 20);
  BOOST_TEST(Calls(profile.ByInstruction(), "invoke_kernel") == 31);
  BOOST_TEST(Calls(profile.ByInstruction(), "ret") == 1);
  int64_t total = 0;
  for (const Profile::Row& r : profile.ByInstruction()) total += r.calls;
  BOOST_TEST(total == static_cast<int64_t>(profile.events().size()));
  for (size_t i = 1; i < profile.events().size(); ++i) {
    BOOST_TEST(profile.events()[i].start_ns >= profile.events()[i - 1].start_ns);
    BOOST_TEST(profile.events()[i].dur_ns >= 0);
  }
  // A second invocation accumulates; Clear empties.
  BOOST_REQUIRE(ctx->Invoke("main", {I64Scalar(1)}, options).ok());
  BOOST_TEST(Calls(profile.ByKernel(*exe), "less") == 13);
  profile.Clear();
  BOOST_TEST(profile.events().empty());
}

BOOST_AUTO_TEST_CASE(table_and_chrome_trace_name_kernels_regions_and_nodes) {
  ExecutableBuilder b;
  std::string blob = "2";
  int region = b.AddExternalRegion({"test_0", "test", {blob.begin(), blob.end()}, {}, 1, 1});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{4, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{4, ""}}, false});
  EmitAlloc(f, 1, 5, DType::kF32, {4});
  f.SetSourceNode("Mul_\"quoted\"");
  f.InvokeExternal(region, {0}, {1});
  f.Ret({1});
  auto exe = LoadOrDie(b);
  auto ctx = *Context::Create(exe);
  float x[4] = {1, 2, 3, 4};
  Profile profile;
  InvokeOptions options;
  options.profile = &profile;
  auto out = ctx->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{4})}, options);
  BOOST_REQUIRE(out.ok());
  BOOST_TEST((*out)[0].data_as<float>()[3] == 8.0f);
  BOOST_TEST(Calls(profile.ByExternalRegion(*exe), "test_0 (test)") == 1);
  std::string table = profile.Table(*exe);
  BOOST_TEST(table.find("invoke_external") != std::string::npos);
  BOOST_TEST(table.find("test_0 (test)") != std::string::npos);
  BOOST_TEST(table.find("5 instructions") != std::string::npos, table);
  std::string trace = profile.ChromeTrace(*exe);
  BOOST_TEST(trace.rfind("{\"traceEvents\": [", 0) == 0);
  BOOST_TEST(trace.find("\"name\": \"test_0 (test)\"") != std::string::npos, trace);
  BOOST_TEST(trace.find("\"node\": \"Mul_\\\"quoted\\\"\"") != std::string::npos, trace);
  BOOST_TEST(trace.find("\"ph\": \"X\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(profiling_a_failing_run_keeps_the_events_up_to_the_error) {
  ExecutableBuilder b;
  int fail = b.AddKernel({"fail", {}, {}});
  FunctionBuilder& f = b.AddFunction("main");
  f.LoadConsti(0, 1);
  f.InvokeKernel(fail, {}, {});
  f.Ret({});
  auto exe = LoadOrDie(b);
  auto ctx = *Context::Create(exe);
  Profile profile;
  InvokeOptions options;
  options.profile = &profile;
  BOOST_TEST(!ctx->Invoke("main", {}, options).ok());
  BOOST_TEST(profile.events().size() == 2u);
  BOOST_TEST(Calls(profile.ByKernel(*exe), "fail") == 1);
}

}  // namespace
}  // namespace kiln::testing
