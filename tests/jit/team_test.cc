// Team loops (ForKind::kTeam) compiled and run: each thread owns a range of a rotating buffer
// whose every step reads its neighbours' previous step, so only a barrier per step gives the
// right answer; the team's size as the kernel sees it; validation of where team_size and
// team_barrier may appear; and a serialization round trip.
#define BOOST_TEST_MODULE team_test
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "jit/kernel_ir.h"
#include "jit/kernel_ir_serialize.h"
#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::TestBuffer;

// y[s + 1, j] = y[s, (j + 1) % m] + 1 for s < steps, every thread the units
// [tid * m / n, (tid + 1) * m / n); sizes[tid] = n.
Kernel RotateKernel() {
  Buffer y = Buffer::Param("y", DType::kF32, 2);
  Buffer sizes = Buffer::Param("sizes", DType::kI64, 1);
  Var tid("tid"), n("n"), lo("lo"), hi("hi"), s("s"), j("j"), go("go", DType::kBool);
  Expr steps = DimOf(y, 0) - IntImm(1), m = DimOf(y, 1);
  Stmt step = For(j, lo, Expr(hi) - Expr(lo), ForKind::kSerial,
                  Store(y, {Expr(s) + IntImm(1), j},
                        Load(y, {s, FloorMod(Expr(j) + IntImm(1), m)}) + FloatImm(1)));
  Stmt body = Let(
      n, TeamSize(),
      Let(lo, FloorDiv(Expr(tid) * m, Expr(n)),
          Let(hi, FloorDiv((Expr(tid) + IntImm(1)) * m, Expr(n)),
              Seq({Store(sizes, {tid}, Expr(n)),
                   For(s, steps, ForKind::kSerial, Let(go, TeamBarrier(), If(go, step)))}))));
  return {"rotate", {y, sizes}, {}, For(tid, DimOf(sizes, 0), ForKind::kTeam, body)};
}

BOOST_AUTO_TEST_CASE(a_team_loop_splits_each_step_and_synchronizes_between_steps) {
  Kernel k = RotateKernel();
  KernelFn fn = CompileOrFail(k);
  BOOST_REQUIRE(fn);
  const int64_t steps = 300, m = 37;
  TestBuffer y(DType::kF32, {steps + 1, m});
  TestBuffer sizes(DType::kI64, {4});
  for (int64_t j = 0; j < m; ++j) y.Set(j, static_cast<double>(j));
  for (int64_t t = 0; t < 4; ++t) sizes.SetI(t, -1);
  Call(fn, {&y, &sizes});
  const int64_t n = sizes.IntAt(0);
  BOOST_TEST(n == 2);  // OMP_NUM_THREADS=2 (BUILD), at most the extent 4
  for (int64_t t = 0; t < 4; ++t) BOOST_TEST(sizes.IntAt(t) == (t < n ? n : -1));
  int wrong = 0;
  for (int64_t s = 0; s <= steps; ++s) {
    for (int64_t j = 0; j < m; ++j) {
      double want = static_cast<double>((j + s) % m + s);
      if (y.At(s * m + j) != want) ++wrong;
    }
  }
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(team_size_and_barrier_belong_inside_a_team_loop) {
  Var t("t"), i("i"), go("go", DType::kBool);
  Kernel k = RotateKernel();
  Buffer out = k.buffers[1];
  auto store = [&](Expr v) { return Store(out, {IntImm(0)}, v); };
  Kernel outside = {"k", {out}, {}, store(TeamSize())};
  Status status = ValidateKernel(outside);
  BOOST_TEST(status.message().find("team_size outside a team loop's body") != std::string::npos,
             status.message());
  // A parallel loop inside a team runs its iterations on other threads.
  Kernel nested = {"k", {out}, {},
                   For(t, IntImm(2), ForKind::kTeam,
                       For(i, IntImm(4), ForKind::kParallel,
                           Let(go, TeamBarrier(), If(go, store(IntImm(1))))))};
  status = ValidateKernel(nested);
  BOOST_TEST(status.message().find("team_barrier outside a team loop's body") != std::string::npos,
             status.message());
  BOOST_TEST(ValidateKernel(k).ok());
}

BOOST_AUTO_TEST_CASE(team_loops_print_and_round_trip) {
  Kernel k = RotateKernel();
  std::string text = ToText(k);
  BOOST_TEST(text.find("team for tid") != std::string::npos, text);
  BOOST_TEST(text.find("team_barrier()") != std::string::npos, text);
  BOOST_TEST(text.find("team_size()") != std::string::npos, text);
  std::vector<uint8_t> bytes = SerializeKernel(k, {});
  auto back = DeserializeKernelPayload(bytes.data(), bytes.size());
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(StructurallyEqual(k, back->kernel));
  BOOST_TEST(ToText(back->kernel) == text);
}

}  // namespace
}  // namespace kiln::jit
