// Tests for jit/kernel_ir: builder typing, validation errors, the printer and structural hashing.
#define BOOST_TEST_MODULE kernel_ir_test
#include "jit/kernel_ir.h"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <functional>
#include <ostream>

namespace kiln::jit {
namespace {

namespace data = boost::unit_test::data;

const Buffer kF32Buf = Buffer::Param("a", DType::kF32, 2);
const Var kI("i"), kJ("j");

Expr I32(int64_t v) { return IntImm(v, DType::kI32); }
Expr F16(double v) { return FloatImm(v, DType::kF16); }

struct TypeCase {
  const char* name;
  std::function<Expr()> build;
  DType expected;
};

std::ostream& operator<<(std::ostream& os, const TypeCase& c) { return os << c.name; }

const std::vector<TypeCase> kTypeCases = {
    {"add_i32", [] { return I32(1) + I32(2); }, DType::kI32},
    {"add_f16_widens", [] { return F16(1) + F16(2); }, DType::kF32},
    {"add_mixed_invalid", [] { return I32(1) + FloatImm(2.0); }, DType::kInvalid},
    {"lt_is_bool", [] { return Lt(FloatImm(1), FloatImm(2)); }, DType::kBool},
    {"and_bool", [] { return And(IntImm(1, DType::kBool), IntImm(0, DType::kBool)); },
     DType::kBool},
    {"and_int_bitwise", [] { return And(I32(1), I32(0)); }, DType::kI32},
    {"or_float_invalid", [] { return Or(FloatImm(1), FloatImm(0)); }, DType::kInvalid},
    {"exp_int_invalid", [] { return Exp(I32(1)); }, DType::kInvalid},
    {"exp_f16_widens", [] { return Exp(F16(1)); }, DType::kF32},
    {"pow_int_invalid", [] { return Pow(I32(2), I32(3)); }, DType::kInvalid},
    {"select_keeps_f16", [] { return Select(IntImm(1, DType::kBool), F16(1), F16(2)); },
     DType::kF16},
    {"select_int_cond_invalid", [] { return Select(I32(1), F16(1), F16(2)); }, DType::kInvalid},
    {"cast_to_f16", [] { return Cast(DType::kF16, I32(3)); }, DType::kF16},
    {"cast_same_is_identity", [] { return Cast(DType::kI32, I32(3)); }, DType::kI32},
    {"isnan_int_is_bool", [] { return IsNan(I32(3)); }, DType::kBool},
    {"neg_bool_invalid", [] { return Neg(IntImm(1, DType::kBool)); }, DType::kInvalid},
    {"load_f32",
     [] {
       return Load(kF32Buf, {kI, kJ});
     },
     DType::kF32},
    {"load_rank_mismatch", [] { return Load(kF32Buf, {kI}); }, DType::kInvalid},
    {"load_i32_index_invalid",
     [] {
       return Load(kF32Buf, {kI, I32(0)});
     },
     DType::kInvalid},
    {"dim_is_i64", [] { return DimOf(kF32Buf, 1); }, DType::kI64},
    {"dim_out_of_range", [] { return DimOf(kF32Buf, 2); }, DType::kInvalid},
    {"literal_follows_float",
     [] {
       return Load(kF32Buf, {kI, kJ}) * 2;
     },
     DType::kF32},
    {"literal_follows_int", [] { return kI * 2 + 1; }, DType::kI64},
    {"argmax_is_i64",
     [] {
       return Reduce(ReduceOp::kArgMax, {{kJ, IntImm(4)}}, Load(kF32Buf, {kI, kJ}));
     },
     DType::kI64},
    {"sum_f16_widens",
     [] {
       return Sum({{kJ, IntImm(4)}}, Cast(DType::kF16, Load(kF32Buf, {kI, kJ})));
     },
     DType::kF32},
    {"sum_bool_invalid",
     [] {
       return Sum({{kJ, IntImm(4)}}, IntImm(1, DType::kBool));
     },
     DType::kInvalid},
};

BOOST_DATA_TEST_CASE(builders_infer_dtypes, data::make(kTypeCases), c) {
  BOOST_TEST((c.build().dtype() == c.expected), c.name);
}

BOOST_AUTO_TEST_CASE(literals_take_the_other_operands_dtype) {
  Expr e = F16(1) + 0.5;  // f16 computes in f32, so the literal is f32
  BOOST_TEST((e->args[1]->op == ExprOp::kFloatImm));
  BOOST_TEST((e->args[1].dtype() == DType::kF32));
  Expr k = I32(7) - 1;
  BOOST_TEST((k->args[1]->op == ExprOp::kIntImm));
  BOOST_TEST((k->args[1].dtype() == DType::kI32));
}

// ---- Validation: each rejected kernel names the kernel, the path and the problem. ----

struct InvalidCase {
  const char* name;
  std::function<Kernel()> build;
  const char* message;  // a fragment the error must contain
};

std::ostream& operator<<(std::ostream& os, const InvalidCase& c) { return os << c.name; }

Buffer Out() {
  static const Buffer out = Buffer::Param("out", DType::kI32, 1);
  return out;
}

Kernel WithBody(Stmt body) { return {"k", {Out()}, {}, std::move(body)}; }

Stmt Loop(Stmt body) { return For(kI, DimOf(Out(), 0), ForKind::kSerial, std::move(body)); }

const std::vector<InvalidCase> kInvalidCases = {
    {"store_dtype", [] { return WithBody(Loop(Store(Out(), {kI}, FloatImm(1)))); },
     "serial for i/store out: value dtype f32 != buffer dtype i32"},
    {"unbound_var", [] { return WithBody(Loop(Store(Out(), {kJ}, I32(1)))); },
     "var j is not in scope"},
    {"foreign_buffer",
     [] {
       Buffer other = Buffer::Param("other", DType::kI32, 1);
       return WithBody(Loop(Store(Out(), {kI}, Load(other, {kI}))));
     },
     "buffer other is not in scope"},
    {"var_bound_twice", [] { return WithBody(Loop(Loop(Store(Out(), {kI}, I32(1))))); },
     "var i is bound twice"},
    {"local_too_big",
     [] {
       Buffer big = Buffer::Local("big", DType::kF64, {1024, 1024});
       return WithBody(Allocate(big, Store(Out(), {IntImm(0)}, I32(1))));
     },
     "allocate big: needs more than"},
    {"allocate_param", [] { return WithBody(Allocate(Out(), Store(Out(), {IntImm(0)}, I32(1)))); },
     "allocate of a param buffer"},
    {"ill_typed_value", [] { return WithBody(Loop(Store(Out(), {kI}, I32(1) + IntImm(2)))); },
     "add: operand dtypes differ: i32 vs i64"},
    {"float_extent",
     [] { return WithBody(For(kI, FloatImm(3), ForKind::kSerial, Store(Out(), {kI}, I32(1)))); },
     "loop extent is not i64"},
    {"int_condition", [] { return WithBody(If(I32(1), Store(Out(), {IntImm(0)}, I32(1)))); },
     "if: condition is not bool"},
    {"dim_not_i64",
     [] {
       Kernel k = WithBody(Store(Out(), {IntImm(0)}, I32(1)));
       k.dims = {Var("n", DType::kI32)};
       return k;
     },
     "dims[0] (n) is not i64"},
    {"no_body", [] { return WithBody(Stmt()); }, "kernel has no body"},
    {"index_count",
     [] {
       return WithBody(Loop(Store(Out(), {kI, kI}, I32(1))));
     },
     "2 indices for rank 1"},
    {"local_buffer_listed_as_param",
     [] {
       Kernel k = WithBody(Store(Out(), {IntImm(0)}, I32(1)));
       k.buffers.push_back(Buffer::Local("t", DType::kI32, {4}));
       return k;
     },
     "buffers[1] (t) is not a param"},
    {"reduce_axis_escapes",
     [] {
       Expr s = Sum({{kJ, IntImm(3)}}, Cast(DType::kI32, kJ));
       return WithBody(Loop(Store(Out(), {kI}, s + Cast(DType::kI32, kJ))));
     },
     "var j is not in scope"},
};

BOOST_AUTO_TEST_CASE(unbounded_nesting_and_unknown_ops_are_rejected_not_crashed) {
  Expr deep = I32(0);
  for (int i = 0; i < 5 * kMaxDepth; ++i) deep = deep + I32(1);
  Kernel k = WithBody(Store(Out(), {IntImm(0)}, deep));
  Status status = ValidateKernel(k);
  BOOST_TEST((status.code() == StatusCode::kInvalidArgument));
  BOOST_TEST(status.message().find("nested deeper than") != std::string::npos, status.message());
  BOOST_TEST(HashKernel(k) == HashKernel(k));              // bounded walk, deterministic
  BOOST_TEST(ToText(k).find("...") != std::string::npos);  // printer truncates
  ExprNode bogus;
  bogus.op = static_cast<ExprOp>(200);
  bogus.args = {I32(1)};
  std::string why;
  BOOST_TEST((InferType(bogus, &why) == DType::kInvalid));
  BOOST_TEST(why.find("unknown operation 200") != std::string::npos, why);
}

BOOST_DATA_TEST_CASE(invalid_kernels_are_rejected, data::make(kInvalidCases), c) {
  Status status = ValidateKernel(c.build());
  BOOST_TEST((status.code() == StatusCode::kInvalidArgument), c.name);
  BOOST_TEST(status.message().find("kernel 'k'") != std::string::npos, status.message());
  BOOST_TEST(status.message().find(c.message) != std::string::npos, status.message());
}

BOOST_AUTO_TEST_CASE(valid_kernel_passes_and_sibling_loops_may_reuse_a_var) {
  Kernel k = WithBody(Seq({Loop(Store(Out(), {kI}, I32(1))), Loop(Store(Out(), {kI}, I32(2)))}));
  Status status = ValidateKernel(k);
  BOOST_TEST(status.ok(), status.ToString());
}

// ---- Printer. ----

Kernel SoftmaxLikeKernel(const std::string& name, const std::string& var_name) {
  Buffer in = Buffer::Param("in", DType::kF16, 2, /*contiguous=*/false);
  Buffer out = Buffer::Param("out", DType::kF32, 2);
  Buffer tmp = Buffer::Local("tmp", DType::kF32, {8});
  Var n("n"), i(var_name), j("j"), k("k"), m("m", DType::kF32);
  Expr x = Load(in, {i, j});
  Stmt body = Let(m, ReduceMax({{k, n}}, Load(in, {i, k})),
                  For(j, n, ForKind::kVectorized,
                      If(Gt(x, FloatImm(0.5)), Store(out, {i, j}, Exp(x - m)),
                         Store(out, {i, j}, Select(IsNan(x), FloatImm(0), Cast(DType::kF32, x))))));
  return {name,
          {in, out},
          {n},
          Allocate(tmp, For(i, IntImm(1), DimOf(out, 0) - 1, ForKind::kParallel, body))};
}

BOOST_AUTO_TEST_CASE(printer_output_is_stable_and_readable) {
  const std::string expected =
      "kernel softmaxish(in: f16[rank 2, strided], out: f32[rank 2]) dims(n) {\n"
      "  alloc tmp: f32[8] {\n"
      "    parallel for i in [1, 1 + (out.shape[0] - 1)) {\n"
      "      let m: f32 = max(k < n: f32(in[i, k]))\n"
      "      vectorized for j in [0, n) {\n"
      "        if (f32(in[i, j]) > 0.5) {\n"
      "          out[i, j] = exp((f32(in[i, j]) - m))\n"
      "        } else {\n"
      "          out[i, j] = select(isnan(f32(in[i, j])), 0.0, f32(in[i, j]))\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  BOOST_TEST(ToText(SoftmaxLikeKernel("softmaxish", "i")) == expected);
}

BOOST_AUTO_TEST_CASE(printer_disambiguates_vars_with_the_same_name) {
  Var a("x"), b("x");
  BOOST_TEST(ToText(a + b) == "(x + x_1)");
  BOOST_TEST(ToText(IntImm(3, DType::kU8)) == "3:u8");
  BOOST_TEST(ToText(FloatImm(2, DType::kF64)) == "2.0:f64");
  BOOST_TEST(ToText(Not(IntImm(1, DType::kBool))) == "!true");
}

// ---- Structural hashing. ----

BOOST_AUTO_TEST_CASE(hash_ignores_names_and_object_identity) {
  Kernel a = SoftmaxLikeKernel("one", "i");
  Kernel b = SoftmaxLikeKernel("two", "row");  // fresh Vars and Buffers, other names
  BOOST_TEST(HashKernel(a) == HashKernel(b));
  BOOST_TEST(StructurallyEqual(a, b));
  BOOST_TEST(HashKernel(a) == HashKernel(a));
  BOOST_TEST(HashKernel(a) == HashCanonicalForm(CanonicalForm(a)));
}

BOOST_AUTO_TEST_CASE(sibling_loops_hash_the_same_with_one_or_two_vars) {
  Var i2("i");
  Kernel one = WithBody(Seq({Loop(Store(Out(), {kI}, I32(1))), Loop(Store(Out(), {kI}, I32(2)))}));
  Kernel two =
      WithBody(Seq({Loop(Store(Out(), {kI}, I32(1))),
                    For(i2, DimOf(Out(), 0), ForKind::kSerial, Store(Out(), {i2}, I32(2)))}));
  BOOST_TEST(HashKernel(one) == HashKernel(two));
  BOOST_TEST(StructurallyEqual(one, two));
}

struct Variant {
  const char* name;
  std::function<Kernel()> build;
};

std::ostream& operator<<(std::ostream& os, const Variant& v) { return os << v.name; }

Kernel Base(DType t, ForKind kind, int64_t c, bool swap) {
  Buffer in = Buffer::Param("in", t, 1), out = Buffer::Param("out", t, 1);
  Var i("i");
  Expr a = Load(in, {i}), b = Cast(t, IntImm(c));
  return {"k",
          {in, out},
          {},
          For(i, DimOf(out, 0), kind, Store(out, {i}, swap ? Sub(b, a) : Sub(a, b)))};
}

const std::vector<Variant> kVariants = {
    {"dtype", [] { return Base(DType::kF64, ForKind::kSerial, 1, false); }},
    {"loop_kind", [] { return Base(DType::kF32, ForKind::kParallel, 1, false); }},
    {"constant", [] { return Base(DType::kF32, ForKind::kSerial, 2, false); }},
    {"operand_order", [] { return Base(DType::kF32, ForKind::kSerial, 1, true); }},
};

BOOST_DATA_TEST_CASE(hash_sees_every_structural_difference, data::make(kVariants), v) {
  Kernel base = Base(DType::kF32, ForKind::kSerial, 1, false);
  Kernel other = v.build();
  BOOST_TEST(HashKernel(base) != HashKernel(other), v.name);
  BOOST_TEST(!StructurallyEqual(base, other), v.name);
}

}  // namespace
}  // namespace kiln::jit
