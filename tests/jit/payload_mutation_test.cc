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

}  // namespace
}  // namespace kiln::jit
