// Region trials (vm/region_trial.h) and their record in the file (format 1.4): a vendor made
// deterministically slower than its fallback (it sleeps) is marked, a region whose fallback is
// the slow side is not, one without a fallback is skipped with a note; a load then runs the
// marked region's fallback without creating its vendor region, with one notice and the same
// outputs; ignore_tuned_fallback restores the vendor; a rewrite keeps everything else.
#define BOOST_TEST_MODULE region_trial_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "serializer/version.h"
#include "tests/vm/test_programs.h"
#include "vm/disassembler.h"
#include "vm/region_trial.h"

namespace kiln::testing {
namespace {

const ValueSpec kVec{"x", DType::kF32, {{4, ""}}, false};
constexpr auto kSlow = std::chrono::milliseconds(20);

void Double(const Tensor* const* args) {
  for (int64_t i = 0; i < args[0]->NumElements(); ++i) {
    args[1]->data_as<float>()[i] = 2 * args[0]->data_as<float>()[i];
  }
}

// Spins until the process has used `ms` more of CPU time.
void Burn(double ms) {
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  };
  const double until = cpu_ms() + ms;
  while (cpu_ms() < until) {
  }
}

// Vendor "v": every region doubles its f32 input; the blob "slow" sleeps 20 ms first, "busy"
// spends 20 ms of CPU first.
class SleepyVendor : public ExternalProvider {
 public:
  class Region : public TensorFunction {
   public:
    Region(int slow, std::atomic<int>* runs) : slow_(slow), runs_(runs) {}
    Status Run(const Tensor* const* args, int, int) override {
      ++*runs_;
      if (slow_ == 1) std::this_thread::sleep_for(kSlow);
      if (slow_ == 2) Burn(20);
      Double(args);
      return Status::Ok();
    }

   private:
    int slow_;  // 0: no, 1: sleeps, 2: spins
    std::atomic<int>* runs_;
  };
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override {
    if (spec.vendor != "v") return NotFound("no vendor '" + std::string(spec.vendor) + "'");
    ++created;
    std::string blob(reinterpret_cast<const char*>(spec.blob), spec.blob_size);
    return std::unique_ptr<TensorFunction>(
        new Region(blob == "slow" ? 1 : blob == "busy" ? 2 : 0, &runs));
  }
  bool HasVendor(std::string_view vendor) const override { return vendor == "v"; }
  std::atomic<int> created{0}, runs{0};
};

// main(x: f32[4]) -> r2(r1(r0(x))), each region doubling (so main multiplies by 8):
//   r0: slow vendor, fallback kernel "twice" (fast)  -> the trial marks it
//   r1: fast vendor, fallback kernel "twice_slow"   -> the trial keeps the vendor
//   r2: fast vendor, no fallback                     -> skipped (only `with_r2`)
std::vector<uint8_t> Build(bool with_r2 = true, const std::string& r0_blob = "slow") {
  ExecutableBuilder b;
  FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(kVec);
  main.AddResult(kVec);
  const std::string blobs[] = {r0_blob, "fast", "fast"};
  const char* kernels[] = {"twice", "twice_slow", nullptr};
  int in = 0;
  for (int r = 0; r < (with_r2 ? 3 : 2); ++r) {
    ExternalRegionDef def;
    def.name = "r" + std::to_string(r);
    def.vendor = "v";
    def.blob.assign(blobs[r].begin(), blobs[r].end());
    def.num_inputs = def.num_outputs = 1;
    int region = b.AddExternalRegion(def);
    int out = 1 + 2 * r;
    EmitAlloc(main, out, out + 1, DType::kF32, {4});
    main.InvokeExternal(region, {in}, {out});
    in = out;
    if (kernels[r] == nullptr) continue;
    int k = b.AddKernel(KernelDef{kernels[r], {DType::kF32}, {DType::kF32}, "", {}, {}});
    FunctionBuilder& f = b.AddFunction(def.name + "/fallback");
    f.AddParam(kVec);
    f.AddResult(kVec);
    EmitAlloc(f, 1, 2, DType::kF32, {4});
    f.InvokeKernel(k, {0}, {1});
    f.Ret({1});
    b.SetRegionFallback(region, f.index());
  }
  main.Ret({in});
  auto bytes = b.Finish();
  if (!bytes.ok()) throw std::runtime_error(bytes.status().ToString());
  return std::move(*bytes);
}

struct Providers {
  std::shared_ptr<SleepyVendor> vendor = std::make_shared<SleepyVendor>();
  std::shared_ptr<std::atomic<int>> fallback_calls = std::make_shared<std::atomic<int>>(0);
  std::vector<std::string> notices;

  LoadOptions Load(bool ignore_tuned = false) {
    LoadOptions options = TestLoadOptions();
    auto calls = fallback_calls;
    auto* kernels = static_cast<TestKernelProvider*>(options.kernels.get());
    kernels->Add("twice", [calls](const Tensor* const* args, int, int) {
      ++*calls;
      Double(args);
      return Status::Ok();
    });
    kernels->Add("twice_slow", [calls](const Tensor* const* args, int, int) {
      ++*calls;
      std::this_thread::sleep_for(kSlow);
      Double(args);
      return Status::Ok();
    });
    options.externals = vendor;
    options.ignore_tuned_fallback = ignore_tuned;
    options.notice = [this](const std::string& line) { notices.push_back(line); };
    return options;
  }
};

std::vector<RegionTrial> Trials(
    const std::vector<uint8_t>& bytes,
    RegionTrialOptions::Clock clock = RegionTrialOptions::Clock::kWall) {
  Providers p;
  RegionTrialOptions options;
  options.clock = clock;
  options.load = p.Load();
  options.warmup_calls = 1;
  options.timed_calls = 5;
  options.threads = "1 thread";
  auto trials = TrialRegions(bytes.data(), bytes.size(), options);
  if (!trials.ok()) throw std::runtime_error(trials.status().ToString());
  return std::move(*trials);
}

std::vector<float> RunMain(const std::shared_ptr<const Executable>& exe) {
  auto ctx = Context::Create(exe);
  if (!ctx.ok()) throw std::runtime_error(ctx.status().ToString());
  float x[4] = {1, -2, 0.5f, 4};
  auto out = (*ctx)->Invoke("main", {Tensor::Wrap(x, DType::kF32, Shape{4})});
  if (!out.ok()) throw std::runtime_error(out.status().ToString());
  const float* y = (*out)[0].data_as<float>();
  return std::vector<float>(y, y + 4);
}

BOOST_AUTO_TEST_CASE(the_trial_marks_a_region_slower_than_its_fallback) {
  std::vector<RegionTrial> trials = Trials(Build());
  BOOST_REQUIRE(trials.size() == 3u);
  BOOST_TEST(trials[0].name == "r0");
  BOOST_TEST(trials[0].measured);
  BOOST_TEST(trials[0].fallback_faster);
  BOOST_TEST(trials[0].region_ms >= 20.0);  // the sleep: a floor, not a timing assertion
  BOOST_TEST(trials[0].note.find("fallback ") == 0u);
  BOOST_TEST(trials[0].note.find(" at 4, 1 thread") != std::string::npos, trials[0].note);

  BOOST_TEST(trials[1].measured);
  BOOST_TEST(!trials[1].fallback_faster);
  BOOST_TEST(trials[1].fallback_ms >= 20.0);

  BOOST_TEST(!trials[2].measured);
  BOOST_TEST(!trials[2].fallback_faster);
  BOOST_TEST(trials[2].note == "not measured: the region has no fallback function");
}

// The CPU clock (a team of one: preemption on a loaded host does not count) sees work, not
// waiting: a vendor that spins 20 ms is marked, one that sleeps 20 ms costs next to nothing.
BOOST_AUTO_TEST_CASE(the_cpu_clock_counts_work_not_waiting) {
  const auto cpu = RegionTrialOptions::Clock::kProcessCpu;
  std::vector<RegionTrial> busy = Trials(Build(false, "busy"), cpu);
  BOOST_REQUIRE(busy.size() == 2u);
  BOOST_TEST(busy[0].fallback_faster);
  BOOST_TEST(busy[0].region_ms >= 20.0);
  BOOST_TEST(busy[0].note.find(" ms (CPU) at 4, 1 thread") != std::string::npos, busy[0].note);
  std::vector<RegionTrial> sleepy = Trials(Build(false, "slow"), cpu);
  BOOST_REQUIRE(sleepy.size() == 2u);
  BOOST_TEST(sleepy[0].region_ms < 20.0);  // the sleep is not CPU time
}

BOOST_AUTO_TEST_CASE(a_tuned_file_runs_the_marked_fallback_with_a_notice_and_the_same_outputs) {
  const std::vector<uint8_t> plain = Build();
  std::vector<RegionTrial> trials = Trials(plain);
  auto tuned = RecordRegionTrials(plain.data(), plain.size(), trials);
  BOOST_REQUIRE_MESSAGE(tuned.ok(), tuned.status().ToString());

  Providers before;
  auto reference = Executable::LoadBytes(plain.data(), plain.size(), before.Load());
  BOOST_REQUIRE(reference.ok());
  const std::vector<float> expected = RunMain(*reference);
  BOOST_TEST(expected == std::vector<float>({8, -16, 4, 32}), boost::test_tools::per_element());

  Providers after;
  auto exe = Executable::LoadBytes(tuned->data(), tuned->size(), after.Load());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((*exe)->version_minor() == kFormatMinor);
  BOOST_TEST(after.vendor->created == 2);  // r0's vendor region is never created
  BOOST_TEST((*exe)->external_region(0) == nullptr);
  BOOST_TEST((*exe)->external_fallback(0) == 1);
  BOOST_TEST((*exe)->external_region(1) != nullptr);
  BOOST_TEST((*exe)->external_fallback_reason(0).find(
                 "`kiln compile --tune` measured the fallback faster: fallback ") == 0u);
  BOOST_REQUIRE(after.notices.size() == 1u);
  BOOST_TEST(after.notices[0].find("1 of 3 regions run their fallback functions (kiln's JIT) "
                                   "because `kiln compile --tune` measured them faster: r0 "
                                   "(fallback ") == 0u,
             after.notices[0]);
  BOOST_TEST(after.notices[0].find("(--ignore-tuned-fallback runs the vendor)") !=
             std::string::npos);
  BOOST_TEST(RunMain(*exe) == expected, boost::test_tools::per_element());
  BOOST_TEST(*after.fallback_calls == 1);  // r0's fallback; r1 stayed on its vendor
  BOOST_TEST(after.vendor->runs == 2);

  // inspect shows the record of every region with a note.
  std::string text = InspectExecutable(**exe);
  BOOST_TEST(text.find("tuned: runs its fallback (measured faster); fallback ") !=
             std::string::npos, text);
  BOOST_TEST(text.find("tuned: runs its vendor; fallback ") != std::string::npos);
  BOOST_TEST(text.find("tuned: runs its vendor; not measured: the region has no fallback "
                       "function") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(ignore_tuned_fallback_and_require_vendor_restore_the_vendor) {
  const std::vector<uint8_t> plain = Build();
  auto tuned = RecordRegionTrials(plain.data(), plain.size(), Trials(plain));
  BOOST_REQUIRE(tuned.ok());
  for (bool require : {false, true}) {
    Providers p;
    LoadOptions options = p.Load(/*ignore_tuned=*/!require);
    options.require_vendor = require;
    auto exe = Executable::LoadBytes(tuned->data(), tuned->size(), options);
    BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
    BOOST_TEST(p.vendor->created == 3);
    BOOST_TEST((*exe)->external_region(0) != nullptr);
    BOOST_TEST(p.notices.empty());
    BOOST_TEST(RunMain(*exe) == std::vector<float>({8, -16, 4, 32}),
               boost::test_tools::per_element());
    BOOST_TEST(*p.fallback_calls == 0);
  }
}

// A region whose vendor is absent (or declines it) runs its fallback at load: nothing to
// compare, so it is noted and never marked.
BOOST_AUTO_TEST_CASE(an_absent_vendors_regions_are_noted_not_measured) {
  std::vector<uint8_t> bytes = Build(/*with_r2=*/false);
  Providers p;
  RegionTrialOptions options;
  options.load = p.Load();
  options.load.externals = std::make_shared<TestExternalProvider>();  // knows only "test"
  auto trials = TrialRegions(bytes.data(), bytes.size(), options);
  BOOST_REQUIRE_MESSAGE(trials.ok(), trials.status().ToString());
  BOOST_REQUIRE(trials->size() == 2u);
  for (const RegionTrial& t : *trials) {
    BOOST_TEST(!t.measured);
    BOOST_TEST(!t.fallback_faster);
    BOOST_TEST(t.note == "not measured: no runtime is registered for vendor 'v'");
  }
  // Without a fallback, the absent vendor is the load error it always was, naming the region.
  std::vector<uint8_t> with_r2 = Build();
  auto failed = TrialRegions(with_r2.data(), with_r2.size(), options);
  BOOST_REQUIRE(!failed.ok());
  BOOST_TEST(failed.status().message().find("external_regions[2] 'r2' (vendor 'v')") !=
             std::string::npos, failed.status().message());
}

BOOST_AUTO_TEST_CASE(a_rewrite_without_changes_writes_the_same_bytes) {
  // Every table the builder writes: constants, strings, source nodes, dispatch hints, shape
  // functions, metadata, code targets, and the regions above.
  std::vector<uint8_t> plain = Build();
  auto exe = Executable::LoadBytes(plain.data(), plain.size(), LoadOptions{nullptr, nullptr, false});
  BOOST_REQUIRE(exe.ok());
  auto rebuilt = ExecutableBuilder::FromExecutable(**exe);
  BOOST_REQUIRE(rebuilt.ok());
  auto again = (*rebuilt)->Finish();
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(*again == plain, boost::test_tools::per_element());

  ExecutableBuilder b("rich");
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"ids", DType::kI64, {{-1, "batch"}, {3, ""}}, false});
  f.AddParam(ValueSpec{"like", DType::kF32, {{2, ""}}, false, true});
  f.AddResult(ValueSpec{"y", DType::kF32, {{-1, "batch"}}, false});
  f.SetSourceNode("node_a");
  f.LoadConst(2, b.AddConstant("w", DType::kF32, {2}, std::vector<float>{1, 2}.data(), 8));
  f.SetSourceNode("");
  f.AddOperands64({int64_t{1} << 40});
  f.Fatal(b.AddString("boom"));
  b.AddKernel(KernelDef{"k", {DType::kF32}, {DType::kF32}, "kiln-kir-1", {1, 2, 3},
                        {{"batch", {1, 8}}}});
  b.AddShapeFunction(ShapeFunctionDef{"s", 2, 1, {false, true}, "kiln-kir-1", {4, 5}});
  b.SetMetadata(MetadataDef{{ValueSpec{"ids", DType::kI64, {{-1, "batch"}}, false}},
                            {ValueSpec{"y", DType::kF32, {{-1, "batch"}}, false}},
                            "main", 17, "pytorch", "doc"});
  b.AddAotTarget(AotTargetDef{"x86_64", "znver3", "+avx2", "19.1.7", "abi-1",
                              {AotObjectDef{"sym_k", {9, 9, 9}}},
                              {AotObjectDef{"", {}}}});
  auto rich = b.Finish();
  BOOST_REQUIRE(rich.ok());
  auto rich_exe = Executable::LoadBytes(rich->data(), rich->size(), LoadOptions{nullptr, nullptr, false});
  BOOST_REQUIRE_MESSAGE(rich_exe.ok(), rich_exe.status().ToString());
  auto rich_rebuilt = ExecutableBuilder::FromExecutable(**rich_exe);
  BOOST_REQUIRE(rich_rebuilt.ok());
  auto rich_again = (*rich_rebuilt)->Finish();
  BOOST_REQUIRE(rich_again.ok());
  BOOST_TEST(*rich_again == *rich, boost::test_tools::per_element());
}

// Format 1.3 files (no tune record) load and run on their vendor as before.
BOOST_AUTO_TEST_CASE(files_before_1_4_load_unchanged) {
  ExecutableBuilder b;
  b.SetVersion(kFormatMajor, 3);
  FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(kVec);
  main.AddResult(kVec);
  ExternalRegionDef def;
  def.name = "r0";
  def.vendor = "v";
  def.blob = {'f', 'a', 's', 't'};
  def.num_inputs = def.num_outputs = 1;
  int region = b.AddExternalRegion(def);
  EmitAlloc(main, 1, 2, DType::kF32, {4});
  main.InvokeExternal(region, {0}, {1});
  main.Ret({1});
  auto bytes = b.Finish();
  BOOST_REQUIRE(bytes.ok());
  Providers p;
  auto exe = Executable::LoadBytes(bytes->data(), bytes->size(), p.Load());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((*exe)->version_minor() == 3);
  BOOST_TEST(!(*exe)->root().external_regions()->Get(0)->tuned_fallback());
  BOOST_TEST((*exe)->root().external_regions()->Get(0)->tuned_note() == nullptr);
  BOOST_TEST(p.notices.empty());
  BOOST_TEST(RunMain(*exe) == std::vector<float>({2, -4, 1, 8}), boost::test_tools::per_element());
}

}  // namespace
}  // namespace kiln::testing
