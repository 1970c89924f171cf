// Kernel payloads from files are untrusted: every byte of a few serialized kernels is mutated,
// and each mutant the decoder accepts must generate code (validation, LLVM verifier, O3) or fail
// with an error naming the kernel — never crash, and never report an internal error.
#define BOOST_TEST_MODULE payload_mutation_test
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "jit/codegen.h"
#include "jit/compute.h"
#include "jit/engine.h"
#include "jit/kernel_ir.h"
#include "jit/kernel_ir_serialize.h"

namespace kiln::jit {
namespace {

// Small kernels covering parallel and vectorized loops, reductions, lets, ifs, locals, casts
// and checked indices.
std::vector<std::vector<uint8_t>> Payloads() {
  std::vector<std::vector<uint8_t>> out;
  Buffer in = Buffer::Param("in", DType::kF32, 2);
  Buffer idx = Buffer::Param("idx", DType::kI64, 1);
  Buffer o = Buffer::Param("out", DType::kF32, 2);
  Buffer tmp = Buffer::Local("tmp", DType::kF32, {4});
  Var i("i"), j("j"), k("k"), t("t", DType::kF32);
  Expr row = CheckIndex(Load(idx, {i}), DimOf(in, 0), "node 'g' (Gather)");
  Stmt pick = If(Gt(t, FloatImm(0)), Store(o, {i, j}, Exp(t)),
                 Store(o, {i, j}, Cast(DType::kF32, Cast(DType::kI32, t))));
  Stmt row_sum = Store(tmp, {IntImm(0)}, Sum({{k, DimOf(in, 1)}}, Load(in, {row, k})));
  Stmt scaled = Let(t, Load(in, {row, j}) * Load(tmp, {IntImm(0)}), pick);
  Stmt body = For(i, DimOf(o, 0), ForKind::kParallel,
                  Allocate(tmp, Seq({row_sum, For(j, DimOf(o, 1), ForKind::kVectorized, scaled)})));
  out.push_back(SerializeKernel(Kernel{"mixed", {in, idx, o}, {}, body}));
  out.push_back(SerializeKernel(ElementwiseBinary(
      "add", {DType::kF32, 2, {BroadcastDim::kSame, BroadcastDim::kOne}}, {DType::kF32, 1, {}},
      DType::kF32, [](Expr a, Expr b) { return a + b; })));
  return out;
}

BOOST_AUTO_TEST_CASE(mutated_payloads_fail_cleanly_or_compile) {
  StatusOr<TargetInfo> target = DetectHostTarget();
  BOOST_REQUIRE(target.ok());
  std::map<StatusCode, int> outcomes;
  int accepted = 0;
  for (const std::vector<uint8_t>& good : Payloads()) {
    for (size_t pos = 8; pos < good.size(); ++pos) {  // past the magic and version
      for (uint8_t flip : {0x01, 0x02, 0x80, 0xff}) {
        std::vector<uint8_t> bytes = good;
        bytes[pos] ^= flip;
        StatusOr<Kernel> k = DeserializeKernel(bytes.data(), bytes.size());
        if (!k.ok()) continue;
        ++accepted;
        StatusOr<KernelModule> m = GenerateModule(*k, "k", *target);
        if (m.ok()) continue;
        ++outcomes[m.status().code()];
        BOOST_TEST(m.status().code() != StatusCode::kInternal,
                   "byte " << pos << " ^ " << int(flip) << ": " << m.status().ToString());
        BOOST_TEST(m.status().message().find("kernel '") != std::string::npos,
                   m.status().ToString());
      }
    }
  }
  BOOST_TEST_MESSAGE(accepted << " mutants decoded");
  BOOST_TEST(accepted > 0);
}

// Found by kernel_compile_fuzzer: a shape function's var "bytes" with one byte turned into a
// NUL decoded and generated code, and the optimized compile then crashed inside LLVM
// (orc::cloneToNewContext, on a compile thread): LLVM value names must not hold a NUL. Such a
// name, of a var, a buffer or the kernel, is rejected when the payload is decoded.
BOOST_AUTO_TEST_CASE(names_with_a_nul_byte_are_rejected_before_llvm_sees_them) {
  const std::string nul("by\0tes", 6);
  auto kernel = [](const std::string& kernel_name, const std::string& buffer_name,
                   const std::string& var_name) {
    Buffer in = Buffer::Param("in", DType::kF32, 1);
    Buffer out = Buffer::Param(buffer_name, DType::kI64, 1);
    Var n(var_name);
    Stmt body = Let(n, DimOf(in, 0), Store(out, {IntImm(0)}, n * IntImm(4)));
    return Kernel{kernel_name, {in, out}, {}, body};
  };
  const Kernel bad[] = {kernel("k", "out", nul), kernel("k", nul, "n"), kernel(nul, "out", "n")};
  StatusOr<std::unique_ptr<Engine>> engine = Engine::Create();
  BOOST_REQUIRE(engine.ok());
  for (const Kernel& k : bad) {
    std::vector<uint8_t> bytes = SerializeKernel(k);
    StatusOr<KernelPayload> p = DeserializeKernelPayload(bytes.data(), bytes.size());
    BOOST_REQUIRE(!p.ok());
    const std::string& m = p.status().message();
    BOOST_TEST(m.find("name has a NUL byte") != std::string::npos, m);
    BOOST_TEST(m.find('\0') == std::string::npos, m);  // shown as \0, not cut short
    // Kernels built in memory are checked too, before any code is generated.
    for (Tier tier : {Tier::kFast, Tier::kOptimized}) {
      StatusOr<KernelRef> ref = (*engine)->Acquire(k, tier);
      BOOST_REQUIRE(!ref.ok());
      BOOST_TEST(ref.status().code() == StatusCode::kInvalidArgument, ref.status().ToString());
    }
  }
  // The same kernel with clean names compiles at both tiers.
  for (Tier tier : {Tier::kFast, Tier::kOptimized}) {
    StatusOr<KernelRef> ref = (*engine)->Acquire(kernel("k", "out", "bytes"), tier);
    BOOST_TEST(ref.ok(), ref.status().ToString());
  }
}

}  // namespace
}  // namespace kiln::jit
