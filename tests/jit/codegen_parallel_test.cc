// Tests for jit/codegen_parallel: the grain a parallel loop passes to kiln_parallel_for, i.e.
// whether a kernel forks threads or stays serial, for loop extents bound by Lets and by the
// parallel index inside the body. The kernel runs in a private LLJIT whose kiln_parallel_for
// records its arguments and runs the loop serially, so the decision is read, not timed.
#define BOOST_TEST_MODULE codegen_parallel_test
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <memory>
#include <vector>

#include "jit/codegen.h"
#include "jit/runtime.h"
#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::TestBuffer;

struct Fork {
  int64_t begin, end, grain;
  // kiln_parallel_for splits a range into chunks of at least one grain and runs it in the
  // calling thread when fewer than two fit.
  bool parallel() const { return (end - begin) / grain >= 2; }
};
std::vector<Fork> forks;

void RecordParallelFor(int64_t begin, int64_t end, int64_t grain, KilnParallelBody body,
                       void* ctx) {
  forks.push_back({begin, end, grain});
  body(begin, end, ctx);
}

// A kernel compiled (O3, as the engine does) into its own LLJIT with the recording
// kiln_parallel_for; keeps the JIT (and so the code) alive.
class RecordingJit {
 public:
  explicit RecordingJit(const Kernel& kernel) {
    StatusOr<TargetInfo> target = DetectHostTarget();
    BOOST_REQUIRE_MESSAGE(target.ok(), target.status().ToString());
    CodegenOptions options;
    options.use_libmvec = false;  // the kernels below call no math
    StatusOr<KernelModule> generated = GenerateModule(kernel, "kernel", *target, options);
    BOOST_REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
    llvm::orc::JITTargetMachineBuilder machine{llvm::Triple(target->triple)};
    machine.setCPU(target->cpu);
    machine.setFeatures(target->features);
    auto created = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(machine).create();
    BOOST_REQUIRE_MESSAGE(!!created, llvm::toString(created.takeError()));
    jit_ = std::move(*created);
    llvm::orc::SymbolMap symbols;
    symbols[jit_->mangleAndIntern(kParallelForSymbol)] = {
        llvm::orc::ExecutorAddr::fromPtr(&RecordParallelFor),
        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
    BOOST_REQUIRE(!jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(symbols)));
    llvm::orc::ThreadSafeModule module(std::move(generated->module), std::move(generated->context));
    BOOST_REQUIRE(!jit_->addIRModule(std::move(module)));
    auto address = jit_->lookup("kernel");
    BOOST_REQUIRE_MESSAGE(!!address, llvm::toString(address.takeError()));
    fn_ = address->toPtr<KernelFn>();
  }
  KernelFn fn() const { return fn_; }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  KernelFn fn_ = nullptr;
};

// y[i, j] = sum_k a[i, k] * w[k, j], shaped like the GEMM lowering: one parallel task per tile of
// 16 columns, K in chunks of 64, and the tile's width and the chunk's length bound by Lets that
// depend on the task index (ncols = min(16, n - j0), klen = min(64, k - k0)).
Kernel TiledProduct() {
  Buffer a = Buffer::Param("a", DType::kF32, 2), w = Buffer::Param("w", DType::kF32, 2),
         y = Buffer::Param("y", DType::kF32, 2);
  Expr m = DimOf(a, 0), k = DimOf(a, 1), n = DimOf(w, 1);
  Var t("t"), j0("j0"), ncols("ncols"), c("c"), k0("k0"), klen("klen"), i("i"), jj("jj"), kk("kk");
  Expr partial = Sum({{kk, klen}}, Load(a, {i, k0 + kk}) * Load(w, {k0 + kk, j0 + jj}));
  Expr before = Select(Eq(c, IntImm(0)), FloatImm(0), Load(y, {i, j0 + jj}));
  Stmt chunk =
      Let(k0, c * 64,
          Let(klen, Min(IntImm(64), k - k0),
              For(i, m, ForKind::kSerial,
                  For(jj, ncols, ForKind::kSerial, Store(y, {i, j0 + jj}, before + partial)))));
  Stmt task = Let(j0, t * 16,
                  Let(ncols, Min(IntImm(16), n - j0),
                      For(c, FloorDiv(k + 63, IntImm(64)), ForKind::kSerial, chunk)));
  Expr tasks = FloorDiv(n + 15, IntImm(16));
  return {"tiled_product", {a, w, y}, {}, For(t, tasks, ForKind::kParallel, task)};
}

// Runs TiledProduct on m x k @ k x n, checks the result and returns the one fork it made.
Fork RunTiledProduct(const RecordingJit& jit, int64_t m, int64_t k, int64_t n) {
  TestBuffer a(DType::kF32, {m, k}), w(DType::kF32, {k, n}), y(DType::kF32, {m, n});
  for (int64_t e = 0; e < m * k; ++e) a.SetDouble(e, (e % 7) - 3);
  for (int64_t e = 0; e < k * n; ++e) w.SetDouble(e, (e % 5) - 2);
  forks.clear();
  Call(jit.fn(), {&a, &w, &y});
  for (int64_t i = 0; i < m; i += std::max<int64_t>(1, m / 5)) {
    for (int64_t j = 0; j < n; j += 7) {
      double want = 0;
      for (int64_t kk = 0; kk < k; ++kk) want += a.At(i * k + kk) * w.At(kk * n + j);
      // Small integers: every partial sum is exact in f32.
      BOOST_TEST(y.At(i * n + j) == want, "y[" << i << ", " << j << "]");
    }
  }
  BOOST_REQUIRE_EQUAL(forks.size(), 1u);
  return forks[0];
}

// The RNN step's h @ R (1 x 96 @ 96 x 288): 18 tasks of ~3,000 operations in all, far below
// what hides a fork, so serial; a 256 x 512 @ 512 x 1024 product forks.
BOOST_AUTO_TEST_CASE(let_bound_extents_decide_serial_small_parallel_large) {
  RecordingJit jit(TiledProduct());
  Fork small = RunTiledProduct(jit, 1, 96, 288);
  BOOST_TEST(small.end - small.begin == 18);
  BOOST_TEST(!small.parallel(), "grain " << small.grain);
  Fork wide = RunTiledProduct(jit, 1, 96, 8192);  // 512 tasks, ~1M operations
  BOOST_TEST(wide.parallel(), "grain " << wide.grain);
  Fork large = RunTiledProduct(jit, 256, 512, 1024);
  BOOST_TEST(large.parallel(), "grain " << large.grain);
  BOOST_TEST(large.grain == 1);  // each task is ~2M operations
}

// The GEMM lowering's task order: with n < m a thread's run of tasks sweeps the column tiles of
// one group of 32 rows, else the row groups of one column tile, chosen by a bool Let that is
// known before the fork. Its row offset and row count come from Selects on that flag: bounded
// by the arm the flag picks, the one-row RNN step stays serial (by the union of both arms its
// tasks looked like 32 rows each, and it forked at every step).
Kernel OrderedTiledProduct() {
  Buffer a = Buffer::Param("a", DType::kF32, 2), w = Buffer::Param("w", DType::kF32, 2),
         y = Buffer::Param("y", DType::kF32, 2);
  Expr m = DimOf(a, 0), k = DimOf(a, 1), n = DimOf(w, 1);
  Var t("t"), pf("pf", DType::kBool), slow("slow"), fast("fast"), r0("r0"), j0("j0");
  Var rows("rows"), ncols("ncols"), i("i"), jj("jj"), kk("kk");
  Expr col_tiles = FloorDiv(n + 15, IntImm(16)), row_groups = FloorDiv(m + 31, IntImm(32));
  Expr fast_count = Select(pf, col_tiles, row_groups);
  Stmt tile = For(i, rows, ForKind::kSerial,
                  For(jj, ncols, ForKind::kSerial,
                      Store(y, {r0 + i, j0 + jj},
                            Sum({{kk, k}}, Load(a, {r0 + i, kk}) * Load(w, {kk, j0 + jj})))));
  Stmt task = Let(rows, Min(IntImm(32), m - r0), Let(ncols, Min(IntImm(16), n - j0), tile));
  task = Let(r0, Select(pf, slow, fast) * 32, Let(j0, Select(pf, fast, slow) * 16, task));
  task = Let(pf, Lt(n, m),
             Let(slow, FloorDiv(t, fast_count), Let(fast, FloorMod(t, fast_count), task)));
  return {"ordered_tiled_product", {a, w, y}, {}, For(t, col_tiles * row_groups,
                                                      ForKind::kParallel, task)};
}

BOOST_AUTO_TEST_CASE(a_condition_known_at_the_fork_picks_its_arm_of_a_select) {
  RecordingJit jit(OrderedTiledProduct());
  Fork step = RunTiledProduct(jit, 1, 96, 288);  // 18 tasks of one row
  BOOST_TEST(step.end - step.begin == 18);
  BOOST_TEST(!step.parallel(), "grain " << step.grain);
  Fork large = RunTiledProduct(jit, 256, 512, 1024);  // n > m: rows fastest
  BOOST_TEST(large.parallel(), "grain " << large.grain);
  Fork tall = RunTiledProduct(jit, 1024, 512, 64);  // n < m: columns fastest
  BOOST_TEST(tall.parallel(), "grain " << tall.grain);
}

// out[t] = sum of a[0..t]: the inner extent t + 1 is bounded by the parallel index's range.
BOOST_AUTO_TEST_CASE(extent_bound_by_the_parallel_index) {
  Buffer a = Buffer::Param("a", DType::kI64, 1), out = Buffer::Param("out", DType::kI64, 1);
  Var t("t"), j("j");
  Kernel k{
      "prefix",
      {a, out},
      {},
      For(t, DimOf(out, 0), ForKind::kParallel, Store(out, {t}, Sum({{j, t + 1}}, Load(a, {j}))))};
  RecordingJit jit(k);
  for (int64_t n : {64, 4096}) {
    TestBuffer in(DType::kI64, {n}), res(DType::kI64, {n});
    for (int64_t e = 0; e < n; ++e) in.SetInt(e, e % 3);
    forks.clear();
    Call(jit.fn(), {&in, &res});
    int64_t want = 0;
    for (int64_t e = 0; e < n; ++e) {
      want += e % 3;
      if (res.IntAt(e) != want) BOOST_FAIL("out[" << e << "] = " << res.IntAt(e));
    }
    BOOST_REQUIRE_EQUAL(forks.size(), 1u);
    // 64 rows of at most 64 additions: serial; 4096 rows of up to 4096: parallel.
    BOOST_TEST(forks[0].parallel() == (n == 4096), "n " << n << " grain " << forks[0].grain);
  }
}

// out[r, j] = x[r, j] - mean_r - var_r, LayerNorm's shape: per row two Lets of a sum over the
// row, then the loop that stores. The Lets' sums count as work: 2048 rows of 128 are ~790k
// operations and fork; counted as the store loop alone (~260k) they stayed serial, and so did
// every LayerNorm and Softmax over a [1, L, C] tensor.
BOOST_AUTO_TEST_CASE(reductions_bound_by_lets_count_as_work) {
  Buffer x = Buffer::Param("x", DType::kF32, 2), out = Buffer::Param("out", DType::kF32, 2);
  Expr n = DimOf(x, 1);
  Var r("r"), j("j"), k1("k1"), k2("k2"), mean("mean", DType::kF32), var("var", DType::kF32);
  Stmt row = Let(mean, Sum({{k1, n}}, Load(x, {r, k1})),
                 Let(var, Sum({{k2, n}}, Load(x, {r, k2}) * Load(x, {r, k2})),
                     For(j, n, ForKind::kSerial, Store(out, {r, j}, Load(x, {r, j}) - mean - var))));
  RecordingJit jit(Kernel{"rows", {x, out}, {}, For(r, DimOf(x, 0), ForKind::kParallel, row)});
  for (int64_t rows : {64, 2048}) {
    TestBuffer in(DType::kF32, {rows, 128}), res(DType::kF32, {rows, 128});
    for (int64_t e = 0; e < rows * 128; ++e) in.SetDouble(e, (e % 3) - 1);
    forks.clear();
    Call(jit.fn(), {&in, &res});
    for (int64_t q = 0; q < rows; q += 7) {
      double sum = 0, squares = 0;
      for (int64_t c = 0; c < 128; ++c) {
        sum += in.At(q * 128 + c);
        squares += in.At(q * 128 + c) * in.At(q * 128 + c);
      }
      BOOST_TEST(res.At(q * 128 + 5) == in.At(q * 128 + 5) - sum - squares, "row " << q);
    }
    BOOST_REQUIRE_EQUAL(forks.size(), 1u);
    BOOST_TEST(forks[0].parallel() == (rows == 2048), "rows " << rows << " grain " << forks[0].grain);
  }
}

}  // namespace
}  // namespace kiln::jit
