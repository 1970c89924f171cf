// The oneDNN runtime as the VM uses it: region creation checks against the spec, the per-shape
// plan cache (alternating batch sizes never rebuild; the cache is bounded), concurrent runs,
// run-time argument checks, deadlines between primitives, and registration.
#define BOOST_TEST_MODULE onednn_runtime_test
#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "external/onednn/region.h"
#include "external/registry/registry.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

// conv 3x3 (8 -> 8, pad 1) + relu, then a residual add and a max pool, over a dynamic batch.
const char* kBlock = R"(<ir_version: 8, opset_import: ["" : 17]>
  g (float[N, 8, 12, 12] X) => (float Y) {
    c = Conv <pads = [1, 1, 1, 1]> (X, W, B)
    r = Relu(c)
    s = Add(r, X)
    Y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (s)
  })";

struct Block {
  Dims wd = {8, 8, 3, 3};
  Floats w = Random(8 * 8 * 9, 100), b = Random(8, 101);

  compiler::Graph Graph() const { return MakeGraph(kBlock, {{"W", wd, w}, {"B", {8}, b}}); }

  Floats Reference(const Floats& x, int64_t n) const {
    Dims xd = {n, 8, 12, 12}, cd, yd;
    Floats c = RefConv2d(x, xd, w, wd, &b, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd);
    for (size_t i = 0; i < c.size(); ++i) c[i] = std::max(c[i], 0.0f) + x[i];
    return RefPool2d(c, cd, true, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, &yd);
  }
};

BOOST_AUTO_TEST_CASE(alternating_batches_build_one_plan_per_shape) {
  Block block;
  CompiledRegion r = Compile(block.Graph());
  // The plan for batch 1 (all other dims static) is built at creation: weights reordered once.
  BOOST_TEST(r.region().stats().plans_built == 1);
  int64_t after_first = 0;
  for (int round = 0; round < 4; ++round) {
    for (int64_t n : {1, 3, 8}) {
      Floats x = Random(n * 8 * 144, static_cast<uint32_t>(round * 10 + n));
      std::vector<Floats> y = r.Run({{{n, 8, 12, 12}, x}}, {{n, 8, 6, 6}});
      BOOST_TEST(Close(y[0], block.Reference(x, n), 1e-4, 1e-4));
    }
    if (round == 0) after_first = r.region().stats().primitives_created;
  }
  RegionStats s = r.region().stats();
  BOOST_TEST(s.plans_built == 3);
  BOOST_TEST(s.cached_plans == 3);
  BOOST_TEST(s.plans_evicted == 0);
  BOOST_TEST(s.runs == 12);
  BOOST_TEST(s.primitives_created == after_first);  // rounds 2-4 created nothing
  BOOST_TEST(s.primitives_created > 0);
}

// Weight layouts of a constant-weight MatMul are measured once per power-of-two bucket of M
// (and team size): batches 1, 3, 8 alternating measure 3 times (buckets 1, 4, 8), never again,
// and every round is correct whichever layout won.
BOOST_AUTO_TEST_CASE(weight_layouts_are_measured_once_per_bucket) {
  Floats w = Random(256 * 256, 130);
  auto graph = [&] {
    return MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 256] X) => (float Y) {
      Y = MatMul(X, W)
    })",
                     {{"W", {256, 256}, w}});
  };
  CompiledRegion r = Compile(graph());
  int64_t after_first = -1;
  for (int round = 0; round < 3; ++round) {
    for (int64_t n : {1, 3, 8}) {
      Floats x = Random(n * 256, static_cast<uint32_t>(131 + round * 10 + n));
      std::vector<Floats> y = r.Run({{{n, 256}, x}}, {{n, 256}});
      BOOST_TEST(Close(y[0], RefMatMul(x, {n, 256}, w, {256, 256}), 2e-4, 1e-4));
    }
    if (round == 0) after_first = r.region().stats().primitives_created;
  }
  RegionStats s = r.region().stats();
  BOOST_TEST(s.layouts_measured == 3);
  BOOST_TEST(s.primitives_created == after_first);
  // Batch 2 falls in bucket 2: one more measurement.
  Floats x = Random(2 * 256, 140);
  BOOST_TEST(Close(r.Run({{{2, 256}, x}}, {{2, 256}})[0], RefMatMul(x, {2, 256}, w, {256, 256}),
                   2e-4, 1e-4));
  BOOST_TEST(r.region().stats().layouts_measured == 4);

  OneDnnOptions fixed;
  fixed.matmul_weight_layout = OneDnnOptions::WeightLayout::kOneDnn;
  CompiledRegion f = Compile(graph(), fixed);
  f.Run({{{8, 256}, Random(8 * 256, 141)}}, {{8, 256}});
  BOOST_TEST(f.region().stats().layouts_measured == 0);
}

BOOST_AUTO_TEST_CASE(plan_cache_is_bounded) {
  Block block;
  CompiledRegion r = Compile(block.Graph(), OneDnnOptions{2});
  for (int round = 0; round < 2; ++round) {
    for (int64_t n : {1, 2, 3}) {
      Floats x = Random(n * 8 * 144, static_cast<uint32_t>(n));
      BOOST_TEST(Close(r.Run({{{n, 8, 12, 12}, x}}, {{n, 8, 6, 6}})[0], block.Reference(x, n), 1e-4,
                       1e-4));
    }
  }
  RegionStats s = r.region().stats();
  BOOST_TEST(s.cached_plans == 2);
  BOOST_TEST(s.plans_built == 6);  // LRU with 2 entries over 3 shapes in turn: always a miss
  BOOST_TEST(s.plans_evicted == 4);
}

BOOST_AUTO_TEST_CASE(eight_threads_share_one_region) {
  Block block;
  CompiledRegion r = Compile(block.Graph());
  const int64_t kBatches[] = {1, 3, 8};
  std::vector<Floats> inputs, expected;
  for (int64_t n : kBatches) {
    inputs.push_back(Random(n * 8 * 144, static_cast<uint32_t>(n + 7)));
    expected.push_back(r.Run({{{n, 8, 12, 12}, inputs.back()}}, {{n, 8, 6, 6}})[0]);
    BOOST_TEST(Close(expected.back(), block.Reference(inputs.back(), n), 1e-4, 1e-4));
  }
  std::vector<int> mismatches(8, 0), errors(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 24; ++i) {
        int k = (t + i) % 3;
        int64_t n = kBatches[k];
        std::vector<Floats> out;
        Status s = r.TryRun({{{n, 8, 12, 12}, inputs[k]}}, {{n, 8, 6, 6}}, &out);
        if (!s.ok()) {
          ++errors[t];
        } else if (std::memcmp(out[0].data(), expected[k].data(), out[0].size() * 4) != 0) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    BOOST_TEST(errors[t] == 0);
    BOOST_TEST(mismatches[t] == 0);  // bit-identical to the single-threaded run
  }
  BOOST_TEST(r.region().stats().plans_built == 3);
}

// Intermediates whose lives do not overlap share workspace bytes: a chain of 6 eltwise ops over
// 256 KiB tensors needs two buffers, not five.
BOOST_AUTO_TEST_CASE(workspace_reuses_dead_intermediates) {
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 64, 32, 32] X) => (float Y) {
      a = Sigmoid(X)
      b = Tanh(a)
      c = Sigmoid(b)
      d = Tanh(c)
      e = Sigmoid(d)
      Y = Tanh(e)
    })"));
  RegionStats s = r.region().stats();
  const int64_t kTensor = 64 * 32 * 32 * 4;
  BOOST_TEST(s.max_workspace_bytes >= 2 * kTensor);
  BOOST_TEST(s.max_workspace_bytes < 3 * kTensor);
  Floats x = Random(64 * 1024, 60), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    for (int k = 0; k < 3; ++k) v = std::tanh(1 / (1 + std::exp(-v)));
    want[i] = static_cast<float>(v);
  }
  BOOST_TEST(Close(r.Run({{{1, 64, 32, 32}, x}}, {{1, 64, 32, 32}})[0], want, 1e-6, 1e-5));
}

// ---- Run-time argument checks ----

BOOST_AUTO_TEST_CASE(run_rejects_wrong_arguments) {
  CompiledRegion r = Compile(Block().Graph());
  std::vector<Floats> out;
  Floats x = Random(8 * 144, 1);
  Status s = r.TryRun({{{1, 8, 12, 12}, x}}, {{1, 8, 6, 6}, {1}}, &out);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("region 'test_region': called with 1 inputs and 2 outputs") == 0);
  s = r.TryRun({{{1, 9, 12, 12}, Floats(9 * 144)}}, {{1, 8, 6, 6}}, &out);
  BOOST_TEST(s.message().find("input 0 is f32[1, 9, 12, 12], the region was compiled for "
                              "[?, 8, 12, 12]") != std::string::npos);
  s = r.TryRun({{{1, 8, 12, 12}, x}}, {{1, 8, 5, 6}}, &out);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("output 0 is f32[1, 8, 5, 6], the region computes [1, 8, 6, 6]") !=
             std::string::npos);
  // A shape the ops reject at plan time names the op.
  CompiledRegion mm = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[A, K] X, float[K2, 4] Z) => (float Y) { Y = MatMul(X, Z) })"));
  s = mm.TryRun({{{2, 3}, Floats(6)}, {{5, 4}, Floats(20)}}, {{2, 4}}, &out);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message() ==
             "region 'test_region': ops[0] (MatMul): inner dims of [2, 3] and "
             "[5, 4] differ");
}

// ---- Deadlines ----

// A clock that moves only when the profiler below says so (ScopedDeadlineClockForTesting): the
// tests stop a region at a chosen primitive without racing the wall clock.
std::atomic<int64_t> fake_ms{0};
Clock::time_point FakeNow() { return Clock::time_point(std::chrono::milliseconds(fake_ms.load())); }

// Counts the primitives a profiled run reports; each "takes" 1 ms of the fake clock.
struct TickingProfiler : RegionProfiler {
  int steps = 0;
  void Record(const RegionStepSample&) override {
    ++steps;
    fake_ms += 1;
  }
};

BOOST_AUTO_TEST_CASE(an_expired_deadline_stops_a_region_before_its_first_primitive) {
  Block block;
  CompiledRegion r = Compile(block.Graph());
  Floats x = Random(8 * 144, 3);
  std::vector<Floats> out;
  {
    ScopedDeadline expired(Clock::now() - std::chrono::milliseconds(1));
    Status s = r.TryRun({{{1, 8, 12, 12}, x}}, {{1, 8, 6, 6}}, &out);
    BOOST_TEST(s.code() == StatusCode::kDeadlineExceeded);
    BOOST_TEST(s.message().find("region 'test_region': the run's deadline passed before "
                                "primitive 0 of ") == 0,
               s.message());
  }
  BOOST_TEST(r.region().stats().primitives_run == 0);
  // Without a deadline (and before a far one) the same region runs every primitive.
  BOOST_TEST(Close(r.Run({{{1, 8, 12, 12}, x}}, {{1, 8, 6, 6}})[0], block.Reference(x, 1), 1e-4,
                   1e-4));
  int64_t all = r.region().stats().primitives_run;
  BOOST_TEST(all >= 2);
  ScopedDeadline far(Clock::now() + std::chrono::hours(1));
  BOOST_TEST(Close(r.Run({{{1, 8, 12, 12}, x}}, {{1, 8, 6, 6}})[0], block.Reference(x, 1), 1e-4,
                   1e-4));
  BOOST_TEST(r.region().stats().primitives_run == 2 * all);
}

// The deadline passes while the first primitive runs (it "takes" 1 ms of a deadline 1 ms
// away): the region stops before its second primitive, having run exactly one.
BOOST_AUTO_TEST_CASE(a_deadline_passing_during_a_primitive_stops_the_region_before_the_next) {
  CompiledRegion r = Compile(Block().Graph());
  Floats x = Random(8 * 144, 4);
  std::vector<Floats> out;
  ScopedDeadlineClockForTesting clock(&FakeNow);
  ScopedDeadline deadline(FakeNow() + std::chrono::milliseconds(1));
  TickingProfiler profiler;
  Status s = r.TryRun({{{1, 8, 12, 12}, x}}, {{1, 8, 6, 6}}, &out, &profiler);
  BOOST_TEST(s.code() == StatusCode::kDeadlineExceeded);
  BOOST_TEST(s.message().find("region 'test_region': the run's deadline passed before "
                              "primitive 1 of ") == 0,
             s.message());
  BOOST_TEST(profiler.steps == 1);
  BOOST_TEST(r.region().stats().primitives_run == 1);
}

// ---- Creation errors ----

struct Fixture {
  CompiledRegion r = Compile(Block().Graph());
  Status Create(const std::vector<uint8_t>& blob, const std::vector<Tensor>& constants,
                int inputs = 1, int outputs = 1) {
    compiler::ExternalCode code;
    code.blob = blob;
    OneDnnRuntime runtime;
    return runtime.CreateRegion(MakeSpec(code, constants, inputs, outputs, "block7")).status();
  }
};

BOOST_FIXTURE_TEST_CASE(truncated_blob_is_rejected, Fixture) {
  std::vector<uint8_t> blob = r.code.blob;
  for (size_t n : {size_t{0}, size_t{3}, size_t{8}, blob.size() / 2, blob.size() - 1}) {
    Status s = Create(std::vector<uint8_t>(blob.begin(), blob.begin() + n), r.constants);
    BOOST_TEST(s.code() == StatusCode::kInvalidFormat);
    BOOST_TEST(s.message().find("region 'block7': region blob: truncated") == 0, s.message());
  }
}

BOOST_FIXTURE_TEST_CASE(bad_magic_and_versions_are_rejected, Fixture) {
  std::vector<uint8_t> blob = r.code.blob;
  blob[0] ^= 0xFF;
  Status s = Create(blob, r.constants);
  BOOST_TEST(s.code() == StatusCode::kInvalidFormat);
  BOOST_TEST(s.message() == "region 'block7': region blob: bad magic (not a oneDNN region)");
  blob = r.code.blob;
  blob[4] = kRegionMajor + 1;  // major
  s = Create(blob, r.constants);
  BOOST_TEST(s.code() == StatusCode::kUnsupported);
  BOOST_TEST(s.message() == "region 'block7': region blob: version 2." +
                                std::to_string(kRegionMinor) +
                                " is not readable by this runtime (version 1." +
                                std::to_string(kRegionMinor) + ")");
  blob = r.code.blob;
  blob[6] = kRegionMinor + 1;  // a newer minor
  s = Create(blob, r.constants);
  BOOST_TEST(s.code() == StatusCode::kUnsupported);
  BOOST_TEST(s.message().find("version 1." + std::to_string(kRegionMinor + 1) +
                              " is not readable") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(missing_and_wrong_constants_are_rejected, Fixture) {
  BOOST_REQUIRE(r.constants.size() == 2u);
  Status s = Create(r.code.blob, {});
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message() ==
             "region 'block7': the blob refers to 2 constants, the executable "
             "provides 0");
  std::vector<Tensor> c = r.constants;
  c[1] = Tensor();
  s = Create(r.code.blob, c);
  BOOST_TEST(s.message() ==
             "region 'block7': constant 1 is missing, the blob expects a "
             "contiguous f32 of 1 dims [8]");
  c = r.constants;
  Floats small(4);
  c[1] = Tensor::Wrap(small.data(), DType::kF32, Shape{4});
  s = Create(r.code.blob, c);
  BOOST_TEST(s.message() ==
             "region 'block7': constant 1 is f32[4], the blob expects a "
             "contiguous f32 of 1 dims [8]");
  std::vector<int32_t> ints(8);
  c[1] = Tensor::Wrap(ints.data(), DType::kI32, Shape{8});
  s = Create(r.code.blob, c);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("constant 1 is i32[8]") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(wrong_input_and_output_counts_are_rejected, Fixture) {
  Status s = Create(r.code.blob, r.constants, 2, 1);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message() ==
             "region 'block7': the executable declares 2 inputs and 1 outputs, "
             "the blob has 1 and 1");
  s = Create(r.code.blob, r.constants, 1, 0);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
}

BOOST_FIXTURE_TEST_CASE(structurally_bad_region_is_rejected, Fixture) {
  StatusOr<RegionProgram> region = DecodeRegion(r.code.blob.data(), r.code.blob.size());
  BOOST_REQUIRE(region.ok());
  RegionProgram bad = *region;
  bad.ops[0].inputs[0] = 99;
  Status s = Create(EncodeRegion(bad), r.constants);
  BOOST_TEST(s.code() == StatusCode::kInvalidFormat);
  BOOST_TEST(s.message() ==
             "region 'block7': region blob: ops[0] (Conv) input: tensor 99 is out "
             "of range [0, 5)");
  bad = *region;
  std::swap(bad.ops[0], bad.ops[1]);
  s = Create(EncodeRegion(bad), r.constants);
  BOOST_TEST(s.message().find("is used before it is defined") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(f32_only) {
  RegionProgram region;
  region.tensors = {{DType::kI64, 1}, {DType::kI64, 1}};
  region.inputs = {{0, {4}}};
  Op op;
  op.kind = OpKind::kEltwise;
  op.inputs = {0};
  op.output = 1;
  region.ops = {op};
  region.outputs = {1};
  compiler::ExternalCode code;
  code.blob = EncodeRegion(region);
  OneDnnRuntime runtime;
  Status s = runtime.CreateRegion(MakeSpec(code, {}, 1, 1, "ints")).status();
  BOOST_TEST(s.code() == StatusCode::kUnsupported);
  BOOST_TEST(s.message() ==
             "region 'ints': tensor 0 is i64; the oneDNN runtime runs f32, and u8 / s8 / s32 in "
             "integer ops");
  // u8 is an integer op's dtype: a float op on it is a malformed blob.
  region.tensors = {{DType::kU8, 1}, {DType::kU8, 1}};
  code.blob = EncodeRegion(region);
  s = runtime.CreateRegion(MakeSpec(code, {}, 1, 1, "bytes")).status();
  BOOST_TEST(s.code() == StatusCode::kInvalidFormat);
  BOOST_TEST(s.message().find("ops[0] (Eltwise): tensor 0 is u8, a float op needs f32") !=
             std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(registers_as_onednn_in_a_registry) {
  ExternalRegistry registry;
  BOOST_TEST(RegisterOneDnn(registry).ok());
  BOOST_TEST(registry.vendors() == std::vector<std::string>{"onednn"});
  BOOST_TEST(RegisterOneDnn(registry).code() == StatusCode::kInvalidArgument);
  // The registry routes a region spec to the runtime.
  Block block;
  CompiledRegion r = Compile(block.Graph());
  ExternalRegionSpec spec = MakeSpec(r.code, r.constants, 1, 1, "via_registry");
  StatusOr<std::unique_ptr<TensorFunction>> fn = registry.CreateRegion(spec);
  BOOST_REQUIRE(fn.ok());
  Floats x = Random(8 * 144, 5), y(8 * 36);
  Tensor in = Tensor::Wrap(x.data(), DType::kF32, Shape{1, 8, 12, 12});
  Tensor out = Tensor::Wrap(y.data(), DType::kF32, Shape{1, 8, 6, 6});
  const Tensor* args[] = {&in, &out};
  BOOST_TEST((*fn)->Run(args, 1, 1).ok());
  BOOST_TEST(Close(y, block.Reference(x, 1), 1e-4, 1e-4));
}

// A primitive with a reference implementation (oneDNN 2.6's softmax over an outer axis is
// 'ref:any') makes the runtime decline the region, naming the op and the implementation, and
// the registry passes the decline on unchanged. Over the inner axis (a JIT kernel) it is
// created; with decline_reference_impls off, so is the reference one.
BOOST_AUTO_TEST_CASE(declines_a_region_with_a_reference_primitive) {
  auto softmax = [](int axis) {
    return MakeGraph("<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[3, 4, 9] X) => "
                     "(float Y) {\n Y = Softmax <axis = " + std::to_string(axis) + "> (X)\n}");
  };
  StatusOr<compiler::ExternalCode> outer = CodegenAll(softmax(0));
  StatusOr<compiler::ExternalCode> inner = CodegenAll(softmax(2));
  BOOST_REQUIRE(outer.ok());
  BOOST_REQUIRE(inner.ok());
  ExternalRegistry registry;
  BOOST_REQUIRE(RegisterOneDnn(registry).ok());
  Status s = registry.CreateRegion(MakeSpec(*outer, {}, 1, 1, "soft_0")).status();
  BOOST_TEST(s.code() == StatusCode::kDeclined);
  BOOST_TEST(s.message() == "region 'soft_0': ops[0] (Softmax) would run oneDNN's reference "
                            "implementation 'ref:any' (softmax_v2); reference code would write 100% "
                            "of the region's elements");
  BOOST_TEST(registry.CreateRegion(MakeSpec(*inner, {}, 1, 1, "soft_2")).ok());
  OneDnnRuntime everything(RunEverything());
  BOOST_TEST(everything.CreateRegion(MakeSpec(*outer, {}, 1, 1, "soft_0")).ok());
}

// oneDNN 2.6 concatenates these with its reference implementation; that is a copy like any
// concat, so it must not cost the region its vendor (densenet121 and shufflenet_v2 ran 1.4-1.7x
// slower on their fallbacks when it did).
BOOST_AUTO_TEST_CASE(a_reference_concat_does_not_decline_the_region) {
  StatusOr<compiler::ExternalCode> concat = CodegenAll(
      MakeGraph("<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[1, 16, 14, 14] X, "
                "float[12, 16, 1, 1] W, float[20, 16, 1, 1] V) => (float Y) {\n"
                " A = Conv(X, W)\n B = Conv(X, V)\n Y = Concat <axis = 1> (A, B)\n}"));
  BOOST_REQUIRE(concat.ok());
  ExternalRegistry registry;
  BOOST_REQUIRE(RegisterOneDnn(registry).ok());
  Status s = registry.CreateRegion(MakeSpec(*concat, {}, 3, 1, "cat_0")).status();
  BOOST_TEST(s.ok(), s.ToString());
}

// The decline rule weighs cost: a sigmoid on a 1x10x1x1 squeeze tensor (10 channels padded
// to oneDNN's channel block; sigmoid(0) != 0, so oneDNN 2.6 runs it with 'ref:any', as in
// efficientnet_b0) next to 1x16x32x32 convolutions is negligible, and the region is created.
// With a threshold of 0 the same plan declines, naming the sigmoid: the reference primitive
// is there, it is only small.
BOOST_AUTO_TEST_CASE(a_negligible_reference_primitive_does_not_decline_the_region) {
  StatusOr<compiler::ExternalCode> se = CodegenAll(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[1, 16, 32, 32] X, "
      "float[16, 16, 3, 3] W, float[10, 16, 1, 1] V, float[16, 10, 1, 1] U) => (float Y) {\n"
      " c = Conv <pads = [1, 1, 1, 1]> (X, W)\n p = GlobalAveragePool(c)\n q = Conv(p, V)\n"
      " s = Sigmoid(q)\n t = Add(q, s)\n e = Conv(t, U)\n Y = Mul(c, e)\n}"));
  BOOST_REQUIRE(se.ok());
  ExternalRegistry registry;
  BOOST_REQUIRE(RegisterOneDnn(registry).ok());
  Status kept = registry.CreateRegion(MakeSpec(*se, {}, 4, 1, "se_0")).status();
  BOOST_TEST(kept.ok(), kept.ToString());
  OneDnnOptions any_reference;
  any_reference.reference_share_to_decline = 0;
  Status s = OneDnnRuntime(any_reference).CreateRegion(MakeSpec(*se, {}, 4, 1, "se_0")).status();
  BOOST_TEST(s.code() == StatusCode::kDeclined);
  BOOST_TEST(s.message().find("region 'se_0': ops[3] (Eltwise) would run oneDNN's reference "
                              "implementation 'ref:any' (eltwise)") == 0,
             s.message());
}

}  // namespace
}  // namespace kiln::onednn::testing
