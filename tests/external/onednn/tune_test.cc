// Tuning records (onednn::TuneRegion, `kiln compile --tune`): the measurements a region's plan
// build makes (the Winograd accuracy probe, timed Conv tiles, MatMul weight layouts), made
// once and recorded in the blob, stand in for measuring at load: a region created from a
// tuned blob builds the same plan without probing or timing at the tuned shape and team size,
// measures as before at other shapes, and a record that names what the region does not have
// fails creation naming the region and the field. No assertion depends on timing: the choices
// compared are the ones the process made once (the trial's per-process memo) or ones the test
// wrote into the record itself.
#define BOOST_TEST_MODULE onednn_tune_test
#include <omp.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "external/onednn/region.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

constexpr int64_t kChannels = 16, kSide = 12, kDepth = 4;

bool HasWinograd() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// kDepth 3x3 convolutions (pads 1, bias) of kChannels channels, each with a Relu, batch N
// symbolic: the region builds its N = 1 plan at creation.
compiler::Graph Chain() {
  const float a = std::sqrt(6.0f / (9 * kChannels));
  std::string body, in = "X";
  std::vector<Init> inits;
  for (int i = 0; i < kDepth; ++i) {
    const std::string n = std::to_string(i), out = i + 1 == kDepth ? "Y" : "r" + n;
    body += "  c" + n + " = Conv <pads = [1, 1, 1, 1]> (" + in + ", W" + n + ", B" + n +
            ")\n  " + out + " = Relu(c" + n + ")\n";
    inits.push_back({"W" + n, {kChannels, kChannels, 3, 3},
                     Random(kChannels * kChannels * 9, 100 + i, -a, a)});
    inits.push_back({"B" + n, {kChannels}, Random(kChannels, 200 + i, -0.1f, 0.1f)});
    in = out;
  }
  return MakeGraph("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[N, 16, 12, 12] X) => "
                   "(float Y) {\n" + body + "}",
                   inits);
}

struct Impls : RegionProfiler {
  std::vector<std::string> names;
  void Record(const RegionStepSample& s) override { names.emplace_back(s.impl); }
};

ExternalRegionSpec SpecOf(const CompiledRegion& r) {
  return MakeSpec(r.code, r.constants, 1, 1);
}

// `from` created again from `blob` (its graph and constants).
StatusOr<CompiledRegion> WithBlob(const CompiledRegion& from, std::vector<uint8_t> blob) {
  CompiledRegion r;
  r.graph = from.graph;
  r.code = from.code;
  r.code.blob = std::move(blob);
  r.constants = from.constants;
  OneDnnRuntime runtime(RunEverything());
  ASSIGN_OR_RETURN(r.fn, runtime.CreateRegion(SpecOf(r)));
  return r;
}

std::vector<uint8_t> Tune(const CompiledRegion& r, std::string* note = nullptr) {
  StatusOr<std::vector<uint8_t>> blob = TuneRegion(SpecOf(r), RunEverything(), note);
  BOOST_REQUIRE(blob.ok());
  return *blob;
}

RegionProgram Decode(const std::vector<uint8_t>& blob) {
  StatusOr<RegionProgram> p = DecodeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(p.ok());
  return *p;
}

// The implementations a run at batch `n` executes.
std::vector<std::string> RunImpls(const CompiledRegion& r, int64_t n) {
  const Dims xd = {n, kChannels, kSide, kSide};
  std::vector<Floats> got;
  Impls impls;
  BOOST_REQUIRE(r.TryRun({{xd, Random(Numel(xd), 7)}}, {xd}, &got, &impls).ok());
  return impls.names;
}

int64_t Count(const std::vector<std::string>& names, const char* impl) {
  return std::count(names.begin(), names.end(), impl);
}

// The tuned blob records what the untuned creation measured (the probe, a tile per Conv at
// N = 1 and this team size); created from it, the region probes nothing, takes its tiles from
// the record and runs the same implementations.
BOOST_AUTO_TEST_CASE(a_tuned_region_builds_the_same_plan_without_measuring) {
  CompiledRegion base = Compile(Chain());
  const std::vector<uint8_t> blob = Tune(base);
  const RegionTuning t = Decode(blob).tuning;
  BOOST_REQUIRE(t.shapes.size() == 1u);
  BOOST_TEST(t.shapes[0].threads == omp_get_max_threads());
  BOOST_TEST((t.shapes[0].inputs == std::vector<Dims>{{1, kChannels, kSide, kSide}}));
  StatusOr<CompiledRegion> tuned = WithBlob(base, blob);
  BOOST_REQUIRE(tuned.ok());
  const RegionStats before = base.region().stats(), after = tuned->region().stats();
  BOOST_TEST(after.plans_built == 1);
  BOOST_TEST(after.tuned_plans == 1);
  BOOST_TEST(after.probes_run == 0);
  BOOST_TEST(before.tuned_plans == 0);
  if (HasWinograd()) {
    BOOST_TEST(t.probed);
    BOOST_TEST(before.probes_run == 1);
    BOOST_TEST(t.shapes[0].tiles.size() == static_cast<size_t>(kDepth));
  }
  BOOST_TEST(RunImpls(base, 1) == RunImpls(*tuned, 1), boost::test_tools::per_element());
}

// The record decides, whatever a trial would: tiles written F(2x2) everywhere run F(2x2)
// everywhere, tiles written 0 run oneDNN's convolution everywhere.
BOOST_AUTO_TEST_CASE(the_record_is_what_the_plan_runs) {
  if (!HasWinograd()) return;  // kiln's Winograd needs AVX2 and FMA: no tile to choose
  CompiledRegion base = Compile(Chain());
  for (uint8_t tile : {uint8_t{2}, uint8_t{0}}) {
    RegionProgram p = Decode(Tune(base));
    BOOST_REQUIRE(p.tuning.shapes.size() == 1u);
    for (TunedTile& t : p.tuning.shapes[0].tiles) t.tile = tile;
    StatusOr<CompiledRegion> r = WithBlob(base, EncodeRegion(p));
    BOOST_REQUIRE(r.ok());
    BOOST_TEST(r->region().stats().tuned_plans == 1);
    const std::vector<std::string> impls = RunImpls(*r, 1);
    BOOST_TEST(Count(impls, "kiln:winograd_f2") == (tile == 2 ? kDepth : 0));
    BOOST_TEST(Count(impls, "kiln:winograd_f4") == 0);
  }
}

// A record is for its input dims and team size only: batch 2 builds its plan as without one
// (the probe's limit still holds, so no probe), and a record of another team size is unused.
BOOST_AUTO_TEST_CASE(a_record_for_another_shape_or_team_is_not_used) {
  CompiledRegion base = Compile(Chain());
  const std::vector<uint8_t> blob = Tune(base);
  StatusOr<CompiledRegion> tuned = WithBlob(base, blob);
  BOOST_REQUIRE(tuned.ok());
  RunImpls(*tuned, 2);
  const RegionStats s = tuned->region().stats();
  BOOST_TEST(s.plans_built == 2);
  BOOST_TEST(s.tuned_plans == 1);
  BOOST_TEST(s.probes_run == 0);
  RegionProgram p = Decode(blob);
  p.tuning.shapes[0].threads = omp_get_max_threads() + 1;
  StatusOr<CompiledRegion> other = WithBlob(base, EncodeRegion(p));
  BOOST_REQUIRE(other.ok());
  BOOST_TEST(other->region().stats().tuned_plans == 0);
  BOOST_TEST(other->region().stats().plans_built == 1);
}

// A record naming an op the region does not have, or bytes that are no record, fail creation
// with InvalidFormat naming the region and the field.
BOOST_AUTO_TEST_CASE(a_corrupt_record_fails_creation_naming_region_and_field) {
  CompiledRegion base = Compile(Chain());
  RegionProgram p = Decode(base.code.blob);
  p.tuning.shapes.push_back({1, {{1, kChannels, kSide, kSide}}, {{99, 2}}});
  StatusOr<CompiledRegion> r = WithBlob(base, EncodeRegion(p));
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(r.status().message() ==
             "region 'test_region': region blob: tuning.shapes[0].tiles[0]: ops[99] does not "
             "exist (" + std::to_string(p.ops.size()) + " ops)");
  std::vector<uint8_t> garbage = base.code.blob;
  BOOST_REQUIRE(!garbage.empty());
  garbage.back() = 0xff;  // the layout count's last byte: far more records than bytes
  r = WithBlob(base, garbage);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().message().find("region 'test_region': region blob: truncated") == 0);
}

// A region whose plan needs a dim only a request gives (here the image size) is not tuned:
// its blob comes back as it was, with the reason.
BOOST_AUTO_TEST_CASE(a_region_with_a_symbolic_dim_beyond_the_batch_is_left_untuned) {
  CompiledRegion r = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "g (float[1, 16, H, W] X) => (float Y) {\n"
      "  c = Conv <pads = [1, 1, 1, 1]> (X, W0, B0)\n  Y = Relu(c)\n}",
      {{"W0", {16, 16, 3, 3}, Random(16 * 16 * 9, 1)}, {"B0", {16}, Random(16, 2)}}));
  std::string note;
  BOOST_TEST(Tune(r, &note) == r.code.blob, boost::test_tools::per_element());
  BOOST_TEST(note == "input 0 dim 2 is symbolic: pin it with --dim to tune");
}

// A MatMul's measured weight layout is recorded and seeded: the tuned region measures none.
BOOST_AUTO_TEST_CASE(matmul_layouts_are_recorded_and_not_measured_again) {
  const Dims wd = {256, 256};
  CompiledRegion base = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "g (float[64, 256] A) => (float Y) {\n  Y = MatMul(A, W)\n}",
      {{"W", wd, Random(Numel(wd), 3)}}));
  BOOST_TEST(base.region().stats().layouts_measured == 1);
  const RegionTuning t = Decode(Tune(base)).tuning;
  BOOST_REQUIRE(t.layouts.size() == 1u);
  BOOST_TEST(t.layouts[0].op == 0);
  StatusOr<CompiledRegion> tuned = WithBlob(base, EncodeRegion([&] {
    RegionProgram p = Decode(base.code.blob);
    p.tuning = t;
    return p;
  }()));
  BOOST_REQUIRE(tuned.ok());
  BOOST_TEST(tuned->region().stats().layouts_measured == 0);
  BOOST_TEST(tuned->region().stats().tuned_plans == 1);
}

}  // namespace
}  // namespace kiln::onednn::testing
