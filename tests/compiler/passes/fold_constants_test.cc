// Constant folding through the Evaluator, during shape inference.
#define BOOST_TEST_MODULE fold_constants_test
#include <boost/test/unit_test.hpp>

#include "compiler/passes/fold_constants.h"
#include "jit/compute.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

Status LowerAdd(LowerContext& ctx) {
  ctx.SetCompute(0, [&](const std::vector<jit::Expr>& i) {
    return jit::Add(jit::BroadcastLoad(ctx.in(0), i), jit::BroadcastLoad(ctx.in(1), i));
  });
  return Status::Ok();
}

Status LowerView(LowerContext& ctx) {
  ctx.SetView(0);
  return Status::Ok();
}

const LoweringTable& Table() {
  static const LoweringTable* t = [] {
    auto* t = new LoweringTable;
    t->MustAdd({"Add", 7, INT32_MAX, LowerAdd, nullptr});
    t->MustAdd({"Reshape", 5, INT32_MAX, LowerView, nullptr});
    return t;
  }();
  return *t;
}

// Shape inference with the fold hook over the family above; `folded` counts folded nodes.
struct Folding {
  explicit Folding(FoldOptions options = FoldOptions()) {
    BOOST_REQUIRE(evaluator.ok());
    shape_options.fold = MakeFoldHook(evaluator->get(), options, &folded);
  }
  Folding(const Folding&) = delete;  // the hook points at `folded`
  StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(&Table());
  int folded = 0;
  ShapeInferenceOptions shape_options;
};

// A shape value shape inference knows exactly (the static last dim of x[S, 768], picked out of
// Shape(x)) becomes constant data, so the arithmetic exporters build on it folds too and a Slice
// that reads it gets constant bounds. The symbolic dim S stays a run-time value.
BOOST_AUTO_TEST_CASE(shape_values_known_at_compile_time_fold) {
  Folding f;
  auto g = testing::ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[S, 768] x) => (float[S, 768] y, int64[1] third) {
      sh = Shape(x)
      last = Constant <value = int64[1] {-1}> ()
      zero = Constant <value = int64[1] {0}> ()
      width = Gather(sh, last)
      rows = Gather(sh, zero)
      third = Add(width, width)
      y = Slice(x, zero, width, last)
    }
  )");
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  Status st = InferShapes(*g, f.shape_options);
  BOOST_REQUIRE_MESSAGE(st.ok(), st.message());
  const Value& width = g->value(*g->FindValue("width"));
  BOOST_REQUIRE(width.data);
  BOOST_TEST(width.data->ToDoubles() == std::vector<double>({768}));
  const Value& third = g->value(*g->FindValue("third"));  // folded by evaluation from width
  BOOST_REQUIRE(third.data);
  BOOST_TEST(third.data->ToDoubles() == std::vector<double>({1536}));
  BOOST_TEST(!g->value(*g->FindValue("rows")).data);  // S: known only at run time
  BOOST_TEST(!g->value(*g->FindValue("sh")).data);
  BOOST_TEST(f.folded == 2);  // width, third
}

BOOST_AUTO_TEST_CASE(constant_subgraphs_fold_and_feed_downstream_rules) {
  Folding f;
  // The reshape target is computed from constants: folding makes it, and z's shape, static.
  auto g = testing::ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[12] x) => (float[a, b] z) {
      c = Constant <value = float[6] {1, 2, 3, 4, 5, 6}> ()
      d = Add(c, c)
      s0 = Constant <value = int64[2] {1, 3}> ()
      s = Add(s0, s0)
      z0 = Reshape(x, s)
      z = Add(z0, d)
    }
  )");
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  Status st = InferShapes(*g, f.shape_options);
  BOOST_REQUIRE_MESSAGE(st.ok(), st.message());
  BOOST_TEST(f.folded == 2);  // d and s; Constant nodes fold in their own rule
  const Value& d = g->value(*g->FindValue("d"));
  BOOST_REQUIRE(d.data);
  BOOST_TEST(d.data->ToDoubles() == std::vector<double>({2, 4, 6, 8, 10, 12}));
  const Value& z = g->value(*g->FindValue("z"));
  BOOST_TEST(ShapeToString(*z.shape) == "[2, 6]");
  BOOST_TEST(!z.data);  // depends on the input
}

// A folded kernel runs once, so its compile is its cost: one without floating-point arithmetic
// (the int64 Add; rank 2, so shape inference does not know its value already) compiles at the
// cheap first tier, which gives the same bits; the float Add, whose bits a tier could change,
// at the optimized tier the executable's kernels end on.
BOOST_AUTO_TEST_CASE(only_folds_without_float_arithmetic_take_the_first_tier) {
  Folding f;
  auto g = testing::ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (float[2] y, int64[2, 1] s, float[6] d) {
      c = Constant <value = float[6] {1, 2, 3, 4, 5, 6}> ()
      d = Add(c, c)
      s0 = Constant <value = int64[2, 1] {1, 3}> ()
      s = Add(s0, s0)
      y = Add(x, x)
    }
  )");
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  Status st = InferShapes(*g, f.shape_options);
  BOOST_REQUIRE_MESSAGE(st.ok(), st.message());
  BOOST_TEST(f.folded == 2);
  BOOST_TEST(g->value(*g->FindValue("s")).data->ToDoubles() == std::vector<double>({2, 6}));
  jit::EngineStats stats = (*f.evaluator)->engine().stats();
  BOOST_TEST(stats.compilations == 2);
  BOOST_TEST(stats.fast_compilations == 1);
}

// An integer division by a constant zero has no value: folding it is an error naming the node
// and the element, not a silent 0. A float division by zero folds (IEEE: inf) as before; the
// check runs before the kernel, so the table here need not lower Div.
BOOST_AUTO_TEST_CASE(integer_division_by_zero_is_an_error) {
  for (const char* op : {"Div", "Mod"}) {
    Folding f;
    auto g = testing::ImportText(std::string(R"(
      <ir_version: 8, opset_import: ["" : 13]>
      g (int64[3] x) => (int64[3] z) {
        a = Constant <value = int64[3] {6, 7, 8}> ()
        b = Constant <value = int64[3] {2, 0, 4}> ()
        q = )") + op + R"((a, b)
        z = Add(x, q)
      }
    )");
    BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
    Status st = InferShapes(*g, f.shape_options);
    BOOST_TEST(st.code() == StatusCode::kInvalidArgument, st.ToString());
    BOOST_TEST(st.message().find(std::string("(") + op +
                                 "): integer division by zero: the divisor (a constant) is 0 at "
                                 "element 1") != std::string::npos,
               st.message());
  }
}

// Folds `text` (Add and the indexing ops lowered) and expects the fold to fail with
// InvalidArgument containing `want`, reported as a constant-folding error.
void ExpectFoldError(const std::string& text, const std::string& want) {
  static const LoweringTable* table = [] {
    auto* t = new LoweringTable;
    t->MustAdd({"Add", 7, INT32_MAX, LowerAdd, nullptr});
    AddIndexingLowerings(*t);
    return t;
  }();
  StatusOr<std::unique_ptr<Evaluator>> evaluator = Evaluator::Create(table);
  BOOST_REQUIRE(evaluator.ok());
  int folded = 0;
  ShapeInferenceOptions options;
  options.fold = MakeFoldHook(evaluator->get(), FoldOptions(), &folded);
  auto g = testing::ImportText(text);
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  Status st = InferShapes(*g, options);
  BOOST_TEST(st.code() == StatusCode::kInvalidArgument, st.ToString());
  BOOST_TEST(st.message().find(want) != std::string::npos, st.message());
  BOOST_TEST(st.message().find("constant folding") != std::string::npos, st.message());
}

// A constant index out of range has no value either: folding the Gather is the same error the
// kernel gives at run time (ONNX Runtime's words), not the clamped last row.
BOOST_AUTO_TEST_CASE(out_of_range_constant_indices_are_an_error) {
  for (const char* index : {"3", "-4", "100000"}) {
    ExpectFoldError(std::string(R"(
      <ir_version: 8, opset_import: ["" : 13]>
      g (float[1] x) => (float[1] z) {
        table = Constant <value = float[3] {1, 2, 3}> ()
        i = Constant <value = int64[1] {)") + index + R"(}> ()
        row = Gather(table, i)
        z = Add(x, row)
      }
    )",
                    std::string("(Gather): indices element out of data bounds, idx=") + index +
                        " must be within the inclusive range [-3,2]");
  }
}

// A constant ReverseSequence whose sequence length is outside [0, time dim] fails folding as it
// fails at run time (it used to be clamped): naming the node, batch index, value and bound.
BOOST_AUTO_TEST_CASE(out_of_range_constant_sequence_lengths_are_an_error) {
  for (const char* len : {"4", "-1"}) {
    ExpectFoldError(std::string(R"(
      <ir_version: 8, opset_import: ["" : 13]>
      g (float[3, 2] x) => (float[3, 2] z) {
        seq = Constant <value = float[3, 2] {1, 2, 3, 4, 5, 6}> ()
        lens = Constant <value = int64[2] {2, )") + len + R"(}> ()
        r = ReverseSequence(seq, lens)
        z = Add(x, r)
      }
    )",
                    std::string("(ReverseSequence): sequence_lens[1] = ") + len +
                        " is outside the inclusive range [0,3]");
  }
}

BOOST_AUTO_TEST_CASE(overridable_inputs_are_not_constants) {
  Folding f;
  auto g = testing::ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[3] x) => (float[3] z) <float[3] x = {1, 2, 3}> { z = Add(x, x) }
  )");
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  BOOST_REQUIRE(InferShapes(*g, f.shape_options).ok());
  BOOST_TEST(f.folded == 0);
}

BOOST_AUTO_TEST_CASE(large_outputs_stay_in_the_graph) {
  FoldOptions fo;
  fo.max_output_bytes = 8;
  Folding f(fo);
  auto g = testing::ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[3] x) => (float[3] z) {
      c = Constant <value = float[3] {1, 2, 3}> ()
      d = Add(c, c)
      z = Add(x, d)
    }
  )");
  BOOST_REQUIRE(g.ok());
  BOOST_REQUIRE(InferShapes(*g, f.shape_options).ok());
  BOOST_TEST(f.folded == 0);
  BOOST_TEST(!g->value(*g->FindValue("d")).data);
}

// In a Loop body, a node computed from captured constants alone folds (once, at compile time,
// not on every iteration); one reading the body's inputs does not, nor does a shape value that
// only the body inputs' current shapes make known.
BOOST_AUTO_TEST_CASE(body_nodes_reading_only_constants_fold) {
  Folding f;
  auto g = testing::ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (int64 m, float[2] x) => (float[2] y) <float[2] w = {1, 2}> {
      t = Constant <value = bool {1}> ()
      y = Loop (m, t, x) <
        body = b (int64 i, bool cin, float[2] v) => (bool cout, float[2] vout) {
          ww = Add(w, w)
          vout = Add(v, ww)
          sh = Shape(v)
          cout = Identity(cin)
        }
      >
    }
  )");
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
  Status st = InferShapes(*g, f.shape_options);
  BOOST_REQUIRE_MESSAGE(st.ok(), st.message());
  const Node& loop = g->node(g->value(*g->FindValue("y")).producer);
  const Graph& body = *loop.FindAttribute("body")->graph();
  const Value& ww = body.value(*body.FindValue("ww"));
  BOOST_REQUIRE(ww.data);
  BOOST_TEST(ww.data->ToDoubles() == std::vector<double>({2, 4}));
  BOOST_TEST(!body.value(*body.FindValue("vout")).data);
  BOOST_TEST(!body.value(*body.FindValue("sh")).data);
  BOOST_TEST(f.folded == 1);
}

}  // namespace
}  // namespace kiln::compiler
