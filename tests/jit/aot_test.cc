// Tests for code compiled ahead of time (jit/aot_compile.h, jit/aot_objects.h): an executable
// carrying objects for this host links them with no compile and computes what the JIT computes;
// objects for another CPU, LLVM or ABI are ignored; corrupt objects are clean load errors; files
// without the section load as before.
#define BOOST_TEST_MODULE aot_test
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "jit/aot_compile.h"
#include "jit/aot_objects.h"
#include "jit/compute.h"
#include "jit/kernel_ir_serialize.h"
#include "jit/kernel_provider.h"
#include "serializer/version.h"
#include "tests/jit/test_programs.h"
#include "tests/jit/test_util.h"
#include "vm/builder.h"
#include "vm/context.h"
#include "vm/verifier.h"

namespace kiln::jit {
namespace {

using testing::KirKernel;
using testing::RowSumKernel;
using testing::RowsShapeKernel;

constexpr int64_t kStorageBytes = 1 << 20;  // every output below fits

DimSpec Sym(const char* s) { return DimSpec{-1, s}; }

void EmitAlloc(FunctionBuilder& f, int dst, int reg, DType dtype, int shape_reg) {
  f.LoadConsti(reg, kStorageBytes);
  f.AllocStorage(reg + 1, reg);
  f.AllocTensorReg(dst, reg + 1, 0, dtype, shape_reg);
}

// @add(a: f32[n, m], b: f32[m]) = a + b; @exp(a: f32[n, m]) = exp(a) (vector math through
// libmvec); @row_sum(a: f32[n, m]) -> f32[n] through a shape function. Three kernels and one
// shape function: four objects per target.
void BuildProgram(ExecutableBuilder& b) {
  int k_add = b.AddKernel(KirKernel(
      ElementwiseBinary("add", {DType::kF32, 2, {}}, {DType::kF32, 1, {}}, DType::kF32,
                        [](Expr x, Expr y) { return x + y; }),
      {DType::kF32, DType::kF32}, {DType::kF32}));
  int k_exp = b.AddKernel(
      KirKernel(ElementwiseUnary("exp", DType::kF32, DType::kF32, 2, [](Expr x) { return Exp(x); }),
                {DType::kF32}, {DType::kF32}));
  int k_sum = b.AddKernel(KirKernel(RowSumKernel(), {DType::kF32}, {DType::kF32}));
  int s_rows = b.AddShapeFunction(
      ShapeFunctionDef{"rows_shape", 1, 1, {}, kPayloadFormat, SerializeKernel(RowsShapeKernel())});
  ValueSpec matrix{"a", DType::kF32, {Sym("n"), Sym("m")}, false};
  {
    FunctionBuilder& f = b.AddFunction("add");
    f.AddParam(matrix);
    f.AddParam(ValueSpec{"b", DType::kF32, {Sym("m")}, false});
    f.AddResult(ValueSpec{"y", DType::kF32, {Sym("n"), Sym("m")}, false});
    f.ShapeOf(2, 0);
    EmitAlloc(f, 3, 10, DType::kF32, 2);
    f.InvokeKernel(k_add, {0, 1}, {3});
    f.Ret({3});
  }
  {
    FunctionBuilder& f = b.AddFunction("exp");
    f.AddParam(matrix);
    f.AddResult(ValueSpec{"y", DType::kF32, {Sym("n"), Sym("m")}, false});
    f.ShapeOf(1, 0);
    EmitAlloc(f, 2, 10, DType::kF32, 1);
    f.InvokeKernel(k_exp, {0}, {2});
    f.Ret({2});
  }
  {
    FunctionBuilder& f = b.AddFunction("row_sum");
    f.AddParam(matrix);
    f.AddResult(ValueSpec{"y", DType::kF32, {Sym("n")}, false});
    f.LoadConsti(10, kStorageBytes);
    f.AllocStorage(11, 10);
    f.AllocTensor(1, 11, 0, DType::kI64, {1});
    f.InvokeShapeFunc(s_rows, {0}, {1});
    EmitAlloc(f, 2, 12, DType::kF32, 1);
    f.InvokeKernel(k_sum, {0}, {2});
    f.Ret({2});
  }
}

TargetInfo Native() {
  auto t = ResolveCodeTarget("native");
  if (!t.ok()) throw std::runtime_error(t.status().ToString());
  return *t;
}

// The program's code for `target` (compiled once per target: it takes a second or so).
AotTargetDef CodeFor(const TargetInfo& target) {
  static std::map<std::string, AotTargetDef>* compiled = new std::map<std::string, AotTargetDef>();
  std::string key = target.cpu + "|" + target.features;
  auto it = compiled->find(key);
  if (it != compiled->end()) return it->second;
  ExecutableBuilder b;
  BuildProgram(b);
  auto def = CompileCodeTarget(target, b.kernels(), b.shape_functions(), 2);
  if (!def.ok()) throw std::runtime_error(def.status().ToString());
  return (*compiled)[key] = *def;
}

// The program with these code targets, as file bytes.
std::vector<uint8_t> ProgramBytes(std::vector<AotTargetDef> targets) {
  ExecutableBuilder b;
  BuildProgram(b);
  for (AotTargetDef& t : targets) b.AddAotTarget(std::move(t));
  auto bytes = b.Finish();
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  return *bytes;
}

// One load with an engine of its own, so that its counters see only this executable.
struct Loaded {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<JitKernelProvider> provider;
  StatusOr<std::shared_ptr<const Executable>> exe = Internal("not loaded");
};

Loaded Load(const std::vector<uint8_t>& bytes, const JitProviderOptions& provider = {}) {
  Loaded l;
  auto engine = Engine::Create();
  BOOST_REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
  l.engine = std::move(*engine);
  l.provider = std::make_shared<JitKernelProvider>(l.engine, provider);
  LoadOptions options;
  options.kernels = l.provider;
  l.exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  return l;
}

Tensor Wrap(std::vector<float>& v, std::vector<int64_t> dims) {
  auto shape = Shape::Make(dims.data(), static_cast<int>(dims.size()));
  return Tensor::Wrap(v.data(), DType::kF32, *shape);
}

std::vector<float> Read(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<float>(p, p + t.NumElements());
}

// Every function's output at n = 5, m = 37 (a vector body and a tail), concatenated.
std::vector<float> RunAll(const std::shared_ptr<const Executable>& exe) {
  const int64_t n = 5, m = 37;
  std::vector<float> a(n * m), b(m);
  for (int64_t i = 0; i < n * m; ++i) a[i] = static_cast<float>((i * 7) % 23) * 0.25f - 2.5f;
  for (int64_t j = 0; j < m; ++j) b[j] = static_cast<float>(j % 5) - 2.0f;
  auto ctx = Context::Create(exe);
  BOOST_REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  std::vector<float> all;
  for (const char* function : {"add", "exp", "row_sum"}) {
    std::vector<Tensor> inputs = {Wrap(a, {n, m})};
    if (std::string(function) == "add") inputs.push_back(Wrap(b, {m}));
    auto out = (*ctx)->Invoke(function, inputs);
    BOOST_REQUIRE_MESSAGE(out.ok(), function << ": " << out.status().ToString());
    std::vector<float> got = Read((*out)[0]);
    all.insert(all.end(), got.begin(), got.end());
  }
  // The answers themselves (add exactly; exp and the sums within f32 rounding), so that
  // agreement between two loads means both are right.
  for (int64_t i = 0; i < n * m; ++i) {
    BOOST_TEST(all[i] == a[i] + b[i % m]);
    BOOST_TEST(all[n * m + i] == std::exp(a[i]), boost::test_tools::tolerance(1e-6f));
  }
  for (int64_t r = 0; r < n; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < m; ++j) sum += a[r * m + j];
    BOOST_TEST(all[2 * n * m + r] == static_cast<float>(sum), boost::test_tools::tolerance(1e-5f));
  }
  return all;
}

BOOST_AUTO_TEST_CASE(native_code_links_with_no_compile_and_matches_the_jit) {
  Loaded jit = Load(ProgramBytes({}));
  BOOST_REQUIRE_MESSAGE(jit.exe.ok(), jit.exe.status().ToString());
  std::vector<float> want = RunAll(*jit.exe);
  BOOST_TEST(jit.engine->stats().compilations == 4);

  Loaded aot = Load(ProgramBytes({CodeFor(Native())}));
  BOOST_REQUIRE_MESSAGE(aot.exe.ok(), aot.exe.status().ToString());
  // Linked at load, before any run.
  BOOST_TEST(aot.engine->stats().aot_linked == 4);
  std::vector<float> got = RunAll(*aot.exe);
  BOOST_TEST(got == want, boost::test_tools::per_element());  // the same code, bit for bit
  EngineStats engine = aot.engine->stats();
  BOOST_TEST(engine.compilations == 0);
  BOOST_TEST(engine.aot_linked == 4);
  BOOST_TEST(engine.aot_link_failures == 0);
  DispatchStats dispatch = aot.provider->stats();
  BOOST_TEST(dispatch.aot_kernels == 4);
  BOOST_TEST(dispatch.compilations == 0);
}

BOOST_AUTO_TEST_CASE(targets_this_host_cannot_run_are_ignored_and_the_jit_compiles) {
  TargetInfo native = Native();
  AotTargetDef foreign_cpu = CodeFor(native);
  foreign_cpu.features += ",+kiln-fake-feature";
  AotTargetDef foreign_llvm = CodeFor(native);
  foreign_llvm.llvm_version = "3.4.0";
  AotTargetDef foreign_abi = CodeFor(native);
  foreign_abi.abi = "kiln-kernel-abi-0|O3|mvec";
  AotTargetDef foreign_triple = CodeFor(native);
  foreign_triple.triple = "aarch64-unknown-linux-gnu";
  Loaded l = Load(ProgramBytes({foreign_cpu, foreign_llvm, foreign_abi, foreign_triple}));
  BOOST_REQUIRE_MESSAGE(l.exe.ok(), l.exe.status().ToString());
  RunAll(*l.exe);
  BOOST_TEST(l.engine->stats().aot_linked == 0);
  BOOST_TEST(l.engine->stats().compilations == 4);
  BOOST_TEST(l.provider->stats().aot_kernels == 0);

  // Beside a foreign target, the one that runs here is chosen wherever it stands.
  Loaded both = Load(ProgramBytes({foreign_cpu, CodeFor(native)}));
  BOOST_REQUIRE_MESSAGE(both.exe.ok(), both.exe.status().ToString());
  RunAll(*both.exe);
  BOOST_TEST(both.engine->stats().aot_linked == 4);
  BOOST_TEST(both.engine->stats().compilations == 0);
}

BOOST_AUTO_TEST_CASE(matching_requires_every_enabled_feature) {
  TargetInfo host;
  host.triple = "x86_64-pc-linux-gnu";
  host.features = "+avx2,+fma,-avx512f,+sse2";
  std::string abi = AotAbi(CodegenOptions()), llvm = LlvmVersion();  // the spec holds views
  CodeTargetSpec t{0, "aot_targets[0]", host.triple, "x86-64-v3", "+avx2,+fma", llvm, abi};
  BOOST_TEST(CodeTargetMismatch(t, host, abi) == "");
  t.features = "+avx2,+avx512f,-sse4a";  // "-" features are not requirements
  BOOST_TEST(CodeTargetMismatch(t, host, abi) == "the host CPU lacks avx512f");
  t.features = "+x87,+avx2";  // in every x86-64 CPU, though host detection does not report it
  BOOST_TEST(CodeTargetMismatch(t, host, abi) == "");
  // x86-64-v3 runs on an AVX2 host; x86-64-v4 only where AVX-512 is.
  std::vector<std::string> v3 = X86CpuFeatures("x86-64-v3"), v4 = X86CpuFeatures("x86-64-v4");
  BOOST_TEST((std::find(v3.begin(), v3.end(), "avx2") != v3.end()));
  BOOST_TEST((std::find(v3.begin(), v3.end(), "avx512f") == v3.end()));
  BOOST_TEST((std::find(v4.begin(), v4.end(), "avx512f") != v4.end()));
  BOOST_TEST(X86CpuFeatures("no-such-cpu").empty());
  auto v4_target = ResolveCodeTarget("x86-64-v4");
  BOOST_REQUIRE(v4_target.ok());
  BOOST_TEST(v4_target->has_avx512f);
  BOOST_TEST(ResolveCodeTarget("pentium-9000").status().code() == StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(wider_host_vectors_are_told_apart_from_a_code_target) {
  TargetInfo avx2, avx512, sse;
  avx2.has_avx2 = true;
  avx512.has_avx2 = avx512.has_avx512f = true;
  const std::string v3 = "+avx,+avx2,+fma,+sse4.2", v4 = v3 + ",+avx512f,+avx512vl";
  BOOST_TEST(!HostHasWiderVectors(v3, avx2));  // kiln compile's default on this host kind
  BOOST_TEST(HostHasWiderVectors(v3, avx512));
  BOOST_TEST(!HostHasWiderVectors(v4, avx512));
  BOOST_TEST(HostHasWiderVectors("+sse2,+sse4.2", avx2));
  BOOST_TEST(HostHasWiderVectors("+sse2,-avx2", avx2));  // "-" enables nothing
  BOOST_TEST(!HostHasWiderVectors("+sse2", sse));
  // "+avx512fp16" is not "+avx512f", nor "+avx2" a prefix match of anything.
  BOOST_TEST(HostHasWiderVectors("+avx2,+avx512fp16", avx512));
}

// `kiln compile` embeds x86-64-v3 code unless told otherwise: on x86-64, and only there.
BOOST_AUTO_TEST_CASE(the_default_code_target_is_x86_64_v3_on_x86_64) {
  std::vector<std::string> targets = DefaultCodeTargets();
#if defined(__x86_64__)
  BOOST_TEST(targets == std::vector<std::string>{"x86-64-v3"}, boost::test_tools::per_element());
  BOOST_TEST(ResolveCodeTarget(targets[0]).ok());
#else
  BOOST_TEST(targets.empty());
#endif
}

// Code for narrower vectors than the host's is a first tier: chosen only where no target as
// wide as the host's runs, and not at all with tiering off (NarrowerCode::kIgnore), whose
// reason says so. On an AVX2 host x86-64-v3 code is final and baseline x86-64 (SSE2) code a
// first tier; on an AVX-512 host x86-64-v3 code is a first tier and x86-64-v4 code final.
BOOST_AUTO_TEST_CASE(code_for_narrower_vectors_than_the_host_is_a_first_tier) {
  std::string abi = AotAbi(CodegenOptions()), llvm = LlvmVersion();  // the spec holds views
  auto spec = [&](const TargetInfo& t, int i, const std::string& where) {
    return CodeTargetSpec{i, where, t.triple, t.cpu, t.features, llvm, abi};
  };
  auto resolve = [](const char* name) {
    auto t = ResolveCodeTarget(name);
    if (!t.ok()) throw std::runtime_error(t.status().ToString());
    return *t;
  };
  const TargetInfo base = resolve("x86-64"), v3 = resolve("x86-64-v3"), v4 = resolve("x86-64-v4");
  TargetInfo avx2_host = v3, avx512_host = v4;
  avx2_host.cpu = avx512_host.cpu = "some-host";  // no target is this exact host
  const NarrowerCode off = NarrowerCode::kIgnore;
  std::string why;
  BOOST_TEST(ChooseCodeTarget({spec(base, 0, "t0"), spec(v3, 1, "t1")}, avx2_host, abi) == 1);
  BOOST_TEST(ChooseCodeTarget({spec(v3, 0, "t0"), spec(base, 1, "t1")}, avx2_host, abi) == 0);
  BOOST_TEST(ChooseCodeTarget({spec(base, 0, "t0")}, avx2_host, abi) == 0);
  BOOST_TEST(ChooseCodeTarget({spec(base, 0, "t0")}, avx2_host, abi, &why, off) == -1);
  BOOST_TEST(why == "t0: its vectors are narrower than this host's (AVX2) and tiering is off: "
                    "the JIT compiles for the host");
  BOOST_TEST(ChooseCodeTarget({spec(v3, 0, "t0")}, avx512_host, abi) == 0);
  BOOST_TEST(ChooseCodeTarget({spec(v3, 0, "t0")}, avx512_host, abi, &why, off) == -1);
  BOOST_TEST(why.find("t0: its vectors are narrower than this host's (AVX-512)") == 0, why);
  BOOST_TEST(ChooseCodeTarget({spec(v3, 0, "t0"), spec(v4, 1, "t1")}, avx512_host, abi) == 1);
  BOOST_TEST(ChooseCodeTarget({spec(v3, 0, "t0"), spec(v4, 1, "t1")}, avx512_host, abi, nullptr,
                              off) == 1);
  // Final code wins even over narrower code enabling more features (a Zen 3 CPU name has
  // more than x86-64-v4, say).
  std::string extras;
  for (int i = 0; i < 40; ++i) extras += ",+kiln-extra" + std::to_string(i);
  TargetInfo rich_v3 = v3, rich_host = avx512_host;
  rich_v3.features += extras;
  rich_host.features = v4.features + extras;
  BOOST_TEST(ChooseCodeTarget({spec(rich_v3, 0, "t0"), spec(v4, 1, "t1")}, rich_host, abi) == 1);
}

// A load on this host of code for narrower vectors (x86-64-v2: SSE4.2, no AVX, no FMA, on a
// host with AVX2 or AVX-512): linked at load as the first tier, so the first run compiles
// nothing; kernels called again tier up to the JIT's optimized code for the host in the
// background, which then computes exactly what the JIT alone does. Before the tier-up the
// answers are RunAll's (add exact; exp within libmvec's accuracy; the row sums within f32
// rounding, whose order the vector width changes).
BOOST_AUTO_TEST_CASE(narrower_code_runs_first_then_tiers_up_to_the_hosts_code) {
  const TargetInfo native = Native();
  if (!native.has_avx2 && !native.has_avx512f) {
    BOOST_TEST_MESSAGE("x86-64-v2 code is not narrower than this host's: nothing to check");
    return;
  }
  Loaded jit = Load(ProgramBytes({}));
  BOOST_REQUIRE_MESSAGE(jit.exe.ok(), jit.exe.status().ToString());
  RunAll(*jit.exe);
  std::vector<float> want = RunAll(*jit.exe);  // twice: the first tier's calls, then O3's
  jit.provider->WaitForBackgroundCompiles();
  want = RunAll(*jit.exe);

  const TargetInfo v2 = [] {
    auto t = ResolveCodeTarget("x86-64-v2");
    if (!t.ok()) throw std::runtime_error(t.status().ToString());
    return *t;
  }();
  BOOST_TEST(!v2.has_avx2);
  Loaded aot = Load(ProgramBytes({CodeFor(v2)}));
  BOOST_REQUIRE_MESSAGE(aot.exe.ok(), aot.exe.status().ToString());
  BOOST_TEST(aot.engine->stats().aot_linked == 4);  // at load
  std::vector<float> first = RunAll(*aot.exe);
  BOOST_TEST(aot.engine->stats().compilations == 0);  // nothing on the request path
  DispatchStats s = aot.provider->stats();
  BOOST_TEST(s.aot_kernels == 4);
  BOOST_TEST(s.aot_first_tier == 4);
  BOOST_TEST(s.compilations == 0);
  BOOST_TEST(s.tier_ups == 0);
  for (size_t i = 0; i < 5 * 37; ++i) BOOST_TEST(first[i] == want[i]);  // add: exact

  RunAll(*aot.exe);  // each kernel's second call starts its tier-up
  aot.provider->WaitForBackgroundCompiles();
  s = aot.provider->stats();
  BOOST_TEST(s.tier_ups == 4);
  BOOST_TEST(s.compilations == 4);
  EngineStats e = aot.engine->stats();
  BOOST_TEST(e.compilations == 4);  // the host's O3 code, not the first tier's
  BOOST_TEST(e.fast_compilations == 0);
  std::vector<float> after = RunAll(*aot.exe);
  BOOST_TEST(after == want, boost::test_tools::per_element());  // the JIT's code, bit for bit
}

// With tiering off, code for narrower vectors is not linked: the JIT compiles the host's
// optimized code on first use, as without the code (the code that runs is final from the
// first call). Code as wide as the host's still links.
BOOST_AUTO_TEST_CASE(with_tiering_off_narrower_code_is_ignored) {
  const TargetInfo native = Native();
  const TargetInfo base = [] {
    auto t = ResolveCodeTarget("x86-64");
    if (!t.ok()) throw std::runtime_error(t.status().ToString());
    return *t;
  }();
  JitProviderOptions pinned;
  pinned.dispatch.tiering = false;
  Loaded l = Load(ProgramBytes({CodeFor(base)}), pinned);
  BOOST_REQUIRE_MESSAGE(l.exe.ok(), l.exe.status().ToString());
  RunAll(*l.exe);
  const bool wider = native.has_avx2 || native.has_avx512f;
  BOOST_TEST(l.engine->stats().aot_linked == (wider ? 0 : 4));
  BOOST_TEST(l.engine->stats().compilations == (wider ? 4 : 0));
  BOOST_TEST(l.engine->stats().fast_compilations == 0);
  BOOST_TEST(l.provider->stats().aot_first_tier == 0);

  Loaded n = Load(ProgramBytes({CodeFor(native)}), pinned);
  BOOST_REQUIRE_MESSAGE(n.exe.ok(), n.exe.status().ToString());
  RunAll(*n.exe);
  BOOST_TEST(n.engine->stats().aot_linked == 4);
  BOOST_TEST(n.engine->stats().compilations == 0);
}

// A load that must fail: InvalidFormat with every `parts` in the message.
void ExpectRejected(const std::vector<uint8_t>& bytes, const std::vector<std::string>& parts) {
  Loaded l = Load(bytes);
  BOOST_REQUIRE(!l.exe.ok());
  BOOST_TEST(l.exe.status().code() == StatusCode::kInvalidFormat, l.exe.status().ToString());
  for (const std::string& part : parts) {
    BOOST_TEST(l.exe.status().message().find(part) != std::string::npos,
               "'" << part << "' not in: " << l.exe.status().ToString());
  }
}

BOOST_AUTO_TEST_CASE(corrupt_objects_are_errors_naming_the_section_and_target) {
  const AotTargetDef good = CodeFor(Native());
  const std::string target = "aot_targets[0] (" + good.triple + ", cpu " + good.cpu + ")";
  // Bytes changed after the checksum was taken: the verifier, whatever the target.
  {
    AotTargetDef t = good;
    t.kernels[1].override_checksum = true;
    t.kernels[1].checksum = Fnv1a64(t.kernels[1].object.data(), t.kernels[1].object.size());
    t.kernels[1].object[t.kernels[1].object.size() / 2] ^= 0x5a;
    ExpectRejected(ProgramBytes({t}), {target + ".kernels[1]", "checksum mismatch"});
  }
  // Consistent checksums over bad objects: the object reader, before ORC sees them.
  struct Case {
    const char* what;
    std::function<void(AotObjectDef&)> corrupt;
    std::string message;
  };
  std::vector<Case> cases = {
      {"truncated", [](AotObjectDef& o) { o.object.resize(o.object.size() / 3); }, ""},
      {"header only", [](AotObjectDef& o) { o.object.resize(64); }, ""},
      {"not ELF", [](AotObjectDef& o) { o.object.assign(o.object.size(), 0x41); },
       "not an object file"},
      {"section table past the end",
       [](AotObjectDef& o) { for (int i = 0x28; i < 0x30; ++i) o.object[i] = 0x7f; }, ""},
      {"no entry point", [](AotObjectDef& o) { o.symbol = "kiln_aot_missing"; },
       "does not define its entry point 'kiln_aot_missing'"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      AotTargetDef t = good;
      c.corrupt(t.shape_functions[0]);
      std::vector<std::string> parts = {"shape_functions[0] 'rows_shape'",
                                        target + ".shape_functions[0]"};
      if (!c.message.empty()) parts.push_back(c.message);
      ExpectRejected(ProgramBytes({t}), parts);
    }
  }
  // Tables of the wrong length, missing fields.
  AotTargetDef short_table = good;
  short_table.kernels.pop_back();
  ExpectRejected(ProgramBytes({short_table}), {target + ".kernels: 2 objects for 3 entries"});
  AotTargetDef no_symbol = good;
  no_symbol.kernels[2].symbol.clear();
  ExpectRejected(ProgramBytes({no_symbol}), {target + ".kernels[2]: object without a symbol"});
  AotTargetDef no_triple = good;
  no_triple.triple.clear();
  ExpectRejected(ProgramBytes({no_triple}), {"aot_targets[0] (, cpu " + good.cpu + "): missing triple"});
}

BOOST_AUTO_TEST_CASE(an_object_that_does_not_link_falls_back_to_the_jit) {
  // Kernel 1 carries kernel 0's object: it parses and defines its symbol, but that symbol is
  // already defined (by kernel 0, linked first), so linking fails and the kernel is compiled.
  AotTargetDef t = CodeFor(Native());
  t.kernels[1] = t.kernels[0];
  Loaded l;
  std::string notice = testing::CaptureStderr(
      [&] { l = Load(ProgramBytes({t})); },
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
          "/aot_notice.txt");
  BOOST_REQUIRE_MESSAGE(l.exe.ok(), l.exe.status().ToString());
  BOOST_TEST(notice.find("kiln: notice: code compiled ahead of time for kernel symbol " +
                         t.kernels[0].symbol + " does not link") != std::string::npos,
             notice);
  RunAll(*l.exe);  // checks exp's answers: the JIT's code, not add's
  EngineStats s = l.engine->stats();
  BOOST_TEST(s.aot_link_failures == 1);
  BOOST_TEST(s.aot_linked == 3);
  BOOST_TEST(s.compilations == 1);
  BOOST_TEST(l.provider->stats().aot_kernels == 3);
  BOOST_TEST(l.provider->stats().compilations == 1);
}

BOOST_AUTO_TEST_CASE(files_without_code_load_and_run_as_before) {
  for (uint16_t minor : {uint16_t{1}, kFormatMinor}) {
    BOOST_TEST_CONTEXT("format 1." << minor) {
      ExecutableBuilder b;
      BuildProgram(b);
      b.SetVersion(kFormatMajor, minor);
      auto bytes = b.Finish();
      BOOST_REQUIRE(bytes.ok());
      Loaded l = Load(*bytes);
      BOOST_REQUIRE_MESSAGE(l.exe.ok(), l.exe.status().ToString());
      BOOST_TEST((*l.exe)->root().aot_targets() == nullptr);
      RunAll(*l.exe);
      BOOST_TEST(l.engine->stats().compilations == 4);
    }
  }
}

}  // namespace
}  // namespace kiln::jit
