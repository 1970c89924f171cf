// ExprOp::kCheckIndex compiled and run: in-range indices wrap, an out-of-range one is reported to
// the caller's KernelErrorScope with its site (also from a parallel loop's team threads), loads
// stay in bounds, and kernels that differ only in site names share code but not messages. Its
// three-operand form (CheckInRange) does not wrap and reports the element's position.
#define BOOST_TEST_MODULE check_index_test
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "jit/kernel_ir.h"
#include "jit/kernel_ir_serialize.h"
#include "jit/runtime.h"
#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::TestBuffer;

// out[i] = table[check_index(idx[i], len(table), site)].
Kernel GatherKernel(const std::string& site, ForKind kind) {
  Buffer table = Buffer::Param("table", DType::kF32, 1);
  Buffer idx = Buffer::Param("idx", DType::kI64, 1);
  Buffer out = Buffer::Param("out", DType::kF32, 1);
  Var i("i");
  Expr at = CheckIndex(Load(idx, {i}), DimOf(table, 0), site);
  Stmt body = For(i, DimOf(out, 0), kind, Store(out, {i}, Load(table, {at})));
  return Kernel{"gather", {table, idx, out}, {}, body};
}

struct Run {
  TestBuffer table{DType::kF32, {5}};
  TestBuffer idx, out;
  explicit Run(const std::vector<int64_t>& indices)
      : idx(DType::kI64, {static_cast<int64_t>(indices.size())}),
        out(DType::kF32, {static_cast<int64_t>(indices.size())}) {
    for (int64_t t = 0; t < 5; ++t) table.Set(t, 10.0 * t);
    for (size_t k = 0; k < indices.size(); ++k) idx.SetI(static_cast<int64_t>(k), indices[k]);
  }
  void Go(KernelFn fn) { Call(fn, {&table, &idx, &out}); }
};

BOOST_AUTO_TEST_CASE(in_range_indices_wrap_and_report_nothing) {
  for (ForKind kind : {ForKind::kSerial, ForKind::kParallel, ForKind::kVectorized}) {
    KernelFn fn = CompileOrFail(GatherKernel("node 'g' (Gather)", kind));
    BOOST_REQUIRE(fn);
    Run r({0, 4, -1, -5, 2});
    KernelErrorScope errors;
    r.Go(fn);
    BOOST_TEST(!errors.failed());
    BOOST_TEST(errors.ToStatus({}).ok());
    std::vector<double> want = {0, 40, 40, 0, 20};
    for (int64_t k = 0; k < 5; ++k) BOOST_TEST(r.out.At(k) == want[k]);
  }
}

BOOST_AUTO_TEST_CASE(out_of_range_indices_are_reported_once_with_their_site) {
  for (ForKind kind : {ForKind::kSerial, ForKind::kParallel, ForKind::kVectorized}) {
    KernelFn fn = CompileOrFail(GatherKernel("node 'g' (Gather)", kind));
    BOOST_REQUIRE(fn);
    for (int64_t bad : {int64_t{5}, int64_t{-6}, int64_t{100000}, int64_t{1} << 62}) {
      // A long loop, so that a parallel one splits it: the bad index sits in the last chunk,
      // which a team thread runs; the kernel must report it to this thread's scope.
      std::vector<int64_t> indices(20000, 1);
      indices[19990] = bad;
      Run r(indices);
      KernelErrorScope errors;
      r.Go(fn);
      BOOST_REQUIRE(errors.failed());
      BOOST_TEST(errors.error().index == bad);
      BOOST_TEST(errors.error().bound == 5);
      BOOST_TEST(errors.error().site == 0);
      Status s = errors.ToStatus({"node 'g' (Gather)"});
      BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
      BOOST_TEST(s.message() == "node 'g' (Gather): indices element out of data bounds, idx=" +
                                    std::to_string(bad) +
                                    " must be within the inclusive range [-5,4]");
      // The load stayed in the table (clamped), whatever the caller does with the output.
      double got = r.out.At(19990);
      BOOST_TEST((got == 0 || got == 40));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_first_report_wins_and_scopes_nest) {
  KernelFn fn = CompileOrFail(GatherKernel("s", ForKind::kSerial));
  BOOST_REQUIRE(fn);
  Run r({7, 1, -9});
  KernelErrorScope outer;
  {
    KernelErrorScope inner;
    r.Go(fn);
    BOOST_REQUIRE(inner.failed());
    BOOST_TEST(inner.error().index == 7);  // serial: the first in order
  }
  BOOST_TEST(!outer.failed());
  Run ok({1, 2});
  ok.Go(fn);
  BOOST_TEST(!outer.failed());
}

BOOST_AUTO_TEST_CASE(without_a_scope_a_report_is_dropped_and_loads_stay_in_bounds) {
  KernelFn fn = CompileOrFail(GatherKernel("s", ForKind::kSerial));
  BOOST_REQUIRE(fn);
  BOOST_REQUIRE(KernelErrorScope::Current() == nullptr);
  Run r({1000, -1000});
  r.Go(fn);
  BOOST_TEST(r.out.At(0) == 40);
  BOOST_TEST(r.out.At(1) == 0);
}

BOOST_AUTO_TEST_CASE(site_names_share_code_but_not_messages) {
  Kernel a = GatherKernel("node 'a' (Gather)", ForKind::kSerial);
  Kernel b = GatherKernel("node 'b' (Gather)", ForKind::kSerial);
  BOOST_TEST(HashKernel(a) == HashKernel(b));
  BOOST_TEST(StructurallyEqual(a, b));
  BOOST_TEST(IndexCheckSites(b) == std::vector<std::string>{"node 'b' (Gather)"});
  KernelFn fa = CompileOrFail(a), fb = CompileOrFail(b);
  BOOST_TEST(fa == fb);
  Run r({9});
  KernelErrorScope errors;
  r.Go(fb);
  BOOST_REQUIRE(errors.failed());
  BOOST_TEST(errors.ToStatus(IndexCheckSites(b)).message().find("node 'b' (Gather): ") == 0);
  // An unknown site number still gives a message.
  BOOST_TEST(errors.ToStatus({}).message().find("an indexing op: ") == 0);
}

BOOST_AUTO_TEST_CASE(sites_are_numbered_by_first_appearance) {
  Buffer x = Buffer::Param("x", DType::kF32, 2);
  Buffer i = Buffer::Param("i", DType::kI64, 1);
  Buffer out = Buffer::Param("out", DType::kF32, 1);
  Var k("k");
  Expr row = CheckIndex(Load(i, {k}), DimOf(x, 0), "second");
  Expr col = CheckIndex(Load(i, {k}), DimOf(x, 1), "first");
  Expr again = CheckIndex(Load(i, {k}), DimOf(x, 1), "second");
  Expr sum = Load(x, {row, col}) + Load(x, {again, col});
  Kernel kernel{"two", {x, i, out}, {},
                For(k, DimOf(out, 0), ForKind::kSerial, Store(out, {k}, sum))};
  BOOST_REQUIRE(ValidateKernel(kernel).ok());
  BOOST_TEST(IndexCheckSites(kernel) == (std::vector<std::string>{"second", "first"}));
  // Different names in a different pattern are a different kernel.
  Expr col2 = CheckIndex(Load(i, {k}), DimOf(x, 1), "second");
  Expr sum2 = Load(x, {row, col2}) + Load(x, {again, col});
  Kernel other{"two", {x, i, out}, {},
               For(k, DimOf(out, 0), ForKind::kSerial, Store(out, {k}, sum2))};
  BOOST_TEST(HashKernel(kernel) != HashKernel(other));
}

BOOST_AUTO_TEST_CASE(check_index_is_typed_printed_and_serialized) {
  BOOST_TEST(CheckIndex(IntImm(1, DType::kI32), IntImm(4), "s").dtype() == DType::kInvalid);
  Kernel k = GatherKernel("node '/tok/Gather' (Gather)", ForKind::kParallel);
  std::string text = ToText(k);
  BOOST_TEST(text.find("check_index(") != std::string::npos, text);
  BOOST_TEST(text.find("\"node '/tok/Gather' (Gather)\"") != std::string::npos, text);
  std::vector<uint8_t> bytes = SerializeKernel(k);
  StatusOr<Kernel> back = DeserializeKernel(bytes.data(), bytes.size());
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(ToText(*back) == text);
  BOOST_TEST(HashKernel(*back) == HashKernel(k));
  BOOST_TEST(IndexCheckSites(*back) == IndexCheckSites(k));
}

// out[i] = table[check_in_range(idx[i], len(table), at i, site)].
Kernel InRangeKernel(ForKind kind) {
  Buffer table = Buffer::Param("table", DType::kF32, 1);
  Buffer idx = Buffer::Param("idx", DType::kI64, 1);
  Buffer out = Buffer::Param("out", DType::kF32, 1);
  Var i("i");
  Expr at = CheckInRange(Load(idx, {i}), DimOf(table, 0), i, "node 'r': lens");
  Stmt body = For(i, DimOf(out, 0), kind, Store(out, {i}, Load(table, {at})));
  return Kernel{"in_range", {table, idx, out}, {}, body};
}

BOOST_AUTO_TEST_CASE(check_in_range_rejects_negatives_and_reports_the_position) {
  for (ForKind kind : {ForKind::kSerial, ForKind::kParallel}) {
    KernelFn fn = CompileOrFail(InRangeKernel(kind));
    BOOST_REQUIRE(fn);
    Run ok({0, 4, 2});
    KernelErrorScope clean;
    ok.Go(fn);
    BOOST_TEST(!clean.failed());
    BOOST_TEST(ok.out.At(1) == 40);
    for (int64_t bad : {int64_t{-1}, int64_t{5}, int64_t{1} << 62}) {
      Run r({1, 2, bad, 3});
      KernelErrorScope errors;
      r.Go(fn);
      BOOST_REQUIRE(errors.failed());
      BOOST_TEST(errors.error().index == bad);
      BOOST_TEST(errors.error().position == 2);
      BOOST_TEST(errors.ToStatus({"node 'r': lens"}).message() ==
                 "node 'r': lens[2] = " + std::to_string(bad) +
                     " is outside the inclusive range [0,4]");
      double got = r.out.At(2);  // clamped: the load stayed in the table
      BOOST_TEST((got == 0 || got == 40));
    }
  }
  // Typed (i64 operands), printed with its position, serialized (kernel IR 1.3).
  BOOST_TEST(CheckInRange(IntImm(1), IntImm(4), IntImm(0, DType::kI32), "s").dtype() ==
             DType::kInvalid);
  Kernel k = InRangeKernel(ForKind::kSerial);
  std::string text = ToText(k);
  BOOST_TEST(text.find(", at ") != std::string::npos, text);
  std::vector<uint8_t> bytes = SerializeKernel(k);
  StatusOr<Kernel> back = DeserializeKernel(bytes.data(), bytes.size());
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(ToText(*back) == text);
  BOOST_TEST(HashKernel(*back) == HashKernel(k));
  BOOST_TEST(HashKernel(k) != HashKernel(GatherKernel("node 'r': lens", ForKind::kSerial)));
}

}  // namespace
}  // namespace kiln::jit
