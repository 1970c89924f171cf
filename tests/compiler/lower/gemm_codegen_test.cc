// The code the JIT's GEMM compiles to (compiler/lower/nn_gemm.cc through jit/codegen_vector.cc):
// its register tile must be whole-vector FMAs of the host's width. Once, one store change let
// LLVM's SLP vectorizer split the accumulators across vector boundaries for some shapes (N 8000,
// not 8192): the K loop became xmm pieces and blends, 2.3x slower, and every numeric test still
// passed. These tests look at the optimized IR and the assembly of the lowered kernels, not at
// time: every FMA a full-width vector one, at least a full tile of them, no scalar or narrower FMA.
#define BOOST_TEST_MODULE gemm_codegen_test
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <boost/test/unit_test.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/lower/gemm.h"
#include "jit/codegen.h"
#include "jit/kernel_ir_serialize.h"
#include "serializer/executable_generated.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

jit::TargetInfo Host() {
  StatusOr<jit::TargetInfo> target = jit::DetectHostTarget();
  BOOST_REQUIRE_MESSAGE(target.ok(), target.status().ToString());
  return *target;
}

// f32 (or f64) lanes of the widest vectors the JIT uses on `target`.
int64_t Lanes(const jit::TargetInfo& target, bool f64) {
  int64_t bytes = target.has_avx512f ? 64 : target.has_avx2 ? 32 : 16;
  return bytes / (f64 ? 8 : 4);
}

// The kernels of `model_text` compiled for the JIT alone, as kernel IR.
std::vector<jit::Kernel> Kernels(const std::string& model_text) {
  std::string bytes = testing::ModelBytes(model_text);
  CompileOptions o;
  o.external = "none";
  StatusOr<std::vector<uint8_t>> kiln = CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  const fb::Executable* root = fb::GetSizePrefixedExecutable(kiln->data());
  BOOST_REQUIRE(root->kernels() != nullptr);
  std::vector<jit::Kernel> out;
  for (const fb::Kernel* k : *root->kernels()) {
    BOOST_REQUIRE(k->payload_format() && k->payload_format()->str() == jit::kPayloadFormat);
    StatusOr<jit::Kernel> kernel =
        jit::DeserializeKernel(k->payload()->data(), k->payload()->size());
    BOOST_REQUIRE_MESSAGE(kernel.ok(), kernel.status().ToString());
    out.push_back(*kernel);
  }
  return out;
}

// What the O3 pipeline and the code generator make of one kernel.
struct Code {
  std::string ir;    // optimized LLVM IR
  std::string asm_;  // x86 assembly (AT&T syntax)
};

Code Compile(const jit::Kernel& kernel, const jit::TargetInfo& target) {
  StatusOr<jit::KernelModule> generated = jit::GenerateModule(kernel, "k", target);
  BOOST_REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
  Code code{jit::ModuleText(*generated), ""};
  StatusOr<std::unique_ptr<llvm::TargetMachine>> machine = jit::CreateTargetMachine(target);
  BOOST_REQUIRE_MESSAGE(machine.ok(), machine.status().ToString());
  llvm::raw_string_ostream os(code.asm_);
  llvm::buffer_ostream out(os);
  llvm::legacy::PassManager passes;
  BOOST_REQUIRE(
      !(*machine)->addPassesToEmitFile(passes, out, nullptr, llvm::CodeGenFileType::AssemblyFile));
  passes.run(*generated->module);
  return code;
}

size_t Count(const std::string& text, const std::regex& pattern) {
  return static_cast<size_t>(std::distance(std::sregex_iterator(text.begin(), text.end(), pattern),
                                           std::sregex_iterator()));
}

// The model's one GEMM kernel (the only kernel with FMAs) compiles to at least `tile_vectors`
// FMAs on vectors of the host's full width, and to no FMA on anything else.
void CheckGemmCode(const std::string& model_text, bool f64, int64_t tile_vectors) {
  const jit::TargetInfo target = Host();
  const int64_t lanes = Lanes(target, f64);
  const std::string type = f64 ? "f64" : "f32";
  const std::regex any_fma(R"(call [^\n]*@llvm\.fmuladd\.)");
  const std::regex full_fma(R"(call <)" + std::to_string(lanes) +
                            R"( x [a-z]+> @llvm\.fmuladd\.v)" + std::to_string(lanes) + type +
                            R"(\()");
  int gemms = 0;
  for (const jit::Kernel& kernel : Kernels(model_text)) {
    Code code = Compile(kernel, target);
    size_t fmas = Count(code.ir, any_fma);
    if (fmas == 0) continue;
    ++gemms;
    size_t full = Count(code.ir, full_fma);
    BOOST_TEST_MESSAGE(kernel.name << ": " << full << " of " << fmas << " IR FMAs full width");
    BOOST_TEST_CONTEXT(kernel.name) {
      BOOST_TEST(full == fmas);  // no scalar FMA, no narrower or split vector
      BOOST_TEST(full >= static_cast<size_t>(tile_vectors));
      if (target.triple.rfind("x86_64", 0) == 0) {
        const std::string reg = lanes * (f64 ? 8 : 4) == 64   ? "zmm"
                                : lanes * (f64 ? 8 : 4) == 32 ? "ymm"
                                                              : "xmm";
        const std::string suffix = f64 ? "pd" : "ps";
        size_t wide =
            Count(code.asm_, std::regex(R"(\tvfmadd\d+)" + suffix + R"(\t[^\n]*%)" + reg));
        size_t all = Count(code.asm_, std::regex(R"(\tv?fn?m(add|sub)\d*[ps][sd]\t)"));
        BOOST_TEST_MESSAGE(kernel.name << ": " << wide << " of " << all << " machine FMAs on "
                                       << reg);
        BOOST_TEST(wide == all);  // machine FMAs: all of full width too
        BOOST_TEST(wide >= static_cast<size_t>(tile_vectors));
      }
    }
  }
  BOOST_TEST(gemms == 1);
}

// A full register tile, in vectors: 6 rows by the panel width (GemmPanelCols f32 columns; the
// f64 tile has as many columns of half the lanes).
int64_t TileVectors(bool f64) {
  const int64_t lanes = Lanes(Host(), f64);
  const int64_t cols = f64 ? compiler::GemmPanelCols() / 2 : compiler::GemmPanelCols();
  return 6 * cols / lanes;
}

// The shape the SLP grouping broke: M 64, N 8000 (not a multiple of 64), K 256, B packed per call.
BOOST_AUTO_TEST_CASE(matmul_64x8000x256) {
  CheckGemmCode(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[64, 256] x, float[256, 8000] w) => (float[64, 8000] y) {
      y = MatMul(x, w)
    })",
                false, TileVectors(false));
}

// Constant weights (kiln::PackedMatMul, packed at compile time) with a bias fused into the
// epilogue and a rank-3 A, as a transformer's projections run.
BOOST_AUTO_TEST_CASE(packed_weights_with_bias) {
  auto w = testing::RandomTensor(DType::kF32, {16, 40}, -1, 1, 1);
  auto b = testing::RandomTensor(DType::kF32, {40}, -1, 1, 2);
  auto literal = [](const std::string& decl, const TensorData& t) {
    std::string s = decl + " = {";
    std::vector<double> v = t.ToDoubles();
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "}";
  };
  CheckGemmCode(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 49, 16] x) => (float[1, 49, 40] y)
      <)" + literal("float[16, 40] w", *w) +
                    ", " + literal("float[40] b", *b) + R"(> {
      p = MatMul(x, w)
      y = Add(p, b)
    })",
                false, TileVectors(false));
}

// Gemm with a transposed B (packed along K) and a batched MatMul (attention's Q K^T).
BOOST_AUTO_TEST_CASE(gemm_trans_b_and_batched_matmul) {
  CheckGemmCode(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[50, 64] a, float[96, 64] b) => (float[50, 96] y) {
      y = Gemm <transB = 1> (a, b)
    })",
                false, TileVectors(false));
  CheckGemmCode(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[8, 50, 64] q, float[8, 64, 50] k) => (float[8, 50, 50] y) {
      y = MatMul(q, k)
    })",
                false, TileVectors(false));
}

// The distinct registers the FMAs of the model's one GEMM kernel accumulate into (the last
// operand of an AT&T vfmadd): the independent FMA chains its tiles keep in flight.
size_t FmaAccumulators(const std::string& model_text) {
  const jit::TargetInfo target = Host();
  std::set<std::string> regs;
  const std::regex fma(R"(\tvfmadd\d+p[sd]\t[^\n]*(%[xyz]mm\d+)\n)");
  for (const jit::Kernel& kernel : Kernels(model_text)) {
    Code code = Compile(kernel, target);
    for (auto it = std::sregex_iterator(code.asm_.begin(), code.asm_.end(), fma);
         it != std::sregex_iterator(); ++it) {
      regs.insert((*it)[1]);
    }
  }
  return regs.size();
}

// M = 1 (a recurrent step, a decoder's token) and M = 2 (the rows M = 50 leaves after 6-row
// tiles): a 1-row tile of two vectors has two FMA chains, each waiting 4 cycles for its last
// result, a quarter of what the FMA pipes take. The tile splits K over independent sets of
// accumulators to keep 8 chains in flight (on every x86 vector width: 2 x 4 sets with AVX2,
// 4 x 2 with AVX-512).
BOOST_AUTO_TEST_CASE(small_m_keeps_eight_fma_chains) {
  BOOST_REQUIRE_MESSAGE(Host().triple.rfind("x86_64", 0) == 0, "reads x86 assembly");
  for (int m : {1, 2}) {
    std::string ms = std::to_string(m);
    size_t chains = FmaAccumulators(R"(
      <ir_version: 8, opset_import: ["" : 17]>
      g (float[)" + ms + R"(, 64] x, float[64, 48] w) => (float[)" + ms + R"(, 48] y) {
        y = MatMul(x, w)
      })");
    BOOST_TEST_MESSAGE("M " << m << ": FMAs accumulate into " << chains << " registers");
    BOOST_TEST(chains >= 8u, "M " << m << ": " << chains << " FMA accumulators");
  }
}

// The widths (f32 columns) of the register tiles of the model's kernels: the accumulators each
// tile allocates, as the kernel IR prints them ("alloc acc: f32[rows * sets, width]").
std::set<int64_t> TileWidths(const std::string& model_text) {
  std::set<int64_t> widths;
  const std::regex acc(R"(alloc acc[^:\n]*: f32\[\d+, (\d+)\])");
  for (const jit::Kernel& kernel : Kernels(model_text)) {
    const std::string text = jit::ToText(kernel);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), acc);
         it != std::sregex_iterator(); ++it) {
      widths.insert(std::stoll((*it)[1]));
    }
  }
  return widths;
}

// N = 49 (swin_t's window attention; vit_b_32's 50 alike) is three full panels and one column
// more. That last panel runs tiles one vector wide, not a full panel's FMAs over 15 zero
// columns; N = 48 has no such panel, and with N = 47 (a panel less one column) the last panel
// needs the full width. The narrow tiles' FMAs are full vectors too.
BOOST_AUTO_TEST_CASE(last_panel_only_as_wide_as_its_columns) {
  const int64_t lanes = Lanes(Host(), false), cols = compiler::GemmPanelCols();
  BOOST_REQUIRE(cols >= 2 * lanes);
  auto model = [](int64_t n) {
    std::string ns = std::to_string(n);
    return R"(
      <ir_version: 8, opset_import: ["" : 17]>
      g (float[4, 49, K] q, float[4, K, )" + ns + R"(] k) => (float[4, 49, )" + ns + R"(] y) {
        y = MatMul(q, k)
      })";
  };
  BOOST_TEST(TileWidths(model(3 * cols)) == (std::set<int64_t>{cols}));
  BOOST_TEST(TileWidths(model(3 * cols + 1)) == (std::set<int64_t>{lanes, cols}));
  BOOST_TEST(TileWidths(model(3 * cols + lanes)) == (std::set<int64_t>{lanes, cols}));
  BOOST_TEST(TileWidths(model(3 * cols - 1)) == (std::set<int64_t>{cols}));
  CheckGemmCode(model(3 * cols + 1), false, TileVectors(false));
}

// f64 accumulates in f64: half the lanes per vector, the same number of vectors per tile.
BOOST_AUTO_TEST_CASE(matmul_f64) {
  CheckGemmCode(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (double[12, 64] x, double[64, 40] w) => (double[12, 40] y) {
      y = MatMul(x, w)
    })",
                true, TileVectors(true));
}

}  // namespace
}  // namespace kiln::compiler
