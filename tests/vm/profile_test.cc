// Profiling: one event per executed instruction, summaries by instruction kind, kernel, region
// (with the steps a vendor reports inside it) and op type that add up, JSON, a Chrome trace
// naming kernels and nodes, and no effect on results.
#define BOOST_TEST_MODULE profile_test
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstring>
#include <string>

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
  BOOST_TEST(profile.steps().empty());  // the test vendor reports no steps: one opaque row
  BOOST_TEST(Calls(profile.ByOpType(*exe), "test (region)") == 1);
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

// Vendor "steps": y = x, reported as two steps, a reorder and a reference binary whose shapes
// name the input's size, each taking `step_ns` (steady clock, busy-waited).
class SteppedRegion : public TensorFunction {
 public:
  Status Run(const Tensor* const* args, int, int) override {
    std::memcpy(args[1]->data(), args[0]->data(), args[0]->NumBytes());
    ++plain_runs;
    return Status::Ok();
  }
  Status RunProfiled(const Tensor* const* args, int ni, int no, RegionProfiler* profiler) override {
    std::string shapes =
        std::to_string(args[0]->NumElements()) + " -> " + std::to_string(args[1]->NumElements());
    RegionStepSample reorder{0, "reorder", "simple:any", shapes, false, 1000};
    profiler->Record(reorder);
    --plain_runs;  // Run below is this call's work, not an unprofiled run
    RETURN_IF_ERROR(Run(args, ni, no));
    RegionStepSample binary{1, "binary", "ref:any", shapes, true, 2000};
    profiler->Record(binary);
    return Status::Ok();
  }
  static inline int plain_runs = 0;
};

class SteppedVendor : public ExternalProvider {
 public:
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec&) override {
    return std::unique_ptr<TensorFunction>(new SteppedRegion());
  }
};

// Longer than the 38 columns names were once truncated to.
constexpr char kSteppedRegion[] = "steps_region_named_longer_than_the_old_name_column";

// @main(x: f32[n]) -> y = <kSteppedRegion>(x), for n <= 8.
std::shared_ptr<const Executable> SteppedProgram() {
  ExecutableBuilder b;
  int region = b.AddExternalRegion({kSteppedRegion, "steps", {}, {}, 1, 1});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{-1, "n"}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{-1, "n"}}, false});
  f.ShapeOf(1, 0);
  f.LoadConsti(3, 8 * sizeof(float));  // room for the largest input the test passes
  f.AllocStorage(4, 3);
  f.AllocTensorReg(2, 4, 0, DType::kF32, 1);
  f.InvokeExternal(region, {0}, {2});
  f.Ret({2});
  LoadOptions options = TestLoadOptions();
  options.externals = std::make_shared<SteppedVendor>();
  auto bytes = b.Finish();
  if (!bytes.ok()) throw std::runtime_error(bytes.status().ToString());
  auto exe = Executable::LoadBytes(bytes->data(), bytes->size(), options);
  if (!exe.ok()) throw std::runtime_error(exe.status().ToString());
  return *exe;
}

BOOST_AUTO_TEST_CASE(region_steps_nest_under_their_region_and_feed_the_op_types) {
  auto exe = SteppedProgram();
  auto ctx = *Context::Create(exe);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  Profile profile;
  InvokeOptions options;
  options.profile = &profile;
  SteppedRegion::plain_runs = 0;
  for (int64_t n : {4, 4, 8}) {
    auto out = ctx->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{n})}, options);
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    BOOST_TEST((*out)[0].data_as<float>()[n - 1] == x[n - 1]);
  }
  BOOST_TEST(SteppedRegion::plain_runs == 0);  // profiled calls never went through Run
  // Unprofiled calls run Run and add nothing.
  BOOST_REQUIRE(ctx->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{4})}).ok());
  BOOST_TEST(SteppedRegion::plain_runs == 1);
  // Two steps at two input sizes: four rows; the same position with other shapes is its own row.
  BOOST_REQUIRE(profile.steps().size() == 4u);
  std::vector<Profile::StepRow> rows = profile.RegionSteps(0);
  BOOST_REQUIRE(rows.size() == 4u);
  BOOST_TEST(Profile::StepName(*exe, rows[0]) == "steps:binary(ref:any)");
  BOOST_TEST(rows[0].shapes == "4 -> 4");
  BOOST_TEST(rows[0].calls == 2);
  BOOST_TEST(rows[0].total_ms == 0.004, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rows[0].reference);
  BOOST_TEST(Profile::StepName(*exe, rows[3]) == "steps:reorder(simple:any)");
  BOOST_TEST(rows[3].shapes == "8 -> 8");
  BOOST_TEST(rows[3].calls == 1);
  BOOST_TEST(!rows[3].reference);

  // Op types add up to the total; the region's own time is what its steps do not cover.
  std::vector<Profile::Row> types = profile.ByOpType(*exe);
  double sum = 0, total = 0;
  for (const Profile::Row& r : types) sum += r.total_ms;
  for (const ProfileEvent& e : profile.events()) total += e.dur_ns / 1e6;
  BOOST_TEST(sum == total, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(Calls(types, "steps:binary") == 3);
  BOOST_TEST(Calls(types, "steps:reorder") == 3);
  BOOST_TEST(Calls(types, "steps (outside steps)") == 3);
  BOOST_TEST(Calls(types, "steps (region)") == 0);

  std::string table = profile.Table(*exe);
  size_t region_row = table.find("  " + std::string(kSteppedRegion) + " (steps)");
  size_t step_row = table.find("    #1 steps:binary(ref:any)");
  BOOST_TEST(region_row != std::string::npos, table);
  BOOST_TEST(step_row > region_row, table);
  BOOST_TEST(table.find("REF 4 -> 4") != std::string::npos, table);
  BOOST_TEST(table.find("(outside steps)") != std::string::npos, table);
  BOOST_TEST(table.find("op type") != std::string::npos, table);
  std::string json = profile.JsonFields(*exe);
  BOOST_TEST(json.find("\"regions\": [{\"name\": \"" + std::string(kSteppedRegion) +
                       "\", \"vendor\": \"steps\", \"calls\": 3") != std::string::npos,
             json);
  BOOST_TEST(
      json.find("\"step\": 1, \"calls\": 2, \"total_ms\": 0.004000, \"reference\": true, "
                "\"name\": \"steps:binary(ref:any)\", \"kind\": \"binary\", \"impl\": \"ref:any\", "
                "\"shapes\": \"4 -> 4\"}") != std::string::npos,
      json);
  BOOST_TEST(json.find("\"op_types\": [") != std::string::npos, json);

  // The trace has every step of every call as an event nested in its call's event.
  std::vector<std::pair<double, double>> calls, steps;
  std::string trace = profile.ChromeTrace(*exe);
  for (size_t at = 0, end; (end = trace.find('\n', at)) != std::string::npos; at = end + 1) {
    std::string line = trace.substr(at, end - at);
    size_t ts = line.find("\"ts\": ");
    if (ts == std::string::npos) continue;
    double t = 0, d = 0;
    BOOST_REQUIRE(std::sscanf(line.c_str() + ts, "\"ts\": %lf, \"dur\": %lf", &t, &d) == 2);
    if (line.find("\"name\": \"" + std::string(kSteppedRegion) + " (steps)\"") != std::string::npos)
      calls.push_back({t, t + d});
    if (line.find("\"cat\": \"region_step\"") != std::string::npos) steps.push_back({t, t + d});
  }
  BOOST_TEST(trace.find("{\"name\": \"steps:binary(ref:any)\", \"cat\": \"region_step\"") !=
                 std::string::npos,
             trace);
  BOOST_TEST(trace.find("\"args\": {\"step\": 1, \"impl\": \"ref:any\", \"shapes\": \"8 -> 8\", "
                        "\"reference\": true}") != std::string::npos,
             trace);
  BOOST_REQUIRE(calls.size() == 3u);
  BOOST_REQUIRE(steps.size() == 6u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& call = calls[i / 2];
    constexpr double kUlp = 1e-6;  // us; the trace prints ns as %.3f us
    BOOST_TEST(steps[i].first >= call.first - kUlp);
    BOOST_TEST(steps[i].second <= call.second + kUlp);
    BOOST_TEST(steps[i].first <= steps[i].second);
    if (i % 2) BOOST_TEST(steps[i].first >= steps[i - 1].second - kUlp);  // in order
  }
  profile.Clear();
  BOOST_TEST(profile.steps().empty());
}

}  // namespace
}  // namespace kiln::testing
