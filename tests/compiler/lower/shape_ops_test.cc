// Known-answer tests of the shape_ops lowerings (compiler/lower/shape_ops.cc): every op run through
// the Evaluator on the JIT and checked against a plain C++ reference, including run-time shape
// inputs (shape functions) and symbolic dims run at two sizes.
#define BOOST_TEST_MODULE shape_ops_test
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "compiler/lower/evaluate.h"
#include "compiler/lower/lower.h"
#include "jit/codegen.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::F32;
using testing::Generate;
using testing::I64;
using testing::MakeTensor;
using testing::Model;
using testing::Nd;
using testing::RandomTensor;
using testing::ToNd;

const LoweringTable& Table() {
  static const LoweringTable* table = [] {
    auto* t = new LoweringTable();
    AddShapeLowerings(*t);
    return t;
  }();
  return *table;
}

std::vector<TensorDataRef> Run(const std::string& text, const std::vector<TensorDataRef>& in) {
  StatusOr<std::vector<TensorDataRef>> r = testing::RunModel(text, in, Table());
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().message() + "\nmodel:\n" + text);
  return *r;
}

// ---- A plain reference: dense row-major arrays of doubles ----


void Expect(const TensorDataRef& got, DType dtype, const Nd& want, double tol = 0) {
  TensorDataRef e = MakeTensor(dtype, want.dims, want.v);
  std::string m = Compare(*got, *e, 0, tol);
  BOOST_CHECK_MESSAGE(m.empty(), m);
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s;
}

// ---- Views -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(reshape_constant_shapes) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 4}, -1, 1, 1);
  struct Case {
    std::string shape;
    int allowzero;
    std::vector<int64_t> want;
  } cases[] = {{"{4, 6}", 0, {4, 6}},
               {"{0, -1}", 0, {2, 12}},
               {"{-1}", 0, {24}},
               {"{2, 0, 2, -1}", 0, {2, 3, 2, 2}},
               {"{1, -1, 4}", 1, {1, 6, 4}}};
  for (const Case& c : cases) {
    std::string text = Model(
        14, "float[2,3,4] x", "y",
        "s = Constant<value = int64[" +
            std::to_string(std::count(c.shape.begin(), c.shape.end(), ',') + 1) + "] " + c.shape +
            ">()\n y = Reshape<allowzero = " + std::to_string(c.allowzero) + ">(x, s)");
    std::vector<TensorDataRef> out = Run(text, {x});
    Expect(out[0], DType::kF32, {c.want, x->ToDoubles()});
  }
  // allowzero keeps a literal 0: a [2,3,4] tensor cannot become [0, 4] but an empty one can.
  TensorDataRef e = F32({0, 3}, {});
  std::vector<TensorDataRef> out =
      Run(Model(14, "float[0,3] x", "y",
                "s = Constant<value = int64[2] {3, 0}>()\n y = Reshape<allowzero = 1>(x, s)"),
          {e});
  Expect(out[0], DType::kF32, {{3, 0}, {}});
}

BOOST_AUTO_TEST_CASE(reshape_runtime_shape_two_values) {
  std::string text = Model(13, "float[2,3,4] x, int64[3] s", "y", "y = Reshape(x, s)");
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 4}, -1, 1, 2);
  Expect(Run(text, {x, I64({3}, {4, 0, -1})})[0], DType::kF32, {{4, 3, 2}, x->ToDoubles()});
  Expect(Run(text, {x, I64({3}, {1, 24, 1})})[0], DType::kF32, {{1, 24, 1}, x->ToDoubles()});
  Expect(Run(text, {x, I64({3}, {-1, 2, 2})})[0], DType::kF32, {{6, 2, 2}, x->ToDoubles()});
  // Contradictory shapes are errors from the shape function (-1 dims), not crashes.
  for (std::vector<double> bad :
       {std::vector<double>{5, 5, 1}, {-1, -1, 2}, {-1, 5, 1}, {2, 3, -7}, {0, 0, 5}}) {
    StatusOr<std::vector<TensorDataRef>> r = testing::RunModel(text, {x, I64({3}, bad)}, Table());
    BOOST_TEST(!r.ok());
  }
}

BOOST_AUTO_TEST_CASE(flatten_squeeze_unsqueeze) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 1, 3, 1}, -1, 1, 3);
  std::vector<double> v = x->ToDoubles();
  for (auto [axis, want] : std::vector<std::pair<int, std::vector<int64_t>>>{
           {0, {1, 6}}, {1, {2, 3}}, {2, {2, 3}}, {-1, {6, 1}}, {4, {6, 1}}}) {
    Expect(Run(Model(13, "float[2,1,3,1] x", "y",
                     "y = Flatten<axis = " + std::to_string(axis) + ">(x)"),
               {x})[0],
           DType::kF32, {want, v});
  }
  Expect(Run(Model(11, "float[2,1,3,1] x", "y", "y = Squeeze<axes = [1, -1]>(x)"), {x})[0],
         DType::kF32, {{2, 3}, v});
  Expect(Run(Model(11, "float[2,1,3,1] x", "y", "y = Squeeze<axes = [-3]>(x)"), {x})[0],
         DType::kF32, {{2, 3, 1}, v});
  Expect(Run(Model(13, "float[2,1,3,1] x", "y", "y = Squeeze(x)"), {x})[0], DType::kF32,
         {{2, 3}, v});
  Expect(Run(Model(13, "float[2,1,3,1] x", "y",
                   "a = Constant<value = int64[1] {3}>()\n y = Squeeze(x, a)"),
             {x})[0],
         DType::kF32, {{2, 1, 3}, v});
  Expect(Run(Model(11, "float[2,1,3,1] x", "y", "y = Unsqueeze<axes = [0, -1]>(x)"), {x})[0],
         DType::kF32, {{1, 2, 1, 3, 1, 1}, v});
  Expect(Run(Model(13, "float[2,1,3,1] x", "y",
                   "a = Constant<value = int64[2] {2, 0}>()\n y = Unsqueeze(x, a)"),
             {x})[0],
         DType::kF32, {{1, 2, 1, 1, 3, 1}, v});
}

// Squeeze / Unsqueeze with axes known only at run time. The shape rules reject these for now
// ("axes must be known at compile time"), so the graph is imported without inference and given
// what inference would give: the output rank with fresh dims, marked data-dependent. The
// lowering (a view plus a shape function) is what is under test.
StatusOr<std::vector<TensorDataRef>> RunRuntimeAxes(const std::string& text, int out_rank,
                                                    const std::vector<TensorDataRef>& inputs) {
  ASSIGN_OR_RETURN(Graph g, testing::ImportText(text));
  Node& node = g.mutable_node(0);
  node.data_dependent_shape = true;
  const Value& x = g.value(node.inputs[0]);
  Value& y = g.mutable_value(node.outputs[0]);
  y.dtype = x.dtype;
  y.shape = SymbolicShape();
  for (int d = 0; d < out_rank; ++d) y.shape->push_back(g.symbols().Fresh());
  ASSIGN_OR_RETURN(std::unique_ptr<Evaluator> ev, Evaluator::Create(&Table()));
  return ev->RunGraph(g, inputs);
}

BOOST_AUTO_TEST_CASE(squeeze_unsqueeze_runtime_axes) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 1, 3, 1}, -1, 1, 21);
  std::vector<double> v = x->ToDoubles();
  auto run = [&](const std::string& text, int out_rank, const TensorDataRef& axes) {
    StatusOr<std::vector<TensorDataRef>> r = RunRuntimeAxes(text, out_rank, {x, axes});
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().message());
    return (*r)[0];
  };
  auto fails = [&](const std::string& text, int out_rank, const TensorDataRef& axes) {
    return !RunRuntimeAxes(text, out_rank, {x, axes}).ok();
  };
  std::string sq = Model(13, "float[2,1,3,1] x, int64[1] a", "y", "y = Squeeze(x, a)");
  Expect(run(sq, 3, I64({1}, {1})), DType::kF32, {{2, 3, 1}, v});
  Expect(run(sq, 3, I64({1}, {-1})), DType::kF32, {{2, 1, 3}, v});
  BOOST_TEST(fails(sq, 3, I64({1}, {0})));  // dim 0 is 2
  BOOST_TEST(fails(sq, 3, I64({1}, {4})));  // out of range
  std::string sq2 = Model(13, "float[2,1,3,1] x, int64[2] a", "y", "y = Squeeze(x, a)");
  Expect(run(sq2, 2, I64({2}, {3, 1})), DType::kF32, {{2, 3}, v});
  BOOST_TEST(fails(sq2, 2, I64({2}, {1, 1})));  // repeated
  std::string un = Model(13, "float[2,1,3,1] x, int64[2] a", "y", "y = Unsqueeze(x, a)");
  Expect(run(un, 6, I64({2}, {0, 5})), DType::kF32, {{1, 2, 1, 3, 1, 1}, v});
  Expect(run(un, 6, I64({2}, {-1, 2})), DType::kF32, {{2, 1, 1, 3, 1, 1}, v});
  Expect(run(un, 6, I64({2}, {4, 3})), DType::kF32, {{2, 1, 3, 1, 1, 1}, v});
  BOOST_TEST(fails(un, 6, I64({2}, {0, -6})));  // repeated
  BOOST_TEST(fails(un, 6, I64({2}, {0, 6})));   // out of range
}

// ---- Transpose -------------------------------------------------------------------------------

Nd TransposeRef(const Nd& x, const std::vector<int>& perm) {
  std::vector<int64_t> dims;
  for (int p : perm) dims.push_back(x.dims[p]);
  return Generate(dims, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(idx.size());
    for (size_t k = 0; k < perm.size(); ++k) src[perm[k]] = idx[k];
    return x.at(src);
  });
}

BOOST_AUTO_TEST_CASE(transpose_perms_shapes_dtypes) {
  struct Case {
    std::vector<int64_t> dims;
    std::vector<int> perm;  // empty: default (reverse)
  } cases[] = {{{37, 45}, {}},
               {{1, 7}, {1, 0}},
               {{64, 33}, {1, 0}},
               {{2, 3, 5}, {}},
               {{2, 3, 5}, {1, 0, 2}},
               {{3, 4, 35, 9}, {0, 2, 3, 1}},
               {{2, 9, 4, 33}, {0, 3, 1, 2}},
               {{2, 3, 4, 5}, {3, 2, 1, 0}},
               {{0, 5}, {1, 0}},
               {{5}, {0}}};
  for (DType dtype : {DType::kF32, DType::kI64, DType::kF16}) {
    const char* type = dtype == DType::kF32 ? "float" : dtype == DType::kI64 ? "int64" : "float16";
    for (const Case& c : cases) {
      std::vector<int> perm = c.perm;
      std::string attr;
      if (perm.empty()) {
        for (int i = static_cast<int>(c.dims.size()) - 1; i >= 0; --i) perm.push_back(i);
      } else {
        std::string p;
        for (int v : perm) p += (p.empty() ? "" : ", ") + std::to_string(v);
        attr = "<perm = [" + p + "]>";
      }
      TensorDataRef x = RandomTensor(dtype, c.dims, -50, 50, 4);
      std::vector<TensorDataRef> out = Run(Model(13, std::string(type) + "[" + Dims(c.dims) + "] x",
                                                 "y", "y = Transpose" + attr + "(x)"),
                                           {x});
      Expect(out[0], dtype, TransposeRef(ToNd(x), perm));
    }
  }
}

// Runs the model's one node with its kernel compiled at the JIT's first tier, which moves data
// bit for bit as the optimized tier does (no float arithmetic) at a fraction of the compile time:
// the every-permutation sweep below compiles hundreds of kernels.
std::vector<TensorDataRef> RunFirstTier(const std::string& text,
                                        const std::vector<TensorDataRef>& in) {
  static Evaluator* evaluator = [] {
    StatusOr<std::unique_ptr<Evaluator>> e = Evaluator::Create(&Table());
    BOOST_REQUIRE_MESSAGE(e.ok(), e.status().ToString());
    return e->release();  // leaked as RunModel's engine is (LLVM's statics)
  }();
  StatusOr<Graph> g = testing::InferText(text);
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  BOOST_REQUIRE(g->num_nodes() == 1);
  StatusOr<std::vector<TensorDataRef>> r = evaluator->RunNode(*g, 0, in, jit::Tier::kFast);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().message() + "\nmodel:\n" + text);
  return *r;
}

// Every permutation of ranks 2 to 5, f32 and i32 (8 x 8 register blocks in full tiles) and
// f16 (the loop), over dims that are not multiples of 8: whole blocks, the rows and the partial
// tile of columns they leave, and dims too small for any block.
BOOST_AUTO_TEST_CASE(transpose_every_perm_rank_2_to_5) {
  const std::vector<std::vector<int64_t>> shapes = {
      {37, 45}, {9, 19, 70}, {3, 13, 10, 11}, {2, 3, 19, 11, 13}};
  for (const std::vector<int64_t>& dims : shapes) {
    std::vector<int> perm(dims.size());
    for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int>(k);
    do {
      std::vector<int64_t> p(perm.begin(), perm.end());
      for (DType dtype : {DType::kF32, DType::kI32, DType::kF16}) {
        // Ranks 4 and 5 run f16 on the perms that move the last dim to the front only.
        if (dtype == DType::kF16 && dims.size() > 3 && perm[0] != static_cast<int>(dims.size()) - 1)
          continue;
        const char* type = dtype == DType::kF32 ? "float" : dtype == DType::kI32 ? "int32" : "float16";
        TensorDataRef x = RandomTensor(dtype, dims, -1000, 1000, 7);
        std::vector<TensorDataRef> out =
            RunFirstTier(Model(13, std::string(type) + "[" + Dims(dims) + "] x", "y",
                               "y = Transpose<perm = [" + testing::Ints(p) + "]>(x)"),
                         {x});
        BOOST_TEST_CONTEXT(type << " " << Dims(dims) << " perm " << testing::Ints(p)) {
          Expect(out[0], dtype, TransposeRef(ToNd(x), perm));
        }
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

// The LLVM IR of the kernel one-node model `text` lowers to: the code generator's own (before
// LLVM's passes) or, with `optimize`, what the JIT runs.
std::string KernelIr(const std::string& text, bool optimize) {
  StatusOr<Graph> g = testing::InferText(text);
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  StatusOr<LoweredNode> lowered = LowerNode(*g, 0, false, Table());
  BOOST_REQUIRE_MESSAGE(lowered.ok(), lowered.status().ToString());
  BOOST_REQUIRE(lowered->kernel.has_value());
  StatusOr<jit::TargetInfo> target = jit::DetectHostTarget();
  BOOST_REQUIRE_MESSAGE(target.ok(), target.status().ToString());
  jit::CodegenOptions options;
  options.optimize = optimize;
  StatusOr<jit::KernelModule> module = jit::GenerateModule(*lowered->kernel, "k", *target, options);
  BOOST_REQUIRE_MESSAGE(module.ok(), module.status().ToString());
  return jit::ModuleText(*module);
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

// The code generator's own IR for one Transpose: its full tiles of 4-byte elements go through
// one 8 x 8 register block (24 shuffles, jit/codegen_vector.cc), other widths keep the loop.
// Without the block, LLVM's loop vectorizer made 8 strided loads (gathers or scalar loads) of
// every 8 elements stored, at half the speed.
size_t TransposeShuffles(const std::string& type, const std::string& dims,
                         const std::string& perm) {
  std::string text = Model(13, type + "[" + dims + "] x", "y",
                           "y = Transpose<perm = [" + perm + "]>(x)");
  return Occurrences(KernelIr(text, false), "shufflevector");
}

BOOST_AUTO_TEST_CASE(transpose_full_tiles_use_register_blocks) {
  BOOST_TEST(TransposeShuffles("float", "1,96,56,56", "0, 2, 3, 1") == 24u);
  BOOST_TEST(TransposeShuffles("float", "1,56,56,96", "0, 3, 1, 2") == 24u);
  BOOST_TEST(TransposeShuffles("int32", "37,45", "1, 0") == 24u);
  BOOST_TEST(TransposeShuffles("float", "N,96,M", "2, 1, 0") == 24u);  // symbolic dims too
  BOOST_TEST(TransposeShuffles("int64", "1,96,56,56", "0, 2, 3, 1") == 0u);
  BOOST_TEST(TransposeShuffles("float", "4,5,6", "0, 2, 1") == 24u);  // decided at run time
  BOOST_TEST(TransposeShuffles("float", "3,4,5", "1, 0, 2") == 0u);   // last dim stays: a copy
}

BOOST_AUTO_TEST_CASE(transpose_symbolic_dims_two_sizes) {
  std::string text = Model(13, "float[N, 3, M] x", "y", "y = Transpose<perm = [2, 0, 1]>(x)");
  for (auto [n, m] : {std::pair<int64_t, int64_t>{5, 40}, {33, 7}}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n, 3, m}, -1, 1, 5);
    Expect(Run(text, {x})[0], DType::kF32, TransposeRef(ToNd(x), {2, 0, 1}));
  }
}

// ---- Concat, Split ---------------------------------------------------------------------------

Nd ConcatRef(const std::vector<Nd>& xs, int axis) {
  std::vector<int64_t> dims = xs[0].dims;
  dims[axis] = 0;
  for (const Nd& x : xs) dims[axis] += x.dims[axis];
  return Generate(dims, [&](std::vector<int64_t> idx) {
    for (const Nd& x : xs) {
      if (idx[axis] < x.dims[axis]) return x.at(idx);
      idx[axis] -= x.dims[axis];
    }
    return std::nan("");
  });
}

BOOST_AUTO_TEST_CASE(concat_axes_inputs) {
  for (int axis : {0, 1, 2, -1, -3}) {
    int a = axis < 0 ? axis + 3 : axis;
    std::vector<std::vector<int64_t>> shapes;
    for (int64_t len : {2, 0, 5, 1}) {
      std::vector<int64_t> s = {3, 4, 7};
      s[a] = len;
      shapes.push_back(s);
    }
    std::string inputs, names;
    std::vector<TensorDataRef> in;
    std::vector<Nd> ref;
    for (size_t k = 0; k < shapes.size(); ++k) {
      inputs +=
          (k ? ", " : "") + std::string("int64[") + Dims(shapes[k]) + "] x" + std::to_string(k);
      names += (k ? ", " : "") + std::string("x") + std::to_string(k);
      in.push_back(RandomTensor(DType::kI64, shapes[k], -100, 100, 10 + k));
      ref.push_back(ToNd(in.back()));
    }
    std::vector<TensorDataRef> out = Run(
        Model(13, inputs, "y", "y = Concat<axis = " + std::to_string(axis) + ">(" + names + ")"),
        in);
    Expect(out[0], DType::kI64, ConcatRef(ref, a));
  }
}

BOOST_AUTO_TEST_CASE(concat_symbolic_two_sizes) {
  std::string text = Model(13, "float[N, 3] a, float[M, 3] b", "y", "y = Concat<axis = 0>(a, b)");
  for (auto [n, m] : {std::pair<int64_t, int64_t>{2, 9}, {17, 1}}) {
    TensorDataRef a = RandomTensor(DType::kF32, {n, 3}, -1, 1, 6);
    TensorDataRef b = RandomTensor(DType::kF32, {m, 3}, -1, 1, 7);
    Expect(Run(text, {a, b})[0], DType::kF32, ConcatRef({ToNd(a), ToNd(b)}, 0));
  }
}

// Checks outputs of a split of x along axis into `sizes`.
void ExpectSplit(const std::vector<TensorDataRef>& out, const Nd& x, int axis,
                 const std::vector<int64_t>& sizes) {
  BOOST_REQUIRE_EQUAL(out.size(), sizes.size());
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> dims = x.dims;
    dims[axis] = sizes[k];
    Expect(out[k], DType::kF32, Generate(dims, [&](std::vector<int64_t> idx) {
             idx[axis] += offset;
             return x.at(idx);
           }));
    offset += sizes[k];
  }
}

BOOST_AUTO_TEST_CASE(split_attribute_input_equal_runtime) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 6, 5}, -1, 1, 8);
  Nd xr = ToNd(x);
  ExpectSplit(
      Run(Model(11, "float[4,6,5] x", "a, b, c", "a, b, c = Split<axis = 1, split = [1, 0, 5]>(x)"),
          {x}),
      xr, 1, {1, 0, 5});
  ExpectSplit(Run(Model(13, "float[4,6,5] x", "a, b",
                        "s = Constant<value = int64[2] {3, 2}>()\n a, b = Split<axis = -1>(x, s)"),
                  {x}),
              xr, 2, {3, 2});
  ExpectSplit(Run(Model(13, "float[4,6,5] x", "a, b, c", "a, b, c = Split<axis = 1>(x)"), {x}), xr,
              1, {2, 2, 2});
  // Sizes known only at run time: a shape function, two different splits in one test.
  std::string text =
      Model(13, "float[4,6,5] x, int64[3] s", "a, b, c", "a, b, c = Split<axis = 1>(x, s)");
  ExpectSplit(Run(text, {x, I64({3}, {1, 2, 3})}), xr, 1, {1, 2, 3});
  ExpectSplit(Run(text, {x, I64({3}, {6, 0, 0})}), xr, 1, {6, 0, 0});
  BOOST_TEST(!testing::RunModel(text, {x, I64({3}, {1, 1, 1})}, Table()).ok());
  BOOST_TEST(!testing::RunModel(text, {x, I64({3}, {7, -1, 0})}, Table()).ok());
}

// ---- Slice -----------------------------------------------------------------------------------

Nd SliceRef(const Nd& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
            std::vector<int64_t> axes, std::vector<int64_t> steps) {
  int rank = static_cast<int>(x.dims.size());
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  std::vector<int64_t> first(rank, 0), step(rank, 1), dims = x.dims;
  for (size_t k = 0; k < starts.size(); ++k) {
    int a = static_cast<int>(axes[k] < 0 ? axes[k] + rank : axes[k]);
    int64_t d = x.dims[a], s = starts[k], e = ends[k], st = steps[k];
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      s = std::clamp<int64_t>(s, 0, std::max<int64_t>(d - 1, 0));
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    int64_t n = 0;
    for (int64_t i = s; st > 0 ? i < e : i > e; i += st) ++n;
    first[a] = s;
    step[a] = st;
    dims[a] = n;
  }
  return Generate(dims, [&](std::vector<int64_t> idx) {
    for (int d = 0; d < rank; ++d) idx[d] = first[d] + idx[d] * step[d];
    return x.at(idx);
  });
}

std::string IntList(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

BOOST_AUTO_TEST_CASE(slice_constant_bounds) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  TensorDataRef x = RandomTensor(DType::kF32, {5, 7, 9}, -1, 1, 9);
  Nd xr = ToNd(x);
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  } cases[] = {
      {{1, 2}, {4, 6}, {}, {}},
      {{-3}, {kMax}, {2}, {}},
      {{0, 8}, {kMax, kMin}, {0, -1}, {2, -1}},
      {{-1}, {-8}, {1}, {-2}},
      {{10}, {-10}, {2}, {-3}},
      {{2, 3}, {2, 100}, {1, 2}, {1, 4}},
      {{-100, 4}, {100, 2}, {2, 0}, {3, -1}},
      {{0}, {kMax}, {1}, {kMax}},
      {{6}, {kMin}, {1}, {kMin + 1}},
  };
  for (const Case& c : cases) {
    std::string inits = "st = Constant<value = int64[" + std::to_string(c.starts.size()) + "] {" +
                        IntList(c.starts) + "}>()\n en = Constant<value = int64[" +
                        std::to_string(c.ends.size()) + "] {" + IntList(c.ends) + "}>()\n";
    std::string args = "x, st, en";
    if (!c.axes.empty() || !c.steps.empty()) {
      std::vector<int64_t> axes = c.axes;
      if (axes.empty())
        for (size_t k = 0; k < c.starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
      inits += "ax = Constant<value = int64[" + std::to_string(axes.size()) + "] {" +
               IntList(axes) + "}>()\n";
      args += ", ax";
    }
    if (!c.steps.empty()) {
      inits += "sp = Constant<value = int64[" + std::to_string(c.steps.size()) + "] {" +
               IntList(c.steps) + "}>()\n";
      args += ", sp";
    }
    std::vector<TensorDataRef> out =
        Run(Model(13, "float[5,7,9] x", "y", inits + "y = Slice(" + args + ")"), {x});
    Expect(out[0], DType::kF32, SliceRef(xr, c.starts, c.ends, c.axes, c.steps));
  }
  // Opset 9: attributes.
  Expect(Run(Model(9, "float[5,7,9] x", "y",
                   "y = Slice<starts = [-2, 1], ends = [1000, -1], axes = [2, 0]>(x)"),
             {x})[0],
         DType::kF32, SliceRef(xr, {-2, 1}, {1000, -1}, {2, 0}, {}));
}

BOOST_AUTO_TEST_CASE(slice_runtime_bounds_and_axes) {
  TensorDataRef x = RandomTensor(DType::kI64, {6, 8}, -100, 100, 11);
  Nd xr = ToNd(x);
  std::string text = Model(13, "int64[6,8] x, int64[2] s, int64[2] e, int64[2] a, int64[2] p", "y",
                           "y = Slice(x, s, e, a, p)");
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  } cases[] = {{{1, 2}, {5, 7}, {0, 1}, {1, 2}},
               {{-1, 0}, {-100, 100}, {1, 0}, {-3, 1}},
               {{0, 5}, {1, 1}, {-1, -2}, {1, -1}},
               {{3, 3}, {3, 3}, {0, 1}, {1, 1}}};
  for (const Case& c : cases) {
    std::vector<double> s(c.starts.begin(), c.starts.end()), e(c.ends.begin(), c.ends.end()),
        a(c.axes.begin(), c.axes.end()), p(c.steps.begin(), c.steps.end());
    std::vector<TensorDataRef> out =
        Run(text, {x, I64({2}, s), I64({2}, e), I64({2}, a), I64({2}, p)});
    Expect(out[0], DType::kI64, SliceRef(xr, c.starts, c.ends, c.axes, c.steps));
  }
  // Constant axes, run-time starts and ends, symbolic input dims at two sizes.
  std::string sym = Model(13, "float[N, 4] x, int64[1] s, int64[1] e", "y",
                          "a = Constant<value = int64[1] {0}>()\n y = Slice(x, s, e, a)");
  for (int64_t n : {3, 10}) {
    TensorDataRef xs = RandomTensor(DType::kF32, {n, 4}, -1, 1, 12);
    Expect(Run(sym, {xs, I64({1}, {1}), I64({1}, {-1})})[0], DType::kF32,
           SliceRef(ToNd(xs), {1}, {-1}, {0}, {}));
  }
}

// A slice whose rows are contiguous runs of the input (innermost dim whole, or step 1) copies
// them with vector loads: with the index clamped per element (the general nest), each element
// was a scalar load inserted into a vector (27 `load float`, no vector load of floats).
// perceiver_like's k / v split is the first case ([L, B, 256] -> [L, B, 128]).
BOOST_AUTO_TEST_CASE(slice_contiguous_rows_are_vector_copies) {
  // Bounds as initializers, so that node 0 is the Slice.
  auto vector_loads = [](const std::string& dims, const std::string& inits) {
    std::string ir = KernelIr(
        Model(13, "float[" + dims + "] x", "y", "y = Slice(x, s, e, a)", inits), true);
    static const std::regex vector_load("load <[0-9]+ x float>");
    return std::distance(std::sregex_iterator(ir.begin(), ir.end(), vector_load),
                         std::sregex_iterator());
  };
  BOOST_TEST(vector_loads("L, B, 256", "int64[1] s = {128}, int64[1] e = {256}, int64[1] a = {2}") >
             0);
  BOOST_TEST(vector_loads("L, 64", "int64[1] s = {3}, int64[1] e = {-1}, int64[1] a = {0}") > 0);
  // The slice itself right at the edges, symbolic rows at two sizes.
  std::string text = Model(13, "float[L, 2, 37] x", "y",
                           "s = Constant<value = int64[2] {1, 36}>()\n"
                           "e = Constant<value = int64[2] {2, 37}>()\n"
                           "a = Constant<value = int64[2] {1, 2}>()\n"
                           "y = Slice(x, s, e, a)");
  for (int64_t l : {1, 9}) {
    TensorDataRef x = RandomTensor(DType::kF32, {l, 2, 37}, -1, 1, 13);
    Expect(Run(text, {x})[0], DType::kF32, SliceRef(ToNd(x), {1, 36}, {2, 37}, {1, 2}, {}));
  }
}

// ---- Expand, Tile ----------------------------------------------------------------------------

Nd BroadcastTo(const Nd& x, const std::vector<int64_t>& dims) {
  int off = static_cast<int>(dims.size() - x.dims.size());
  return Generate(dims, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src;
    for (size_t d = 0; d < x.dims.size(); ++d) src.push_back(x.dims[d] == 1 ? 0 : idx[off + d]);
    return x.at(src);
  });
}

BOOST_AUTO_TEST_CASE(expand_constant_and_runtime_shape) {
  TensorDataRef x = RandomTensor(DType::kF32, {3, 1}, -1, 1, 13);
  Nd xr = ToNd(x);
  Expect(Run(Model(13, "float[3,1] x", "y",
                   "s = Constant<value = int64[3] {2, 1, 6}>()\n y = Expand(x, s)"),
             {x})[0],
         DType::kF32, BroadcastTo(xr, {2, 3, 6}));
  std::string text = Model(13, "float[3,1] x, int64[2] s", "y", "y = Expand(x, s)");
  Expect(Run(text, {x, I64({2}, {3, 7})})[0], DType::kF32, BroadcastTo(xr, {3, 7}));
  Expect(Run(text, {x, I64({2}, {1, 1})})[0], DType::kF32, BroadcastTo(xr, {3, 1}));
  BOOST_TEST(!testing::RunModel(text, {x, I64({2}, {4, 2})}, Table()).ok());
  // Symbolic input dims at two sizes.
  std::string sym =
      Model(13, "int64[N, 1] x", "y", "s = Constant<value = int64[2] {1, 5}>()\n y = Expand(x, s)");
  for (int64_t n : {1, 4}) {
    TensorDataRef xs = RandomTensor(DType::kI64, {n, 1}, -9, 9, 14);
    Expect(Run(sym, {xs})[0], DType::kI64, BroadcastTo(ToNd(xs), {n, 5}));
  }
}

Nd TileRef(const Nd& x, const std::vector<int64_t>& reps) {
  std::vector<int64_t> dims = x.dims;
  for (size_t d = 0; d < dims.size(); ++d) dims[d] *= reps[d];
  return Generate(dims, [&](std::vector<int64_t> idx) {
    for (size_t d = 0; d < idx.size(); ++d) idx[d] %= x.dims[d];
    return x.at(idx);
  });
}

BOOST_AUTO_TEST_CASE(tile_constant_and_runtime_repeats) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 1}, -1, 1, 15);
  Nd xr = ToNd(x);
  Expect(Run(Model(13, "float[2,3,1] x", "y",
                   "r = Constant<value = int64[3] {2, 1, 5}>()\n y = Tile(x, r)"),
             {x})[0],
         DType::kF32, TileRef(xr, {2, 1, 5}));
  std::string text = Model(13, "float[2,3,1] x, int64[3] r", "y", "y = Tile(x, r)");
  Expect(Run(text, {x, I64({3}, {1, 3, 2})})[0], DType::kF32, TileRef(xr, {1, 3, 2}));
  Expect(Run(text, {x, I64({3}, {3, 0, 1})})[0], DType::kF32, TileRef(xr, {3, 0, 1}));
  BOOST_TEST(!testing::RunModel(text, {x, I64({3}, {1, -1, 1})}, Table()).ok());
}

// ---- Pad -------------------------------------------------------------------------------------

Nd PadRef(const Nd& x, const std::vector<int64_t>& pads, const std::string& mode, double value) {
  int rank = static_cast<int>(x.dims.size());
  std::vector<int64_t> dims = x.dims;
  for (int d = 0; d < rank; ++d) dims[d] += pads[d] + pads[d + rank];
  return Generate(dims, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(rank);
    for (int d = 0; d < rank; ++d) {
      int64_t n = x.dims[d], i = idx[d] - pads[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") return value;
        if (mode == "edge") i = std::clamp<int64_t>(i, 0, n - 1);
        if (mode == "reflect") i = i < 0 ? -i : 2 * (n - 1) - i;
      }
      src[d] = i;
    }
    return x.at(src);
  });
}

BOOST_AUTO_TEST_CASE(pad_modes_and_forms) {
  TensorDataRef x = RandomTensor(DType::kF32, {3, 4, 5}, -1, 1, 16);
  Nd xr = ToNd(x);
  std::vector<std::vector<int64_t>> pad_sets = {
      {0, 1, 2, 1, 0, 3}, {1, 0, 0, 2, 3, 4}, {0, -1, 1, 0, 2, -2}};
  for (std::string mode : {"constant", "edge", "reflect"}) {
    for (const std::vector<int64_t>& p : pad_sets) {
      // Opset 11+: pads input and optional constant_value input.
      std::string body = "p = Constant<value = int64[6] {" + IntList(p) +
                         "}>()\n v = Constant<value = float {2.5}>()\n y = Pad<mode = \"" + mode +
                         "\">(x, p" + (mode == "constant" ? ", v" : "") + ")";
      Expect(Run(Model(13, "float[3,4,5] x", "y", body), {x})[0], DType::kF32,
             PadRef(xr, p, mode, 2.5));
      // Opset 2-10: attributes.
      std::string attr =
          "y = Pad<mode = \"" + mode + "\", pads = [" + IntList(p) + "], value = -1.5>(x)";
      Expect(Run(Model(10, "float[3,4,5] x", "y", attr), {x})[0], DType::kF32,
             PadRef(xr, p, mode, -1.5));
    }
  }
  // Rows wider than a vector (the copy between the pads runs vectorized, with a tail), pads
  // on the last dim only, wider than the row on one side (edge repeats, constant fills), and
  // a crop on one side.
  TensorDataRef wide = RandomTensor(DType::kF32, {2, 3, 37}, -1, 1, 18);
  Nd wr = ToNd(wide);
  for (std::string mode : {"constant", "edge", "reflect"}) {
    for (std::vector<int64_t> p : std::vector<std::vector<int64_t>>{
             {0, 0, 3, 0, 0, 4}, {0, 1, 9, 1, 0, 0}, {0, 0, -5, 0, 0, 17}, {0, 0, 0, 0, 0, 0}}) {
      if (mode == "reflect" && p[5] > 36) continue;  // reflect needs pads below the size
      std::string body = "p = Constant<value = int64[6] {" + IntList(p) +
                         "}>()\n v = Constant<value = float {2.5}>()\n y = Pad<mode = \"" + mode +
                         "\">(x, p" + (mode == "constant" ? ", v" : "") + ")";
      Expect(Run(Model(13, "float[2,3,37] x", "y", body), {wide})[0], DType::kF32,
             PadRef(wr, p, mode, 2.5));
    }
  }
  // Without constant_value: zeros. Integer data.
  TensorDataRef xi = RandomTensor(DType::kI64, {2, 3}, -9, 9, 17);
  Expect(Run(Model(13, "int64[2,3] x", "y",
                   "p = Constant<value = int64[4] {1, 2, 0, 1}>()\n y = Pad(x, p)"),
             {xi})[0],
         DType::kI64, PadRef(ToNd(xi), {1, 2, 0, 1}, "constant", 0));
  // Pads at run time (a shape function), two different values; a crop below zero is an error.
  std::string text = Model(13, "float[3,4,5] x, int64[6] p, float v", "y",
                           "y = Pad<mode = \"constant\">(x, p, v)");
  for (const std::vector<int64_t>& p : pad_sets) {
    std::vector<double> pd(p.begin(), p.end());
    Expect(Run(text, {x, I64({6}, pd), F32({}, {7})})[0], DType::kF32,
           PadRef(xr, p, "constant", 7));
  }
  BOOST_TEST(
      !testing::RunModel(text, {x, I64({6}, {-2, 0, 0, -2, 0, 0}), F32({}, {0})}, Table()).ok());
}

// ---- Shape, Size, ConstantOfShape, Range, Constant, EyeLike ---------------------------------

BOOST_AUTO_TEST_CASE(shape_and_size) {
  std::string text = Model(15, "float[N, 3, M] x", "a, b, c, d",
                           "a = Shape(x)\n b = Shape<start = 1>(x)\n c = Shape<start = -2, end = "
                           "-1>(x)\n d = Size(x)");
  for (auto [n, m] : {std::pair<int64_t, int64_t>{2, 5}, {7, 0}}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n, 3, m}, -1, 1, 18);
    std::vector<TensorDataRef> out = Run(text, {x});
    Expect(out[0], DType::kI64, {{3}, {double(n), 3, double(m)}});
    Expect(out[1], DType::kI64, {{2}, {3, double(m)}});
    Expect(out[2], DType::kI64, {{1}, {3}});
    Expect(out[3], DType::kI64, {{}, {double(n * 3 * m)}});
  }
}

BOOST_AUTO_TEST_CASE(constant_of_shape) {
  std::string text =
      Model(13, "int64[2] s", "y, z",
            "y = ConstantOfShape<value = int64[1] {-7}>(s)\n z = ConstantOfShape(s)");
  for (auto [a, b] : {std::pair<int64_t, int64_t>{2, 3}, {0, 5}, {1, 1}}) {
    std::vector<TensorDataRef> out = Run(text, {I64({2}, {double(a), double(b)})});
    Expect(out[0], DType::kI64, {{a, b}, std::vector<double>(a * b, -7)});
    Expect(out[1], DType::kF32, {{a, b}, std::vector<double>(a * b, 0)});
  }
  BOOST_TEST(!testing::RunModel(text, {I64({2}, {-1, 2})}, Table()).ok());
  Expect(Run(Model(13, "", "y",
                   "s = Constant<value = int64[3] {2, 1, 3}>()\n y = ConstantOfShape<value = "
                   "float[1] {1.5}>(s)"),
             {})[0],
         DType::kF32, {{2, 1, 3}, std::vector<double>(6, 1.5)});
}

BOOST_AUTO_TEST_CASE(range_constant_and_runtime) {
  // Float range, run-time limits (a shape function), several lengths in one test.
  std::string text = Model(13, "float s, float l, float d", "y", "y = Range(s, l, d)");
  struct Case {
    double s, l, d;
  } cases[] = {{0, 5, 1}, {1, 2, 0.3}, {10, 3, -2.5}, {0, -1, 1}, {-1.5, 1.5, 0.5}};
  for (const Case& c : cases) {
    int64_t n = std::max<int64_t>(
        static_cast<int64_t>(std::ceil(static_cast<float>((float(c.l) - float(c.s)) / float(c.d)))),
        0);
    std::vector<double> want;
    for (int64_t i = 0; i < n; ++i) want.push_back(float(c.s) + float(i) * float(c.d));
    Expect(Run(text, {F32({}, {c.s}), F32({}, {c.l}), F32({}, {c.d})})[0], DType::kF32, {{n}, want},
           1e-6);
  }
  BOOST_TEST(!testing::RunModel(text, {F32({}, {0}), F32({}, {1}), F32({}, {0})}, Table()).ok());
  // Integer range with run-time inputs.
  std::string ti = Model(13, "int64 s, int64 l, int64 d", "y", "y = Range(s, l, d)");
  for (auto [s, l, d] : {std::tuple<int64_t, int64_t, int64_t>{0, 7, 3}, {5, -4, -2}, {3, 3, 1}}) {
    std::vector<double> want;
    for (int64_t v = s; d > 0 ? v < l : v > l; v += d) want.push_back(double(v));
    Expect(Run(ti, {I64({}, {double(s)}), I64({}, {double(l)}), I64({}, {double(d)})})[0],
           DType::kI64, {{int64_t(want.size())}, want});
  }
  // Constant inputs: the length is known at compile time.
  Expect(Run(Model(13, "", "y",
                   "s = Constant<value = int32 {2}>()\n l = Constant<value = int32 {11}>()\n"
                   " d = Constant<value = int32 {4}>()\n y = Range(s, l, d)"),
             {})[0],
         DType::kI32, {{3}, {2, 6, 10}});
}

BOOST_AUTO_TEST_CASE(constant_values) {
  std::vector<TensorDataRef> out = Run(
      Model(13, "", "a, b, c, d, e",
            "a = Constant<value = float[2, 3] {1, 2.5, -3, 4, 5, 6}>()\n"
            " b = Constant<value_ints = [4, -5, 6]>()\n c = Constant<value_float = 0.25>()\n"
            " d = Constant<value = int64[2, 2] {7, 7, 7, 7}>()\n e = Constant<value_int = -3>()"),
      {});
  Expect(out[0], DType::kF32, {{2, 3}, {1, 2.5, -3, 4, 5, 6}});
  Expect(out[1], DType::kI64, {{3}, {4, -5, 6}});
  Expect(out[2], DType::kF32, {{}, {0.25}});
  Expect(out[3], DType::kI64, {{2, 2}, {7, 7, 7, 7}});
  Expect(out[4], DType::kI64, {{}, {-3}});
}

BOOST_AUTO_TEST_CASE(eye_like) {
  for (int64_t k : {0, 1, -2, 9}) {
    for (auto [r, c] : {std::pair<int64_t, int64_t>{4, 4}, {3, 7}, {6, 2}}) {
      TensorDataRef x = RandomTensor(DType::kF32, {r, c}, -1, 1, 19);
      std::vector<TensorDataRef> out =
          Run(Model(13, "float[" + Dims({r, c}) + "] x", "y, z",
                    "y = EyeLike<k = " + std::to_string(k) +
                        ">(x)\n z = EyeLike<k = " + std::to_string(k) + ", dtype = 7>(x)"),
              {x});
      Nd want = Generate(
          {r, c}, [&](const std::vector<int64_t>& i) { return i[1] - i[0] == k ? 1.0 : 0.0; });
      Expect(out[0], DType::kF32, want);
      Expect(out[1], DType::kI64, want);
    }
  }
}

// A small model mixing the ops with a symbolic batch dim, run at two batch sizes.
BOOST_AUTO_TEST_CASE(symbolic_model_two_sizes) {
  std::string text = Model(13, "float[N, 6] x", "y, s",
                           "a = Constant<value = int64[1] {0}>()\n"
                           " pads = Constant<value = int64[6] {0, 1, 0, 0, 0, 2}>()\n"
                           " shape = Constant<value = int64[2] {-1, 0}>()\n"
                           " t = Transpose(x)\n"
                           " u = Unsqueeze(t, a)\n"
                           " p = Pad(u, pads)\n"
                           " s = Shape(p)\n"
                           " y = Reshape(p, shape)");
  for (int64_t n : {1, 5}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n, 6}, -1, 1, 20);
    std::vector<TensorDataRef> out = Run(text, {x});
    Nd t = TransposeRef(ToNd(x), {1, 0});
    t.dims.insert(t.dims.begin(), 1);
    Nd p = PadRef(t, {0, 1, 0, 0, 0, 2}, "constant", 0);
    Expect(out[1], DType::kI64, {{3}, {1, 7, double(n + 2)}});
    Expect(out[0], DType::kF32, {{n + 2, 7}, p.v});
  }
}

}  // namespace
}  // namespace kiln::compiler
