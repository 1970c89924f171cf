// The whole compiler on small models: ONNX text -> CompileOnnxBytes -> VM on the JIT (and the
// oneDNN runtime), checked against plain references. Dynamic shapes at several values in one
// process, data-dependent shapes, --external=onednn vs none, bad input, and the unsigned
// element types.
#define BOOST_TEST_MODULE compile_test
#include "compiler/compile.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include "embed/compile.h"
#include "external/onednn/region.h"
#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "tests/compiler/conv_net.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"
#include "vm/opcodes.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::F32;
using testing::I64;

std::shared_ptr<ExternalRegistry> Vendors() {
  static auto* r = new std::shared_ptr<ExternalRegistry>([] {
    auto reg = std::make_shared<ExternalRegistry>();
    Status s = onednn::RegisterOneDnn(*reg);
    if (!s.ok()) BOOST_FAIL(s.message());
    return reg;
  }());
  return *r;
}

struct Compiled {
  CompileStats stats;
  std::shared_ptr<const Executable> exe;
};

Compiled Compile(const std::string& text, const std::string& external = "none",
                 std::map<std::string, int64_t> pins = {}) {
  std::string bytes = testing::ModelBytes(text);
  CompileOptions o;
  o.external = external;
  o.dim_pins = std::move(pins);
  Compiled c;
  auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &c.stats);
  if (!kiln.ok()) BOOST_FAIL(kiln.status().message());
  auto exe = testing::LoadWithJit(*kiln, Vendors());
  if (!exe.ok()) BOOST_FAIL(exe.status().message());
  c.exe = *exe;
  return c;
}

std::vector<TensorDataRef> Run(const Compiled& c, const std::vector<TensorDataRef>& in) {
  auto out = testing::RunExecutable(c.exe, in);
  if (!out.ok()) BOOST_FAIL(out.status().message());
  return *out;
}

// A transformer-style block: symbolic batch and seq, shapes computed with Shape/Gather/Concat.
const char* kBlock = R"(
  <ir_version: 8, opset_import: ["" : 17]>
  g (float[B, S, 8] x, float[8, 8] w, float[8] b) => (float[B, S, 8] y) {
    h = MatMul(x, w)
    hb = Add(h, b)
    sh = Shape(x)
    i0 = Constant <value = int64[1] {0}> ()
    i1 = Constant <value = int64[1] {1}> ()
    bdim = Gather(sh, i0)
    sdim = Gather(sh, i1)
    two = Constant <value = int64[1] {2}> ()
    four = Constant <value = int64[1] {4}> ()
    tshape = Concat <axis = 0> (bdim, sdim, two, four)
    t = Reshape(hb, tshape)
    s = Softmax <axis = -1> (t)
    back = Reshape(s, sh)
    y = Add(back, x)
  }
)";

std::vector<double> BlockReference(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, int64_t rows) {
  std::vector<double> y(rows * 8);
  for (int64_t r = 0; r < rows; ++r) {
    double h[8];
    for (int j = 0; j < 8; ++j) {
      double acc = 0;
      for (int k = 0; k < 8; ++k) acc += x[r * 8 + k] * w[k * 8 + j];
      h[j] = acc + b[j];
    }
    for (int grp = 0; grp < 2; ++grp) {
      double m = -1e30, sum = 0;
      for (int j = 0; j < 4; ++j) m = std::max(m, h[grp * 4 + j]);
      for (int j = 0; j < 4; ++j) sum += std::exp(h[grp * 4 + j] - m);
      for (int j = 0; j < 4; ++j) {
        y[r * 8 + grp * 4 + j] = std::exp(h[grp * 4 + j] - m) / sum + x[r * 8 + grp * 4 + j];
      }
    }
  }
  return y;
}

BOOST_AUTO_TEST_CASE(symbolic_batch_and_seq_compile_once_and_run_at_any_values) {
  for (const std::string external : {"none", "onednn"}) {
    Compiled c = Compile(kBlock, external);
    auto w = testing::RandomTensor(DType::kF32, {8, 8}, -1, 1, 11);
    auto b = testing::RandomTensor(DType::kF32, {8}, -1, 1, 12);
    for (auto [bs, seq] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 5}, {3, 17}, {1, 1}}) {
      auto x = testing::RandomTensor(DType::kF32, {bs, seq, 8}, -1, 1, bs * 100 + seq);
      auto y = Run(c, {x, w, b});
      auto expect = BlockReference(x->ToDoubles(), w->ToDoubles(), b->ToDoubles(), bs * seq);
      // f32 matmul of 8 terms and a 4-way softmax: a few ulps.
      std::string diff = Compare(*y[0], *F32({bs, seq, 8}, expect), 1e-5, 1e-6);
      BOOST_TEST(diff.empty(), external << " " << bs << "x" << seq << ": " << diff);
    }
  }
}

BOOST_AUTO_TEST_CASE(pinned_dims_make_static_shapes) {
  Compiled c = Compile(kBlock, "none", {{"B", 2}, {"S", 3}});
  auto w = testing::RandomTensor(DType::kF32, {8, 8}, -1, 1, 1);
  auto b = testing::RandomTensor(DType::kF32, {8}, -1, 1, 2);
  auto x = testing::RandomTensor(DType::kF32, {2, 3, 8}, -1, 1, 3);
  auto y = Run(c, {x, w, b});
  auto expect = BlockReference(x->ToDoubles(), w->ToDoubles(), b->ToDoubles(), 6);
  std::string diff = Compare(*y[0], *F32({2, 3, 8}, expect), 1e-5, 1e-6);
  BOOST_TEST(diff.empty(), diff);
  // Other shapes are rejected by the signature, naming the input.
  auto bad = testing::RunExecutable(c.exe, {testing::RandomTensor(DType::kF32, {1, 3, 8}, 0, 1, 4), w, b});
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().find("'x'") != std::string::npos, bad.status().message());
}

BOOST_AUTO_TEST_CASE(data_dependent_shapes) {
  // NonZero, Range with run-time limits, TopK with a run-time k, ConstantOfShape and Expand
  // from tensors, Reshape from a computed shape.
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N] x, int64 k, int64 lim, int64[2] shp) => (int64[1, M] nz, int64[R] r, float[K] top, float[A, B] filled, float[C, D] ex) {
      nz = NonZero(x)
      zero = Constant <value = int64 {0}> ()
      one = Constant <value = int64 {1}> ()
      r = Range(zero, lim, one)
      kk = Unsqueeze(k, zero)
      top, idx = TopK(x, kk)
      filled = ConstantOfShape <value = float[1] {2.5}> (shp)
      row = Unsqueeze(x, zero)
      ex0 = Expand(row, shp)
      ex = Identity(ex0)
    }
  )";
  Compiled c = Compile(text, "none");
  struct Case {
    std::vector<double> x;
    int64_t k, lim;
    std::vector<double> shp;
  };
  for (const Case& cs : {Case{{0, 3, 0, -1, 2}, 2, 4, {2, 5}}, Case{{1, 0, 0, 0, 7}, 4, 0, {3, 5}},
                         Case{{0, 0, 0, 0, 0}, 1, 9, {1, 5}}}) {
    auto out = Run(c, {F32({5}, cs.x), I64({}, {double(cs.k)}), I64({}, {double(cs.lim)}),
                       I64({2}, cs.shp)});
    std::vector<double> nz;
    for (size_t i = 0; i < cs.x.size(); ++i) {
      if (cs.x[i] != 0) nz.push_back(double(i));
    }
    int64_t m = static_cast<int64_t>(nz.size());
    // NonZero of a 1-D input: [1, M]... the model declares [2, M] loosely; compare dims itself.
    BOOST_TEST(out[0]->dims() == std::vector<int64_t>({1, m}));
    BOOST_TEST(out[0]->ToDoubles() == nz);
    std::vector<double> range(cs.lim);
    std::iota(range.begin(), range.end(), 0.0);
    BOOST_TEST(out[1]->ToDoubles() == range);
    std::vector<double> sorted = cs.x;
    std::stable_sort(sorted.begin(), sorted.end(), std::greater<double>());
    sorted.resize(cs.k);
    BOOST_TEST(out[2]->ToDoubles() == sorted);
    int64_t a = int64_t(cs.shp[0]);
    BOOST_TEST(out[3]->dims() == std::vector<int64_t>({a, 5}));
    BOOST_TEST(out[3]->ToDoubles() == std::vector<double>(a * 5, 2.5));
    std::vector<double> ex;
    for (int64_t i = 0; i < a; ++i) ex.insert(ex.end(), cs.x.begin(), cs.x.end());
    BOOST_TEST(out[4]->ToDoubles() == ex);
  }
}

BOOST_AUTO_TEST_CASE(conv_net_onednn_matches_the_jit) {
  Compiled jit = Compile(testing::kConvNet, "none");
  Compiled dnn = Compile(testing::kConvNet, "onednn");
  BOOST_TEST(dnn.stats.external_regions >= 1);
  BOOST_TEST(jit.stats.external_regions == 0);
  for (int64_t n : {1, 3, 2}) {
    std::vector<TensorDataRef> in = testing::ConvNetInputs(n);
    auto a = Run(jit, in);
    auto d = Run(dnn, in);
    // Different summation orders over 27-term dot products: f32 rounding, not bits.
    std::string diff = Compare(*d[0], *a[0], 1e-4, 1e-5);
    BOOST_TEST(diff.empty(), "N=" << n << ": " << diff);
  }
}

// `tune`: every oneDNN region's blob carries a tuning record of the shape creation builds
// (batch 1) and computes what the untuned executable computes; without the runtime's hook
// (the compiler alone, not embed/compile.h) it is an error saying so.
BOOST_AUTO_TEST_CASE(tuned_regions_carry_their_records_and_compute_the_same) {
  std::string bytes = testing::ModelBytes(testing::kConvNet);
  CompileOptions o;
  o.external = "onednn";
  o.tune = true;
  CompileStats stats;
  auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  auto exe = testing::LoadWithJit(*kiln, Vendors());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  const auto* regions = (*exe)->root().external_regions();
  BOOST_REQUIRE(regions != nullptr && regions->size() >= 1);
  for (const auto* region : *regions) {
    StatusOr<onednn::RegionProgram> p =
        onednn::DecodeRegion(region->blob()->data(), region->blob()->size());
    BOOST_REQUIRE(p.ok());
    BOOST_REQUIRE(p->tuning.shapes.size() == 1u);
    std::vector<std::vector<int64_t>> want;  // the symbolic batch at 1, as at creation
    for (const onednn::BoundTensor& in : p->inputs) {
      want.push_back(in.dims);
      for (int64_t& d : want.back()) d = d < 0 ? 1 : d;
    }
    BOOST_TEST((p->tuning.shapes[0].inputs == want));
  }
  Compiled tuned{stats, *exe};
  Compiled dnn = Compile(testing::kConvNet, "onednn");
  for (int64_t n : {1, 2}) {
    std::vector<TensorDataRef> in = testing::ConvNetInputs(n);
    // The same primitives (or Winograd tiles chosen by the same process): f32 rounding of the
    // tile's transforms at most.
    BOOST_TEST(Compare(*Run(tuned, in)[0], *Run(dnn, in)[0], 1e-4, 1e-5).empty(), "N=" << n);
  }
  auto plain = compiler::CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_TEST(plain.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(plain.status().message() ==
             "tune is set without tune_region (embed/compile.h provides it)");
}

// Code ahead of time is compiled for the kernels the entry function runs, not for those only
// the regions' fallback functions use (they run only if the vendor declines its region, and
// are then JIT-compiled): a conv net on oneDNN has objects for its main kernels alone, and
// its answers are those of the JIT.
BOOST_AUTO_TEST_CASE(code_ahead_of_time_skips_kernels_only_fallbacks_use) {
  std::string bytes = testing::ModelBytes(testing::kConvNet);
  CompileOptions o;
  o.external = "onednn";
  o.code_targets = {"native"};
  CompileStats stats;
  auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  BOOST_REQUIRE(stats.external_regions >= 1);
  BOOST_REQUIRE(stats.fallback_functions >= 1);
  auto exe = testing::LoadWithJit(*kiln, Vendors());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  const fb::Executable& root = (*exe)->root();
  BOOST_REQUIRE(root.aot_targets() != nullptr && root.aot_targets()->size() == 1);
  const auto* objects = root.aot_targets()->Get(0)->kernels();
  BOOST_REQUIRE(objects->size() == root.kernels()->size());
  // Which kernels main itself invokes (the conv net has no If / Loop functions).
  std::set<int> in_main;
  const fb::Function* main = root.functions()->Get(0);
  BOOST_REQUIRE(main->name()->str() == "main");
  for (const fb::Instruction* in : *main->code()) {
    if (static_cast<Opcode>(in->opcode()) == Opcode::kInvokeKernel) in_main.insert(in->a());
  }
  int with_code = 0;
  for (int k = 0; k < static_cast<int>(objects->size()); ++k) {
    bool has = objects->Get(k)->object() != nullptr && objects->Get(k)->object()->size() > 0;
    BOOST_TEST(has == (in_main.count(k) > 0), "kernel " << k);
    with_code += has;
  }
  BOOST_TEST(with_code < static_cast<int>(objects->size()));  // the fallbacks' kernels have none
  Compiled dnn = Compile(testing::kConvNet, "onednn");
  for (int64_t n : {1, 2}) {
    std::vector<TensorDataRef> in = testing::ConvNetInputs(n);
    auto want = Run(dnn, in);
    auto got = testing::RunExecutable(*exe, in);
    BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    // The same oneDNN regions; the JIT kernels at O3 ahead of time against the first tier:
    // f32 rounding of other instruction orders at most.
    BOOST_TEST(Compare(*(*got)[0], *want[0], 1e-5, 1e-6).empty(), "N=" << n);
  }
}

// kiln profile's view inside a oneDNN region: one row per primitive, named by its kind and
// oneDNN's implementation, counted once per profiled run (runs without a profile add nothing),
// within the region's time; profiling does not change the results.
BOOST_AUTO_TEST_CASE(profiles_list_the_onednn_primitives_inside_a_region) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 3, 12, 12] x, float[8, 3, 3, 3] w, float[8, 8, 1, 1] w2) => (float[1, 2] y)
      <float[2, 8] fc = {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8}> {
      c = Conv <pads = [1, 1, 1, 1]> (x, w)
      r = Relu(c)
      p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
      c2 = Conv(p, w2)
      s = Add(c2, p)
      gp = GlobalAveragePool(s)
      f = Flatten(gp)
      y = Gemm <transB = 1> (f, fc)
    }
  )";
  Compiled dnn = Compile(text, "onednn");
  BOOST_REQUIRE(dnn.stats.external_regions >= 1);
  std::vector<Tensor> in;
  int seed = 1;
  for (std::vector<int64_t> dims :
       std::vector<std::vector<int64_t>>{{1, 3, 12, 12}, {8, 3, 3, 3}, {8, 8, 1, 1}})
    in.push_back(testing::ToTensor(*testing::RandomTensor(DType::kF32, dims, -1, 1, seed++)));
  auto ctx = *Context::Create(dnn.exe);
  auto plain = ctx->Invoke("main", in);
  BOOST_REQUIRE_MESSAGE(plain.ok(), plain.status().ToString());
  Profile profile;
  InvokeOptions options;
  options.profile = &profile;
  constexpr int kRuns = 3;
  for (int i = 0; i < kRuns; ++i) {
    auto out = ctx->Invoke("main", in, options);
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    BOOST_TEST(Compare(*testing::FromTensor((*out)[0]), *testing::FromTensor((*plain)[0]), 0, 0) ==
               "");
  }
  BOOST_REQUIRE(ctx->Invoke("main", in).ok());  // not profiled: no rows, no calls added

  const std::vector<std::string> kinds = {"conv", "pool", "binary", "eltwise", "reorder"};
  std::map<int32_t, double> stepped_ms;
  std::set<std::string> seen;
  BOOST_REQUIRE(!profile.steps().empty());
  for (const Profile::StepRow& s : profile.steps()) {
    std::string name = Profile::StepName(*dnn.exe, s);
    BOOST_TEST(name == "onednn:" + s.kind + "(" + s.impl + ")");
    bool known = std::find(kinds.begin(), kinds.end(), s.kind) != kinds.end();
    BOOST_TEST(known, name);
    BOOST_TEST(!s.impl.empty(), name);
    BOOST_TEST(s.reference == (s.impl.rfind("ref", 0) == 0), name);
    BOOST_TEST(s.calls == kRuns, name);
    BOOST_TEST(s.shapes.find(" -> ") != std::string::npos, s.shapes);
    stepped_ms[s.region] += s.total_ms;
    seen.insert(s.kind);
  }
  BOOST_TEST(seen.count("conv") == 1u);
  BOOST_TEST(seen.count("pool") == 1u);
  // The first conv reads the plain input: its operands name dims and layouts.
  bool first_conv = false;
  for (const Profile::StepRow& s : profile.steps())
    first_conv =
        first_conv || (s.kind == "conv" && s.shapes.rfind("1x3x12x12:abcd, 8x3x3x3:", 0) == 0);
  BOOST_TEST(first_conv);
  for (const auto& [region, ms] : stepped_ms) {
    const fb::ExternalRegion* x = dnn.exe->root().external_regions()->Get(region);
    std::string row = x->name()->str() + " (" + x->vendor()->str() + ")";
    double region_ms = -1;
    for (const Profile::Row& r : profile.ByExternalRegion(*dnn.exe)) {
      if (r.name != row) continue;
      region_ms = r.total_ms;
      BOOST_TEST(r.calls == kRuns);
    }
    BOOST_TEST(ms <= region_ms, row);
  }
  bool jit_row = false;
  for (const Profile::Row& r : profile.ByOpType(*dnn.exe))
    jit_row = jit_row || r.name.rfind("jit:", 0) == 0;
  BOOST_TEST(jit_row);  // the Gemm with constant weights runs on the JIT (prepacked)
}

// MatMul / Gemm with constant weights run on panels packed at compile time (kiln::PackedMatMul):
// the same values as the unpacked JIT GEMM and as a double reference, at M = 1, 10, 21 rows and
// K = 37, N = 23 (a partial panel at every width), with the bias + relu epilogue fused, Gemm's
// transB, alpha and broadcast C. oneDNN no longer claims them by default.
BOOST_AUTO_TEST_CASE(prepacked_weights_match_the_unpacked_jit_and_a_reference) {
  auto w = testing::RandomTensor(DType::kF32, {37, 23}, -1, 1, 11);
  auto b = testing::RandomTensor(DType::kF32, {23}, -1, 1, 12);
  auto wt = testing::RandomTensor(DType::kF32, {23, 37}, -1, 1, 13);
  auto c = testing::RandomTensor(DType::kF32, {1, 23}, -1, 1, 14);
  // The weights are initializers (constants), written into the model text.
  auto init = [](const char* decl, const TensorDataRef& t) {
    std::string s = std::string(decl) + " = {";
    std::vector<double> v = t->ToDoubles();
    for (size_t i = 0; i < v.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.9g", v[i]);
      s += (i ? ", " : "") + std::string(buf);
    }
    return s + "}";
  };
  std::string text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[B, S, 37] x, float[R, 37] a) => (float[B, S, 23] y, float[R, 23] z)
      <)" + init("float[37, 23] w", w) + ", " + init("float[23] b", b) + ", " +
                     init("float[23, 37] wt", wt) + ", " + init("float[1, 23] c", c) + R"(> {
      m = MatMul(x, w)
      mb = Add(m, b)
      y = Relu(mb)
      z = Gemm <transB = 1, alpha = 0.5> (a, wt, c)
    }
  )";
  std::string bytes = testing::ModelBytes(text);
  auto compile = [&](bool pack, const std::string& external) {
    CompileOptions o;
    o.external = external;
    o.pack_weights = pack;
    Compiled out;
    auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &out.stats);
    if (!kiln.ok()) BOOST_FAIL(kiln.status().message());
    auto exe = testing::LoadWithJit(*kiln, Vendors());
    if (!exe.ok()) BOOST_FAIL(exe.status().message());
    out.exe = *exe;
    return out;
  };
  Compiled packed = compile(true, "none"), plain = compile(false, "none");
  Compiled dflt = compile(true, "onednn");
  BOOST_TEST(packed.stats.packed_matmuls == 2);
  BOOST_TEST(plain.stats.packed_matmuls == 0);
  BOOST_TEST(dflt.stats.packed_matmuls == 2);
  BOOST_TEST(dflt.stats.external_nodes == 0);
  std::vector<double> wd = w->ToDoubles(), bd = b->ToDoubles(), wtd = wt->ToDoubles(),
                      cd = c->ToDoubles();
  for (auto [bs, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {3, 7}}) {
    int64_t rows = bs * s;
    auto x = testing::RandomTensor(DType::kF32, {bs, s, 37}, -1, 1, 20 + rows);
    auto a = testing::RandomTensor(DType::kF32, {rows, 37}, -1, 1, 40 + rows);
    auto p = Run(packed, {x, a});
    auto u = Run(plain, {x, a});
    auto d = Run(dflt, {x, a});
    std::vector<double> xd = x->ToDoubles(), ad = a->ToDoubles();
    std::vector<double> yref(rows * 23), zref(rows * 23);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < 23; ++j) {
        double acc = 0, acc2 = 0;
        for (int64_t k = 0; k < 37; ++k) {
          acc += xd[i * 37 + k] * wd[k * 23 + j];
          acc2 += ad[i * 37 + k] * wtd[j * 37 + k];
        }
        yref[i * 23 + j] = std::max(acc + bd[j], 0.0);
        zref[i * 23 + j] = 0.5 * acc2 + cd[j];
      }
    auto yt = F32({bs, s, 23}, yref), zt = F32({rows, 23}, zref);
    // f32 dot products of 37 terms of magnitude <= 1: rounding below 37 * 2^-24 * 37.
    for (const auto& got : {p, u, d}) {
      std::string dy = Compare(*got[0], *yt, 1e-5, 1e-4), dz = Compare(*got[1], *zt, 1e-5, 1e-4);
      BOOST_TEST(dy.empty(), "rows=" << rows << " y: " << dy);
      BOOST_TEST(dz.empty(), "rows=" << rows << " z: " << dz);
    }
    // Packing changes where B is read from, not the order of the sums; alpha = 0.5 is exact.
    BOOST_TEST(Compare(*p[0], *u[0], 0, 0).empty());
    BOOST_TEST(Compare(*p[1], *u[1], 0, 0).empty());
  }
}

BOOST_AUTO_TEST_CASE(if_runs_the_branch_the_condition_picks) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (bool c, float[N] x) => (float[N] y) {
      one = Constant <value = float {1}> ()
      two = Constant <value = float {2}> ()
      y = If (c) <
        then_branch = t () => (float[N] ty) { ty = Add(x, one) },
        else_branch = e () => (float[N] ey) { ey = Mul(x, two) }
      >
    }
  )";
  Compiled c = Compile(text, "none");
  for (int64_t n : {3, 6}) {
    auto x = testing::RandomTensor(DType::kF32, {n}, -1, 1, n);
    std::vector<double> xv = x->ToDoubles(), plus, times;
    for (double v : xv) {
      plus.push_back(static_cast<float>(v) + 1.0f);
      times.push_back(static_cast<float>(v) * 2.0f);
    }
    auto yt = Run(c, {testing::MakeTensor(DType::kBool, {}, {1}), x});
    auto ye = Run(c, {testing::MakeTensor(DType::kBool, {}, {0}), x});
    BOOST_TEST(Compare(*yt[0], *F32({n}, plus), 0, 0).empty());
    BOOST_TEST(Compare(*ye[0], *F32({n}, times), 0, 0).empty());
  }
}

BOOST_AUTO_TEST_CASE(loop_carries_values_until_the_trip_count_or_the_condition) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (int64 m, float x, float limit) => (float y, float[K] acc) {
      t = Constant <value = bool {1}> ()
      e = Constant <value = float[0] {}> ()
      y, acc = Loop (m, t, x, e) <
        body = b (int64 i, bool cin, float v, float[P] a) => (bool cout, float vout, float[Q] aout) {
          one = Constant <value = float {1}> ()
          vout = Add(v, one)
          cout = Less(vout, limit)
          z = Constant <value = int64[1] {0}> ()
          vv = Unsqueeze(vout, z)
          aout = Concat <axis = 0> (a, vv)
        }
      >
    }
  )";
  Compiled c = Compile(text, "none");
  struct Case {
    int64_t m;
    double x, limit;
    int trips;
  };
  for (Case cs : {Case{5, 0, 100, 5}, Case{50, 0, 3.5, 4}, Case{0, 2, 100, 0}}) {
    auto out = Run(c, {I64({}, {double(cs.m)}), F32({}, {cs.x}), F32({}, {cs.limit})});
    BOOST_TEST(out[0]->ToDoubles() == std::vector<double>({cs.x + cs.trips}));
    std::vector<double> acc;
    for (int k = 1; k <= cs.trips; ++k) acc.push_back(cs.x + k);
    BOOST_TEST(out[1]->ToDoubles() == acc, "m=" << cs.m);
  }
}

BOOST_AUTO_TEST_CASE(loop_scan_outputs_stack_each_iteration) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (int64 m, float[2] x) => (float[2] last, float[T, 2] rows) {
      t = Constant <value = bool {1}> ()
      last, rows = Loop (m, t, x) <
        body = b (int64 i, bool cin, float[2] v) => (bool cout, float[2] vout, float[2] row) {
          two = Constant <value = float {2}> ()
          vout = Mul(v, two)
          cout = Identity(cin)
          row = Identity(vout)
        }
      >
    }
  )";
  Compiled c = Compile(text, "none");
  for (int64_t m : {1, 4}) {
    auto out = Run(c, {I64({}, {double(m)}), F32({2}, {1, -3})});
    std::vector<double> rows;
    double a = 1, b = -3;
    for (int64_t k = 0; k < m; ++k) {
      a *= 2;
      b *= 2;
      rows.push_back(a);
      rows.push_back(b);
    }
    BOOST_TEST(out[0]->ToDoubles() == std::vector<double>({a, b}));
    BOOST_TEST(out[1]->dims() == std::vector<int64_t>({m, 2}));
    BOOST_TEST(out[1]->ToDoubles() == rows);
  }
}

BOOST_AUTO_TEST_CASE(transpose_and_reshape_chains_are_simplified) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3, 4] x) => (float[4, 2, 3] y, float[6, 4] z) {
      t1 = Transpose <perm = [1, 0, 2]> (x)
      y = Transpose <perm = [2, 1, 0]> (t1)
      s1 = Constant <value = int64[2] {3, 8}> ()
      s2 = Constant <value = int64[2] {6, 4}> ()
      r1 = Reshape(x, s1)
      z = Reshape(r1, s2)
    }
  )";
  Compiled c = Compile(text, "none");
  BOOST_TEST(c.stats.simplified_nodes == 2);
  BOOST_TEST(c.stats.kernels == 1);  // one transpose; the reshapes are views
  auto x = testing::RandomTensor(DType::kF32, {2, 3, 4}, -1, 1, 9);
  auto out = Run(c, {x});
  std::vector<double> xv = x->ToDoubles(), y;
  // y[k][i][j] = t1[j][i][k] = x[i][j][k]
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) y.push_back(xv[(i * 3 + j) * 4 + k]);
    }
  }
  BOOST_TEST(Compare(*out[0], *F32({4, 2, 3}, y), 0, 0).empty());
  BOOST_TEST(Compare(*out[1], *F32({6, 4}, xv), 0, 0).empty());
}

// A Pad that pads nothing (DenseNet's transitions, as torchvision exports them) is bypassed, so
// with oneDNN the convolutions around it stay in one region; a Pad that pads, one whose output
// is a graph output, and the values stay as they were.
BOOST_AUTO_TEST_CASE(pads_of_zero_are_bypassed) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 6, 6] x) => (float[1, 8, 3, 3] y, float[1, 8, 8, 8] q) {
      w = Constant <value = float[8, 8, 1, 1] {
        1, 0, 0, 0, 0, 0, 0, 0,  0, 1, 0, 0, 0, 0, 0, 0,  0, 0, 1, 0, 0, 0, 0, 0,
        0, 0, 0, 1, 0, 0, 0, 0,  0, 0, 0, 0, 1, 0, 0, 0,  0, 0, 0, 0, 0, 1, 0, 0,
        0, 0, 0, 0, 0, 0, 1, 0,  0, 0, 0, 0, 0, 0, 0, -1}> ()
      zero = Constant <value = int64[8] {0, 0, 0, 0, 0, 0, 0, 0}> ()
      one = Constant <value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}> ()
      c = Conv(x, w)
      p = Pad(c, zero)
      a = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> (p)
      y = Conv(a, w)
      q = Pad(x, one)
    }
  )";
  for (const char* external : {"none", "onednn"}) {
    Compiled c = Compile(text, external);
    BOOST_TEST(c.stats.simplified_nodes == 1, external);
    if (std::string(external) == "onednn") BOOST_TEST(c.stats.external_regions == 1);
    auto x = testing::RandomTensor(DType::kF32, {1, 8, 6, 6}, -1, 1, 12);
    auto out = Run(c, {x});
    std::vector<double> xv = x->ToDoubles(), y, q(8 * 8 * 8, 0.0);
    for (int ch = 0; ch < 8; ++ch) {
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
          double s = 0;
          for (int di = 0; di < 2; ++di) {
            for (int dj = 0; dj < 2; ++dj) s += xv[(ch * 6 + 2 * i + di) * 6 + 2 * j + dj];
          }
          y.push_back(s / 4);  // w negates channel 7: twice is +1
        }
      }
      for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 6; ++j) q[(ch * 8 + i + 1) * 8 + j + 1] = xv[(ch * 6 + i) * 6 + j];
      }
    }
    BOOST_TEST(Compare(*out[0], *F32({1, 8, 3, 3}, y), 1e-6, 1e-5).empty(), external);
    BOOST_TEST(Compare(*out[1], *F32({1, 8, 8, 8}, q), 0, 0).empty(), external);
  }
}

BOOST_AUTO_TEST_CASE(bad_models_fail_with_clear_errors) {
  CompileOptions o;
  o.external = "none";
  std::string junk = "not a protobuf at all";
  auto r = kiln::CompileOnnxBytes(junk.data(), junk.size(), o);
  BOOST_TEST(!r.ok());
  // A shape contradiction names the node.
  std::string bytes = testing::ModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3] x, float[4] y) => (float[2, 3] z) { z = Add(x, y) }
  )");
  r = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().message().find("Add") != std::string::npos, r.status().message());
  o.external = "tpu";
  bytes = testing::ModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[3] x) => (float[3] z) { z = Relu(x) }
  )");
  r = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().message().find("tpu") != std::string::npos);
}

// Shapes that contradict what compile time could only assume (a symbolic dim broadcast
// against 3, MatMul's symbolic inner dims, two symbolic dims broadcast together) fail with an
// error naming the node and the shapes, never a read past a buffer; the shapes that fit run.
BOOST_AUTO_TEST_CASE(run_time_shapes_that_contradict_the_model_fail_cleanly) {
  auto expect_error = [](const Compiled& c, const std::vector<TensorDataRef>& in,
                         const std::string& node, const std::string& what) {
    auto out = testing::RunExecutable(c.exe, in);
    BOOST_REQUIRE_MESSAGE(!out.ok(), node << ": ran with contradicting shapes");
    const std::string& m = out.status().message();
    BOOST_TEST(out.status().code() == StatusCode::kInvalidArgument, m);
    BOOST_TEST(m.find("node '" + node) != std::string::npos, m);
    BOOST_TEST(m.find(what) != std::string::npos, m);
  };
  for (const std::string external : {"none", "onednn"}) {
    BOOST_TEST_CONTEXT(external) {
      // seq against 3: seq must be 1 or 3.
      Compiled add = Compile(R"(
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[S] x) => (float[3] y) {
          c = Constant <value = float[3] {1, 2, 3}> ()
          y = Add(x, c)
        })",
                             external);
      expect_error(add, {F32({2}, {10, 20})}, "Add_", "f32[2]");
      expect_error(add, {F32({5}, {1, 1, 1, 1, 1})}, "Add_", "f32[5]");
      BOOST_TEST(Compare(*Run(add, {F32({1}, {10})})[0], *F32({3}, {11, 12, 13}), 0, 0).empty());
      BOOST_TEST(Compare(*Run(add, {F32({3}, {1, 1, 1})})[0], *F32({3}, {2, 3, 4}), 0, 0).empty());
      // Two unrelated symbols: the run-time shape function finds they do not fit.
      Compiled add2 = Compile(R"(
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[A] x, float[B] y) => (float[C] z) { z = Add(x, y) })",
                              external);
      expect_error(add2, {F32({2}, {1, 2}), F32({3}, {1, 2, 3})}, "Add_", "(f32[2], f32[3])");
      BOOST_TEST(Compare(*Run(add2, {F32({1}, {1}), F32({3}, {1, 2, 3})})[0],
                         *F32({3}, {2, 3, 4}), 0, 0)
                     .empty());
      // MatMul's inner dims K1 and K2 must agree.
      Compiled mm = Compile(R"(
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, K1] a, float[K2, 3] b) => (float[2, 3] c) { c = MatMul(a, b) })",
                            external);
      expect_error(mm, {F32({2, 4}, std::vector<double>(8, 1)), F32({2, 3}, std::vector<double>(6, 1))},
                   "MatMul_", "[2, 4]");
      BOOST_TEST(Compare(*Run(mm, {F32({2, 2}, {1, 2, 3, 4}), F32({2, 3}, {1, 0, 1, 0, 1, 1})})[0],
                         *F32({2, 3}, {1, 2, 3, 3, 4, 7}), 0, 0)
                     .empty());
    }
  }
}

// A position table sliced to the sequence length (Slice(pos, 0, Shape(x)[0]) has dim min(S, 4))
// added to x[S, 2]: the sum keeps dim S (before, a fresh dim with two more shape functions, and
// every later shape computed at run time), and a sequence longer than the table is an error,
// not a read past it.
BOOST_AUTO_TEST_CASE(a_table_clamped_to_the_sequence_broadcasts_to_the_sequence) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[S, 2] x) => (float[S, 2] y) {
      pos = Constant <value = float[4, 2] {0, 1, 10, 11, 20, 21, 30, 31}> ()
      sh = Shape(x)
      z = Constant <value = int64[1] {0}> ()
      s = Gather(sh, z)
      p = Slice(pos, z, s, z)
      y = Add(x, p)
    })";
  for (const std::string external : {"none", "onednn"}) {
    BOOST_TEST_CONTEXT(external) {
      Compiled c = Compile(text, external);
      BOOST_TEST(c.stats.shape_functions == 1);  // the slice's size min(S, 4); none for the Add
      auto y = Run(c, {F32({3, 2}, {1, 1, 1, 1, 1, 1})});
      BOOST_TEST(Compare(*y[0], *F32({3, 2}, {1, 2, 11, 12, 21, 22}), 0, 0).empty());
      auto bad = testing::RunExecutable(c.exe, {F32({5, 2}, std::vector<double>(10, 1))});
      BOOST_REQUIRE(!bad.ok());
      BOOST_TEST(bad.status().message().find("node 'Add_") != std::string::npos,
                 bad.status().message());
      // Saying what is wrong: the sequence is longer than the table.
      BOOST_TEST(bad.status().message().find("is 5, more than the 4 rows of a table sliced to "
                                             "it") != std::string::npos,
                 bad.status().message());
    }
  }
}

// ReverseSequence needs one sequence length per batch entry (ONNX Runtime rejects any other
// count); it used to copy its input unchanged. Both sizes static: a compile error naming the
// node and both sizes. Either symbolic: a run-time error naming the node and both sizes (the
// kernel's precondition).
BOOST_AUTO_TEST_CASE(reverse_sequence_lengths_must_match_the_batch) {
  std::string onnx = testing::ModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4, 3, 2] x, int64[2] l) => (float[4, 3, 2] y) { y = ReverseSequence(x, l) })");
  CompileOptions o;
  auto bad = kiln::CompileOnnxBytes(onnx.data(), onnx.size(), o);
  BOOST_REQUIRE(!bad.ok());
  const std::string& m = bad.status().message();
  BOOST_TEST(m.find("(ReverseSequence)") != std::string::npos, m);
  BOOST_TEST(m.find("sequence_lens has 2 entries but the batch dim (axis 1 of 'x') is 3") !=
                 std::string::npos,
             m);

  Compiled c = Compile(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[T, B, 2] x, int64[L] l) => (float[T, B, 2] y) { y = ReverseSequence(x, l) })");
  TensorDataRef x = F32({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto y = Run(c, {x, I64({3}, {2, 1, 0})});
  BOOST_TEST(Compare(*y[0], *F32({2, 3, 2}, {6, 7, 2, 3, 4, 5, 0, 1, 8, 9, 10, 11}), 0, 0).empty());
  for (int64_t count : {2, 4}) {
    auto r = testing::RunExecutable(c.exe, {x, I64({count}, std::vector<double>(count, 1))});
    BOOST_REQUIRE_MESSAGE(!r.ok(), std::to_string(count) + " lengths for a batch of 3 ran");
    const std::string& e = r.status().message();
    BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument, r.status().ToString());
    BOOST_TEST(e.find("node 'ReverseSequence_0'") != std::string::npos, e);
    BOOST_TEST(e.find("in1.shape[0] is " + std::to_string(count) + ", in0.shape[1] is 3") !=
                   std::string::npos,
               e);
  }
}

// An embedding lookup fused with the add after it: a token id outside the table is an error
// naming the Gather node (not the fused kernel's anchor), the id and the range, as ONNX Runtime
// words it; before, it read the last (or first) row.
BOOST_AUTO_TEST_CASE(out_of_range_token_ids_are_an_error_naming_the_gather) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[B, S] ids) => (float[B, S, 2] y) {
      table = Constant <value = float[5, 2] {0, 1, 10, 11, 20, 21, 30, 31, 40, 41}> ()
      bias = Constant <value = float[2] {0.5, 0.25}> ()
      e = Gather(table, ids)
      y = Add(e, bias)
    })";
  Compiled c = Compile(text);
  auto y = Run(c, {I64({1, 3}, {4, -5, 2})});
  BOOST_TEST(Compare(*y[0], *F32({1, 3, 2}, {40.5, 41.25, 0.5, 1.25, 20.5, 21.25}), 0, 0).empty());
  for (int64_t id : {int64_t{5}, int64_t{-6}, int64_t{1000000}, int64_t{1} << 62}) {
    auto bad = testing::RunExecutable(c.exe, {I64({1, 3}, {1, double(id), 2})});
    BOOST_REQUIRE(!bad.ok());
    const std::string& m = bad.status().message();
    BOOST_TEST(bad.status().code() == StatusCode::kInvalidArgument, bad.status().ToString());
    BOOST_TEST(m.find("in 'main' at pc ") != std::string::npos, m);
    BOOST_TEST(m.find("(Gather): indices element out of data bounds, idx=" + std::to_string(id) +
                      " must be within the inclusive range [-5,4]") != std::string::npos,
               m);
  }
}

// A shape computed from the inputs that no tensor can have says so, rather than that the
// shapes "do not fit together".
BOOST_AUTO_TEST_CASE(inputs_too_large_for_any_tensor_say_so) {
  Compiled c = Compile(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[2] shape) => (float[N, M] y) {
      y = ConstantOfShape(shape)
    })");
  auto bad = testing::RunExecutable(c.exe, {I64({2}, {double(int64_t{1} << 40), 1 << 20})});
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().code() == StatusCode::kInvalidArgument, bad.status().ToString());
  BOOST_TEST(bad.status().message().find(") are too large: a tensor computed from their shapes") !=
                 std::string::npos,
             bad.status().ToString());
  auto ok = Run(c, {I64({2}, {2, 3})});
  BOOST_TEST(ok[0]->num_elements() == 6);
}

// ---- uint16/32/64 end to end, with values a signed type would get wrong (above 2^31 / 2^63),
// and CastLike whose `like` may have any shape. ----

template <typename T>
TensorDataRef Make(DType dtype, std::vector<int64_t> dims, const std::vector<T>& v) {
  StatusOr<TensorDataRef> t =
      TensorData::Copy(dtype, std::move(dims), v.data(), v.size() * sizeof(T));
  if (!t.ok()) BOOST_FAIL(t.status().message());
  return *t;
}

template <typename T>
std::vector<T> Values(const TensorData& t) {
  std::vector<T> v(t.num_elements());
  std::memcpy(v.data(), t.data(), v.size() * sizeof(T));
  return v;
}

constexpr uint64_t kTwo63 = uint64_t{1} << 63;

// Binary ops, comparisons, shifts and the min/max family on u64 values at and above 2^63.
BOOST_AUTO_TEST_CASE(uint64_elementwise_ops_use_unsigned_semantics) {
  Compiled c = Compile(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (uint64[4] a, uint64[4] b) => (uint64[4] q, uint64[4] m, uint64[4] hi, bool[4] gt,
                                     uint64[4] shl, uint64[4] shr) {
      q = Div(a, b)
      m = Mod(a, b)
      hi = Max(a, b)
      gt = Greater(a, b)
      shl = BitShift <direction = "LEFT"> (a, b)
      shr = BitShift <direction = "RIGHT"> (a, b)
    }
  )");
  std::vector<uint64_t> a = {kTwo63 + 5, ~uint64_t{0}, 7, kTwo63};
  std::vector<uint64_t> b = {10, 2, kTwo63 + 1, 63};
  auto out = Run(c, {Make(DType::kU64, {4}, a), Make(DType::kU64, {4}, b)});
  for (const auto& t : out) BOOST_TEST(t->dims() == std::vector<int64_t>{4});
  std::vector<uint64_t> q = Values<uint64_t>(*out[0]), m = Values<uint64_t>(*out[1]),
                        hi = Values<uint64_t>(*out[2]), shl = Values<uint64_t>(*out[4]),
                        shr = Values<uint64_t>(*out[5]);
  std::vector<uint8_t> gt = Values<uint8_t>(*out[3]);
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST_INFO("i = " << i << ", a = " << a[i] << ", b = " << b[i]);
    BOOST_TEST(q[i] == a[i] / b[i]);
    BOOST_TEST(m[i] == a[i] % b[i]);
    BOOST_TEST(hi[i] == std::max(a[i], b[i]));
    BOOST_TEST(gt[i] == (a[i] > b[i] ? 1 : 0));
    uint64_t want_shl = b[i] < 64 ? a[i] << b[i] : 0, want_shr = b[i] < 64 ? a[i] >> b[i] : 0;
    BOOST_TEST(shl[i] == want_shl);
    BOOST_TEST(shr[i] == want_shr);
  }
}

// uint32 and uint16 through reductions, ArgMax, Where, Concat, Gather, Clip and Cast.
BOOST_AUTO_TEST_CASE(uint32_and_uint16_through_reductions_indexing_and_casts) {
  Compiled c = Compile(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (uint32[2, 3] x, uint16[3] s, bool[3] pick) => (uint32[2, 1] rmax, int64[2] amax,
        uint16[3] w, uint32[4, 3] cat, uint32[2, 2] gat, uint32[2, 3] clip, float[2, 3] f,
        uint32[2, 3] half) {
      rmax = ReduceMax <axes = [1], keepdims = 1> (x)
      amax = ArgMax <axis = 1, keepdims = 0> (x)
      zero = Constant <value = uint16[1] {0}> ()
      w = Where(pick, s, zero)
      cat = Concat <axis = 0> (x, x)
      idx = Constant <value = int64[2] {2, 0}> ()
      gat = Gather <axis = 1> (x, idx)
      lo64 = Constant <value_int = 5> ()
      up64 = Constant <value_int = 3000000000> ()
      lo = Cast <to = 12> (lo64)
      up = Cast <to = 12> (up64)
      clip = Clip(x, lo, up)
      f = Cast <to = 1> (x)
      two64 = Constant <value_int = 2> ()
      two = Cast <to = 12> (two64)
      half = Div(x, two)
    }
  )");
  std::vector<uint32_t> x = {0xFFFFFFFFu, 1, 0x80000000u, 3, 4000000000u, 2};
  std::vector<uint16_t> s = {0xFFFF, 0x8000, 9};
  std::vector<uint8_t> pick = {1, 0, 1};
  auto out = Run(
      c, {Make(DType::kU32, {2, 3}, x), Make(DType::kU16, {3}, s), Make(DType::kBool, {3}, pick)});
  BOOST_TEST((Values<uint32_t>(*out[0]) == std::vector<uint32_t>{0xFFFFFFFFu, 4000000000u}));
  BOOST_TEST((Values<int64_t>(*out[1]) == std::vector<int64_t>{0, 1}));
  BOOST_TEST((Values<uint16_t>(*out[2]) == std::vector<uint16_t>{0xFFFF, 0, 9}));
  std::vector<uint32_t> cat = x;
  cat.insert(cat.end(), x.begin(), x.end());
  BOOST_TEST(Values<uint32_t>(*out[3]) == cat);
  BOOST_TEST((Values<uint32_t>(*out[4]) == std::vector<uint32_t>{0x80000000u, 0xFFFFFFFFu, 2, 3}));
  BOOST_TEST((Values<uint32_t>(*out[5]) ==
              std::vector<uint32_t>{3000000000u, 5, 0x80000000u, 5, 3000000000u, 5}));
  std::vector<float> f = Values<float>(*out[6]);
  for (int i = 0; i < 6; ++i) BOOST_TEST(f[i] == static_cast<float>(x[i]));
  std::vector<uint32_t> half = Values<uint32_t>(*out[7]);
  for (int i = 0; i < 6; ++i) BOOST_TEST(half[i] == x[i] / 2);  // 0xFFFFFFFF / 2 = 0x7FFFFFFF
}

// An unsigned subgraph of constants folds at compile time (same kernels, run by the evaluator)
// and keeps unsigned wrap-around: 4294967295 + 1 wraps to 0 in uint32. (ONNX 1.12's text parser
// has no uint32 literals: the constants are cast from int64.)
BOOST_AUTO_TEST_CASE(unsigned_constants_fold) {
  Compiled c = Compile(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (uint32[2] x) => (uint32[2] y) {
      k64 = Constant <value = int64[2] {4294967295, 7}> ()
      one64 = Constant <value = int64[1] {1}> ()
      k = Cast <to = 12> (k64)
      one = Cast <to = 12> (one64)
      k1 = Add(k, one)
      y = Add(x, k1)
    }
  )");
  BOOST_TEST(c.stats.folded_nodes == 3);  // k, one, k1
  auto out = Run(c, {Make(DType::kU32, {2}, std::vector<uint32_t>{5, 5})});
  BOOST_TEST((Values<uint32_t>(*out[0]) == std::vector<uint32_t>{5, 13}));
}

// CastLike reads only its `like` input's dtype: the compiler makes it a Cast, the input is
// declared dtype-only, and a `like` of any shape (the ONNX node tests pass [1] for [3, 4]) runs.
BOOST_AUTO_TEST_CASE(castlike_takes_a_like_of_any_shape) {
  Compiled c = Compile(R"(
    <ir_version: 8, opset_import: ["" : 15]>
    g (float[2, 2] x, uint16[2, 2] like) => (uint16[2, 2] y) {
      y = CastLike(x, like)
    }
  )");
  const FunctionSignature& sig = c.exe->signature(c.exe->FindFunction(c.exe->entry_function()));
  BOOST_REQUIRE(sig.params.size() == 2u);
  BOOST_TEST(!sig.params[0].dtype_only);
  BOOST_TEST(sig.params[1].dtype_only);
  BOOST_TEST(sig.params[1].ToString() == "like: u16[2, 2] (any shape)");
  BOOST_TEST(c.stats.simplified_nodes == 1);
  auto x = testing::F32({2, 2}, {1.5, 65535, 70000.0, 2});
  for (std::vector<int64_t> like_dims :
       {std::vector<int64_t>{1}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{}}) {
    int64_t n = 1;
    for (int64_t d : like_dims) n *= d;
    auto like = Make(DType::kU16, like_dims, std::vector<uint16_t>(n, 0));
    auto out = Run(c, {x, like});
    // float -> uint16 truncates toward zero; out of range saturates.
    BOOST_TEST((Values<uint16_t>(*out[0]) == std::vector<uint16_t>{1, 65535, 65535, 2}));
  }
  // The dtype is still checked.
  auto bad = testing::RunExecutable(c.exe, {x, testing::F32({1}, {0})});
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(
      bad.status().message().find("input 1 'like': dtype f32, expected u16") != std::string::npos,
      bad.status().message());
}

// The byte size of a rank-r tensor whose dims are computed at run time is a chain of r
// overflow-checked products, each reading its partial product several times: the shape function
// binds each to a variable, so its kernel IR tree stays linear in r. Written as one expression
// per value, these rank-8 values passed the payload's tree-size limit and the executable did not
// load (so did swin_t's rank-6 windows, whose dims are longer expressions).
BOOST_AUTO_TEST_CASE(high_rank_run_time_shapes_load_and_run) {
  Compiled c = Compile(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[8] shape) => (float[A, B, C, D, E, F, G, H] y1, float[A, B, C, D, E, F, G, H] y2,
                           float[A, B, C, D, E, F, G, H] y3, float[A, B, C, D, E, F, G, H] y4) {
      z = ConstantOfShape(shape)
      y1 = Relu(z)
      y2 = Sigmoid(z)
      y3 = Exp(z)
      y4 = Abs(z)
    })");
  auto out = Run(c, {I64({8}, {1, 2, 1, 1, 3, 1, 1, 2})});
  BOOST_TEST(out[0]->num_elements() == 12);
  BOOST_TEST(out[3]->num_elements() == 12);
  auto bad = testing::RunExecutable(c.exe, {I64({8}, {1 << 20, 1 << 20, 1 << 20, 1, 1, 1, 1, 1})});
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().find(") are too large") != std::string::npos,
             bad.status().ToString());
}

}  // namespace
}  // namespace kiln::compiler
