// Op registry (compiler/ops/): lookups by opset, and the type-and-shape rule of each op family as
// known answers — one ONNX-text node per case, its inferred output types, whether the node was
// marked data-dependent — plus a table of rule errors (code and message).
#define BOOST_TEST_MODULE registry_test
#include "compiler/ops/registry.h"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

namespace data = boost::unit_test::data;

// ---- Registry lookups ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(finds_defs_by_opset_range) {
  const OpRegistry& r = OpRegistry::Global();
  const OpDef* s11 = r.Find("", "Softmax", 11);
  const OpDef* s13 = r.Find("", "Softmax", 13);
  BOOST_TEST_REQUIRE((s11 && s13));
  BOOST_TEST(s11 != s13);  // pre-13 coerces to 2-D; lowering will differ
  BOOST_TEST(s11->until_version == 12);
  BOOST_TEST(r.Find("ai.onnx", "Squeeze", 13)->max_inputs == 2);
  BOOST_TEST(r.Find("", "Squeeze", 12)->max_inputs == 1);
  BOOST_TEST(r.Find("", "ReduceSum", 13)->max_inputs == 2);
  BOOST_TEST(r.Find("", "ReduceSum", 12)->max_inputs == 1);
  BOOST_TEST(r.Find("", "HardSwish", 13) == nullptr);
  BOOST_TEST(r.Find("", "LSTM", 13) == nullptr);
  BOOST_TEST(r.WhyUnsupported("", "HardSwish", 13) == "needs opset >= 14 (the model imports 13)");
  BOOST_TEST(r.WhyUnsupported("", "LSTM", 13) == "is not supported");
  BOOST_TEST(r.WhyUnsupported("", "Relu", 13).empty());
  BOOST_TEST(r.Defs("", "Pad").size() == 2u);
}

BOOST_AUTO_TEST_CASE(every_def_has_a_rule) {
  for (const auto& [domain, op] : OpRegistry::Global().OpTypes()) {
    for (const OpDef* d : OpRegistry::Global().Defs(domain, op)) BOOST_TEST(d->infer != nullptr, op);
  }
}

BOOST_AUTO_TEST_CASE(covers_the_issue_op_list) {
  // clang-format off
  const char* kRequired[] = {
      "Conv", "ConvTranspose", "MatMul", "Gemm", "BatchNormalization", "Relu", "LeakyRelu",
      "PRelu", "Elu", "Selu", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Softplus", "Softmax",
      "LogSoftmax", "Erf", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Exp", "Log",
      "Neg", "Abs", "Floor", "Ceil", "Round", "Sign", "Min", "Max", "Sum", "Mean", "Mod", "Equal",
      "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Where",
      "Cast", "CastLike", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
      "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
      "Gather", "GatherElements", "ScatterElements", "Expand", "Tile", "Pad", "Shape", "Size",
      "ConstantOfShape", "Range", "Identity", "Dropout", "Constant", "ReduceSum", "ReduceMean",
      "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp",
      "ReduceSumSquare", "ArgMax", "ArgMin", "LayerNormalization", "InstanceNormalization",
      "Resize", "DepthToSpace", "SpaceToDepth", "TopK", "NonZero", "CumSum", "Einsum", "Trilu",
      "OneHot", "If", "Loop"};
  // clang-format on
  for (const char* op : kRequired) BOOST_TEST(OpRegistry::Global().Find("", op, 17) != nullptr, op);
}

BOOST_AUTO_TEST_CASE(register_rejects_overlaps_and_missing_rules) {
  OpRegistry r;
  OpDef d;
  d.op_type = "Foo";
  d.since_version = 5;
  d.until_version = 10;
  BOOST_TEST(r.Register(d).code() == StatusCode::kInvalidArgument);  // no rule
  d.infer = [](InferenceContext&) { return Status::Ok(); };
  BOOST_TEST(r.Register(d).ok());
  OpDef overlap = d;
  overlap.since_version = 10;
  overlap.until_version = 12;
  BOOST_TEST(r.Register(overlap).message() == "op Foo: opset range overlaps a registered one");
  overlap.since_version = 11;
  BOOST_TEST(r.Register(overlap).ok());
  BOOST_TEST(r.Find("", "Foo", 11)->since_version == 11);
  BOOST_TEST(r.WhyUnsupported("", "Foo", 4) == "needs opset >= 5 (the model imports 4)");
  BOOST_TEST(r.WhyUnsupported("", "Foo", 13) == "is not supported at opset 13");
}

// ---- Known-answer shape rules ------------------------------------------------------------------

struct RuleCase {
  const char* name;
  int opset;
  const char* inputs;  // graph inputs in ONNX text syntax
  const char* body;    // node(s); constants as Constant nodes
  const char* expect;  // "y=float32[N, 4]; i=int64[N]" — outputs and their inferred types
  bool data_dependent = false;  // the last node's flag
};
std::ostream& operator<<(std::ostream& os, const RuleCase& c) { return os << c.name; }

std::vector<std::pair<std::string, std::string>> ParseExpect(const std::string& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ';')) {
    size_t b = item.find_first_not_of(' ');
    size_t eq = item.find('=');
    out.emplace_back(item.substr(b, eq - b), item.substr(eq + 1));
  }
  return out;
}

std::string ModelText(int opset, const std::string& inputs, const std::string& body,
                      const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::string outs;
  for (const auto& o : outputs) outs += (outs.empty() ? "" : ", ") + o.first;
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]>\ng (" + inputs +
         ") => (" + outs + ") {\n" + body + "\n}";
}

const RuleCase kRuleCases[] = {
    // Elementwise and broadcasting.
    {"add_broadcast", 13, "float[N,1,4] a, float[3,1] b", "y = Add(a, b)", "y=float32[N, 3, 4]"},
    {"add_symbol_meets_constant", 13, "float[N,4] a, float[3,4] b", "y = Add(a, b)",
     "y=float32[3, 4]"},
    {"add_two_symbols_gives_fresh", 13, "float[N,4] a, float[M,4] b", "y = Add(a, b)",
     "y=float32[?0, 4]"},
    {"relu_keeps_shape", 13, "float[N,?] a", "y = Relu(a)", "y=float32[N, ?0]"},
    {"equal_is_bool", 13, "int64[N] a, int64[1] b", "y = Equal(a, b)", "y=bool[N]"},
    {"pow_mixed_types", 15, "float[2,3] a, int64 b", "y = Pow(a, b)", "y=float32[2, 3]"},
    {"where_three_way", 13, "bool[N,1] c, float[1,4] x, float[N,4] z", "y = Where(c, x, z)",
     "y=float32[N, 4]"},
    {"sum_variadic", 13, "float[4] a, float[3,1] b, float[2,1,1] c", "y = Sum(a, b, c)",
     "y=float32[2, 3, 4]"},
    {"prelu_slope", 13, "float[N,3,8,8] x, float[3,1,1] s", "y = PRelu(x, s)",
     "y=float32[N, 3, 8, 8]"},
    {"cast", 13, "float[N,2] x", "y = Cast<to = 7>(x)", "y=int64[N, 2]"},
    {"castlike", 15, "float[N,2] x, float16[1] t", "y = CastLike(x, t)", "y=float16[N, 2]"},
    {"clip_11", 13, "float[N,2] x, float lo, float hi", "y = Clip(x, lo, hi)", "y=float32[N, 2]"},
    {"clip_6", 9, "float[N,2] x", "y = Clip<min = 0.0, max = 6.0>(x)", "y=float32[N, 2]"},
    {"dropout_mask", 13, "float[N,4] x", "y, m = Dropout(x)", "y=float32[N, 4]; m=bool[N, 4]"},
    {"softmax_pre13", 11, "float[N,10] x", "y = Softmax<axis = 1>(x)", "y=float32[N, 10]"},
    {"logsoftmax_13", 13, "float[B,S,V] x", "y = LogSoftmax(x)", "y=float32[B, S, V]"},
    {"isnan", 13, "float[N] x", "y = IsNaN(x)", "y=bool[N]"},
    {"not", 13, "bool[N] x", "y = Not(x)", "y=bool[N]"},
    {"mod", 13, "int32[N] a, int32[N] b", "y = Mod(a, b)", "y=int32[N]"},
    // Convolution and pooling.
    {"conv_pads_strides", 13, "float[N,3,224,224] x, float[64,3,7,7] w, float[64] b",
     "y = Conv<pads = [3, 3, 3, 3], strides = [2, 2]>(x, w, b)", "y=float32[N, 64, 112, 112]"},
    {"conv_same_upper_symbolic", 13, "float[N,3,H,W] x, float[8,3,3,3] w",
     "y = Conv<auto_pad = \"SAME_UPPER\", strides = [2, 2]>(x, w)",
     "y=float32[N, 8, floordiv(H + 1, 2), floordiv(W + 1, 2)]"},
    {"conv_valid_symbolic", 13, "float[N,3,H,W] x, float[8,3,3,3] w",
     "y = Conv<auto_pad = \"VALID\">(x, w)", "y=float32[N, 8, H - 2, W - 2]"},
    {"conv_dilations", 13, "float[1,1,7,7] x, float[1,1,3,3] w",
     "y = Conv<dilations = [2, 2]>(x, w)", "y=float32[1, 1, 3, 3]"},
    {"conv_group", 13, "float[1,8,5,5] x, float[16,2,3,3] w", "y = Conv<group = 4>(x, w)",
     "y=float32[1, 16, 3, 3]"},
    {"conv_1d", 13, "float[N,4,L] x, float[6,4,5] w", "y = Conv(x, w)", "y=float32[N, 6, L - 4]"},
    {"conv_transpose", 13, "float[1,1,3,3] x, float[1,2,3,3] w", "y = ConvTranspose(x, w)",
     "y=float32[1, 2, 5, 5]"},
    {"conv_transpose_strides_output_padding", 13, "float[1,1,3,3] x, float[1,2,3,3] w",
     "y = ConvTranspose<strides = [3, 2], output_padding = [1, 1]>(x, w)",
     "y=float32[1, 2, 10, 8]"},
    {"conv_transpose_output_shape", 13, "float[1,1,3,3] x, float[1,2,3,3] w",
     "y = ConvTranspose<strides = [3, 2], output_shape = [10, 8]>(x, w)", "y=float32[1, 2, 10, 8]"},
    {"conv_transpose_symbolic", 13, "float[N,4,H,W] x, float[4,2,3,3] w",
     "y = ConvTranspose<strides = [2, 2], pads = [1, 1, 1, 1]>(x, w)",
     "y=float32[N, 2, H*2 - 1, W*2 - 1]"},
    {"maxpool_ceil_with_indices", 13, "float[1,1,4,4] x",
     "y, i = MaxPool<kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1>(x)",
     "y=float32[1, 1, 2, 2]; i=int64[1, 1, 2, 2]"},
    {"maxpool_same_symbolic", 13, "float[N,C,H,W] x",
     "y = MaxPool<kernel_shape = [2, 2], strides = [2, 2], auto_pad = \"SAME_UPPER\">(x)",
     "y=float32[N, C, floordiv(H + 1, 2), floordiv(W + 1, 2)]"},
    {"averagepool_pads", 13, "float[N,C,32] x",
     "y = AveragePool<kernel_shape = [3], pads = [1, 1]>(x)", "y=float32[N, C, 32]"},
    {"global_average_pool", 13, "float[N,C,H,W] x", "y = GlobalAveragePool(x)",
     "y=float32[N, C, 1, 1]"},
    // Normalisation and matrix products.
    {"batchnorm", 13, "float[N,3,H,W] x, float[3] s, float[3] b, float[3] m, float[3] v",
     "y = BatchNormalization(x, s, b, m, v)", "y=float32[N, 3, H, W]"},
    {"batchnorm_training_outputs", 15,
     "float[N,3,H,W] x, float[3] s, float[3] b, float[3] m, float[3] v",
     "y, rm, rv = BatchNormalization<training_mode = 1>(x, s, b, m, v)",
     "y=float32[N, 3, H, W]; rm=float32[3]; rv=float32[3]"},
    {"instancenorm", 13, "float[N,3,H,W] x, float[3] s, float[3] b",
     "y = InstanceNormalization(x, s, b)", "y=float32[N, 3, H, W]"},
    {"layernorm", 17, "float[B,S,768] x, float[768] s, float[768] b",
     "y, mean, inv = LayerNormalization(x, s, b)",
     "y=float32[B, S, 768]; mean=float32[B, S, 1]; inv=float32[B, S, 1]"},
    {"gemm_transb", 13, "float[N,256] a, float[10,256] b, float[10] c",
     "y = Gemm<transB = 1>(a, b, c)", "y=float32[N, 10]"},
    {"matmul_batched_broadcast", 13, "float[B,1,S,64] a, float[H,64,S] b", "y = MatMul(a, b)",
     "y=float32[B, H, S, S]"},
    {"matmul_vector_left", 13, "float[K] a, float[B,K,N] b", "y = MatMul(a, b)", "y=float32[B, N]"},
    {"matmul_vector_right", 13, "float[B,M,K] a, float[K] b", "y = MatMul(a, b)",
     "y=float32[B, M]"},
    {"einsum_batched", 13, "float[B,I,J] a, float[B,J,K] b",
     "y = Einsum<equation = \"bij,bjk->bik\">(a, b)", "y=float32[B, I, K]"},
    {"einsum_implicit", 13, "float[I,J] a, float[J,K] b", "y = Einsum<equation = \"ij,jk\">(a, b)",
     "y=float32[I, K]"},
    {"einsum_ellipsis_diagonal", 13, "float[B,3,3] a", "y = Einsum<equation = \"...ii->...i\">(a)",
     "y=float32[B, 3]"},
    {"depth_to_space", 13, "float[N,8,H,W] x", "y = DepthToSpace<blocksize = 2>(x)",
     "y=float32[N, 2, H*2, W*2]"},
    {"space_to_depth", 13, "float[1,3,8,6] x", "y = SpaceToDepth<blocksize = 2>(x)",
     "y=float32[1, 12, 4, 3]"},
    {"resize_scales", 13, "float[N,3,H,W] x",
     "sc = Constant<value = float[4] {1.0, 1.0, 2.0, 0.5}>()\n y = Resize(x, , sc)",
     "y=float32[N, 3, H*2, floordiv(W, 2)]"},
    {"resize_sizes", 13, "float[N,3,H,W] x",
     "sz = Constant<value = int64[4] {1, 3, 64, 48}>()\n y = Resize(x, , , sz)",
     "y=float32[1, 3, 64, 48]"},
    {"resize_runtime_sizes", 13, "float[N,3,H,W] x, int64[4] sz", "y = Resize(x, , , sz)",
     "y=float32[?0, ?1, ?2, ?3]", true},
    {"resize_axes_18", 18, "float[N,3,H,W] x",
     "sc = Constant<value = float[2] {2.0, 0.5}>()\n y = Resize<axes = [2, -1]>(x, , sc)",
     "y=float32[N, 3, H*2, floordiv(W, 2)]"},
    {"resize_not_larger_18", 18, "float[N,3,6,9] x",
     "sz = Constant<value = int64[2] {4, 4}>()\n"
     " y = Resize<axes = [2, 3], keep_aspect_ratio_policy = \"not_larger\">(x, , , sz)",
     "y=float32[N, 3, 3, 4]"},
    {"resize_not_smaller_symbolic_18", 18, "float[N,3,H,9] x",
     "sz = Constant<value = int64[2] {4, 4}>()\n"
     " y = Resize<axes = [2, 3], keep_aspect_ratio_policy = \"not_smaller\">(x, , , sz)",
     "y=float32[N, 3, ?0, ?1]", true},
    {"col2im", 18, "float[N,12,9] x",
     "i = Constant<value = int64[2] {6, 7}>()\n b = Constant<value = int64[2] {2, 3}>()\n"
     " y = Col2Im<dilations = [2, 1], pads = [1, 0, 1, 2], strides = [2, 3]>(x, i, b)",
     "y=float32[N, 2, 6, 7]"},
    {"col2im_runtime_image", 18, "float[N,12,L] x, int64[2] i",
     "b = Constant<value = int64[2] {2, 3}>()\n y = Col2Im(x, i, b)", "y=float32[N, 2, ?0, ?1]",
     true},
    {"upsample_9", 9, "float[N,3,4,4] x",
     "sc = Constant<value = float[4] {1.0, 1.0, 2.0, 3.0}>()\n y = Upsample(x, sc)",
     "y=float32[N, 3, 8, 12]"},
    // Shape manipulation.
    {"reshape_constant", 13, "float[2,3,4] x",
     "s = Constant<value = int64[3] {4, 0, -1}>()\n y = Reshape(x, s)", "y=float32[4, 3, 2]"},
    {"reshape_infers_symbolic", 13, "float[B,S,768] x",
     "s = Constant<value = int64[4] {0, 0, 12, -1}>()\n y = Reshape(x, s)",
     "y=float32[B, S, 12, 64]"},
    {"reshape_from_shape_arithmetic", 13, "float[B,S,768] x",
     "s = Shape(x)\n i0 = Constant<value = int64 {0}>()\n i1 = Constant<value = int64 {1}>()\n"
     " b = Gather(s, i0)\n q = Gather(s, i1)\n ax = Constant<value = int64[1] {0}>()\n"
     " b1 = Unsqueeze(b, ax)\n q1 = Unsqueeze(q, ax)\n tail = Constant<value = int64[2] {12, "
     "64}>()\n"
     " shape = Concat<axis = 0>(b1, q1, tail)\n y = Reshape(x, shape)",
     "y=float32[B, S, 12, 64]"},
    {"reshape_merge_heads", 13, "float[B,H,S,64] x",
     "s = Shape(x)\n sl = Constant<value = int64[1] {0}>()\n el = Constant<value = int64[1] "
     "{1}>()\n"
     " st = Constant<value = int64[1] {2}>()\n et = Constant<value = int64[1] {3}>()\n"
     " b = Slice(s, sl, el)\n q = Slice(s, st, et)\n m = Constant<value = int64[1] {-1}>()\n"
     " shape = Concat<axis = 0>(b, q, m)\n y = Reshape(x, shape)",
     "y=float32[B, S, H*64]"},
    {"reshape_runtime_shape", 13, "float[N,4] x, int64[2] s", "y = Reshape(x, s)",
     "y=float32[?0, ?1]", true},
    {"reshape_allowzero", 14, "float[0,4] x",
     "s = Constant<value = int64[2] {4, 0}>()\n y = Reshape<allowzero = 1>(x, s)",
     "y=float32[4, 0]"},
    {"flatten", 13, "float[N,C,H,W] x", "y = Flatten<axis = 2>(x)", "y=float32[C*N, H*W]"},
    {"flatten_axis0", 13, "float[N,3] x", "y = Flatten<axis = 0>(x)", "y=float32[1, N*3]"},
    {"transpose", 13, "float[B,S,H,D] x", "y = Transpose<perm = [0, 2, 1, 3]>(x)",
     "y=float32[B, H, S, D]"},
    {"transpose_default_reverses", 13, "float[A,B,C] x", "y = Transpose(x)", "y=float32[C, B, A]"},
    {"squeeze_attr", 11, "float[N,1,4,1] x", "y = Squeeze<axes = [1, -1]>(x)", "y=float32[N, 4]"},
    {"squeeze_input", 13, "float[N,1,4] x",
     "a = Constant<value = int64[1] {1}>()\n y = Squeeze(x, a)", "y=float32[N, 4]"},
    {"squeeze_no_axes", 13, "float[1,N,1,4] x", "y = Squeeze(x)", "y=float32[N, 4]"},
    {"unsqueeze", 13, "float[3,4] x",
     "a = Constant<value = int64[2] {0, -1}>()\n y = Unsqueeze(x, a)", "y=float32[1, 3, 4, 1]"},
    {"unsqueeze_11", 11, "float[3,4] x", "y = Unsqueeze<axes = [1]>(x)", "y=float32[3, 1, 4]"},
    {"concat", 13, "float[N,3] a, float[N,5] b", "y = Concat<axis = 1>(a, b)", "y=float32[N, 8]"},
    {"concat_symbolic_axis", 13, "float[N,3] a, float[M,3] b", "y = Concat<axis = 0>(a, b)",
     "y=float32[M + N, 3]"},
    {"split_equal", 13, "float[N,6] x", "a, b, c = Split<axis = 1>(x)",
     "a=float32[N, 2]; b=float32[N, 2]; c=float32[N, 2]"},
    {"split_input", 13, "float[N,6] x",
     "s = Constant<value = int64[2] {2, 4}>()\n a, b = Split<axis = 1>(x, s)",
     "a=float32[N, 2]; b=float32[N, 4]"},
    {"split_attr", 11, "float[6,N] x", "a, b = Split<split = [1, 5]>(x)",
     "a=float32[1, N]; b=float32[5, N]"},
    {"split_symbolic", 13, "float[B,S,H3] x", "q, k, v = Split<axis = 2>(x)",
     "q=float32[B, S, floordiv(H3, 3)]; k=float32[B, S, floordiv(H3, 3)]; v=float32[B, S, "
     "floordiv(H3, 3)]"},
    {"slice_constant", 13, "float[N,10] x",
     "s = Constant<value = int64[1] {1}>()\n e = Constant<value = int64[1] {-1}>()\n"
     " a = Constant<value = int64[1] {1}>()\n y = Slice(x, s, e, a)",
     "y=float32[N, 8]"},
    {"slice_symbolic_to_end", 13, "float[N,10] x",
     "s = Constant<value = int64[1] {1}>()\n e = Constant<value = int64[1] "
     "{9223372036854775807}>()\n"
     " a = Constant<value = int64[1] {0}>()\n y = Slice(x, s, e, a)",
     "y=float32[max(0, N - 1), 10]"},
    {"slice_symbolic_last", 13, "float[B,S,D] x",
     "s = Constant<value = int64[1] {-1}>()\n e = Constant<value = int64[1] "
     "{9223372036854775807}>()\n"
     " a = Constant<value = int64[1] {1}>()\n y = Slice(x, s, e, a)",
     "y=float32[B, min(1, S), D]"},
    {"slice_reverse", 13, "float[4,10] x",
     "s = Constant<value = int64[1] {-1}>()\n e = Constant<value = int64[1] "
     "{-9223372036854775807}>()\n"
     " a = Constant<value = int64[1] {1}>()\n t = Constant<value = int64[1] {-1}>()\n y = Slice(x, "
     "s, e, a, t)",
     "y=float32[4, 10]"},
    {"slice_steps", 13, "float[20] x",
     "s = Constant<value = int64[1] {1}>()\n e = Constant<value = int64[1] {18}>()\n"
     " a = Constant<value = int64[1] {0}>()\n t = Constant<value = int64[1] {3}>()\n y = Slice(x, "
     "s, e, a, t)",
     "y=float32[6]"},
    {"slice_clamps", 13, "float[5] x",
     "s = Constant<value = int64[1] {-100}>()\n e = Constant<value = int64[1] {100}>()\n y = "
     "Slice(x, s, e)",
     "y=float32[5]"},
    {"slice_attrs_9", 9, "float[N,10] x", "y = Slice<starts = [2], ends = [5], axes = [1]>(x)",
     "y=float32[N, 3]"},
    {"slice_runtime_bounds", 13, "float[N,10] x, int64[1] s, int64[1] e",
     "a = Constant<value = int64[1] {1}>()\n y = Slice(x, s, e, a)", "y=float32[N, ?0]", true},
    {"expand", 13, "float[3,1] x", "s = Constant<value = int64[3] {2, 1, 6}>()\n y = Expand(x, s)",
     "y=float32[2, 3, 6]"},
    {"expand_to_shape_of", 13, "float[1,4] x, float[N,1] z", "s = Shape(z)\n y = Expand(x, s)",
     "y=float32[N, 4]"},
    {"tile", 13, "float[N,3] x", "r = Constant<value = int64[2] {2, 2}>()\n y = Tile(x, r)",
     "y=float32[N*2, 6]"},
    {"pad_11", 13, "float[N,3,H,W] x",
     "p = Constant<value = int64[8] {0, 0, 1, 2, 0, 0, 1, 2}>()\n y = Pad(x, p)",
     "y=float32[N, 3, H + 2, W + 4]"},
    {"pad_2", 9, "float[N,3] x", "y = Pad<pads = [0, 1, 0, -1]>(x)", "y=float32[N, 3]"},
    {"shape", 13, "float[N,3,H] x", "y = Shape(x)", "y=int64[3]"},
    {"shape_start", 15, "float[N,3,H] x", "y = Shape<start = 1>(x)", "y=int64[2]"},
    {"size", 13, "float[N,3] x", "y = Size(x)", "y=int64[]"},
    {"constant_of_shape", 13, "float[N,3] x", "s = Shape(x)\n y = ConstantOfShape(s)",
     "y=float32[N, 3]"},
    {"constant_of_shape_int", 13, "float[N,3] x",
     "s = Shape(x)\n y = ConstantOfShape<value = int64[1] {1}>(s)", "y=int64[N, 3]"},
    {"range_constant", 13, "float[N] x",
     "a = Constant<value = int64 {0}>()\n b = Constant<value = int64 {10}>()\n c = Constant<value "
     "= int64 {3}>()\n"
     " y = Range(a, b, c)",
     "y=int64[4]"},
    {"range_symbolic", 13, "float[N,S] x",
     "s = Shape(x)\n i = Constant<value = int64 {1}>()\n n = Gather(s, i)\n a = Constant<value = "
     "int64 {0}>()\n"
     " y = Range(a, n, i)",
     "y=int64[S]"},
    {"range_float", 13, "float[1] x",
     "a = Constant<value = float {1.0}>()\n b = Constant<value = float {2.5}>()\n c = "
     "Constant<value = float {0.5}>()\n"
     " y = Range(a, b, c)",
     "y=float32[3]"},
    {"constant_ints", 13, "float[1] x", "y = Constant<value_ints = [1, 2, 3]>()", "y=int64[3]"},
    {"constant_float", 13, "float[1] x", "y = Constant<value_float = 2.0>()", "y=float32[]"},
    {"eyelike", 13, "float[N,N] x", "y = EyeLike<dtype = 7>(x)", "y=int64[N, N]"},
    {"identity", 13, "int8[N] x", "y = Identity(x)", "y=int8[N]"},
    // Indexing and data-dependent ops.
    {"gather_axis1", 13, "float[N,10,4] x, int64[2,3] i", "y = Gather<axis = 1>(x, i)",
     "y=float32[N, 2, 3, 4]"},
    {"gather_scalar", 13, "float[N,10,4] x, int64 i", "y = Gather<axis = 1>(x, i)",
     "y=float32[N, 4]"},
    {"gather_elements", 13, "float[N,4] x, int64[N,2] i", "y = GatherElements<axis = 1>(x, i)",
     "y=float32[N, 2]"},
    {"gather_nd", 13, "float[2,3,4] x, int64[5,2] i", "y = GatherND(x, i)", "y=float32[5, 4]"},
    {"gather_nd_batch", 13, "float[2,3,4] x, int64[2,1] i", "y = GatherND<batch_dims = 1>(x, i)",
     "y=float32[2, 4]"},
    {"scatter_elements", 13, "float[N,4] x, int64[N,2] i, float[N,2] u",
     "y = ScatterElements<axis = 1>(x, i, u)", "y=float32[N, 4]"},
    {"scatter_nd", 13, "float[N,4] x, int64[3,1] i, float[3,4] u", "y = ScatterND(x, i, u)",
     "y=float32[N, 4]"},
    {"onehot", 13, "int64[N] i, float[2] v",
     "d = Constant<value = int64[1] {10}>()\n y = OneHot(i, d, v)", "y=float32[N, 10]"},
    {"onehot_axis0", 13, "int64[N] i, float[2] v",
     "d = Constant<value = float {5.0}>()\n y = OneHot<axis = 0>(i, d, v)", "y=float32[5, N]"},
    {"nonzero", 13, "float[N,4] x", "y = NonZero(x)", "y=int64[2, ?0]", true},
    {"topk_constant_k", 13, "float[N,10] x",
     "k = Constant<value = int64[1] {3}>()\n v, i = TopK(x, k)", "v=float32[N, 3]; i=int64[N, 3]"},
    {"topk_runtime_k", 13, "float[N,10] x, int64[1] k", "v, i = TopK(x, k)",
     "v=float32[N, ?0]; i=int64[N, ?0]", true},
    {"topk_attr_9", 9, "float[N,10] x", "v, i = TopK<k = 2, axis = 0>(x)",
     "v=float32[2, 10]; i=int64[2, 10]"},
    {"cumsum", 13, "float[N,4] x, int32 a", "y = CumSum(x, a)", "y=float32[N, 4]"},
    {"trilu", 14, "float[N,4,4] x", "y = Trilu<upper = 0>(x)", "y=float32[N, 4, 4]"},
    {"compress", 13, "float[N,4] x, bool[4] c", "y = Compress<axis = 1>(x, c)", "y=float32[N, ?0]",
     true},
    {"unique", 13, "float[N] x", "y, i, inv, cnt = Unique(x)",
     "y=float32[?0]; i=int64[?0]; inv=int64[N]; cnt=int64[?0]", true},
    // Reductions.
    {"reduce_mean_keepdims", 13, "float[B,S,768] x", "y = ReduceMean<axes = [-1]>(x)",
     "y=float32[B, S, 1]"},
    {"reduce_max_no_keepdims", 13, "float[B,S,768] x",
     "y = ReduceMax<axes = [1, 2], keepdims = 0>(x)", "y=float32[B]"},
    {"reduce_sum_axes_input", 13, "float[B,S,768] x",
     "a = Constant<value = int64[1] {1}>()\n y = ReduceSum(x, a)", "y=float32[B, 1, 768]"},
    {"reduce_sum_all", 13, "float[B,S] x", "y = ReduceSum(x)", "y=float32[1, 1]"},
    {"reduce_sum_noop", 13, "float[B,S] x",
     "a = Constant<value = int64[0] {}>()\n y = ReduceSum<noop_with_empty_axes = 1>(x, a)",
     "y=float32[B, S]"},
    {"reduce_sum_noop_no_axes", 13, "float[B,S] x",
     "y = ReduceSum<noop_with_empty_axes = 1, keepdims = 0>(x)", "y=float32[B, S]"},
    {"reduce_max_18_noop_no_axes", 18, "float[B,S] x", "y = ReduceMax<noop_with_empty_axes = 1>(x)",
     "y=float32[B, S]"},
    {"reduce_sum_11_attr", 11, "float[B,S] x", "y = ReduceSum<axes = [0], keepdims = 0>(x)",
     "y=float32[S]"},
    {"reduce_l2", 13, "float[B,S] x", "y = ReduceL2<axes = [1]>(x)", "y=float32[B, 1]"},
    {"reduce_runtime_axes_keepdims", 13, "float[B,S] x, int64[1] a", "y = ReduceSum(x, a)",
     "y=float32[?0, ?1]", true},
    {"argmax", 13, "float[B,S,V] x", "y = ArgMax<axis = -1, keepdims = 0>(x)", "y=int64[B, S]"},
    {"argmin_keepdims", 13, "float[B,S,V] x", "y = ArgMin<axis = 1>(x)", "y=int64[B, 1, V]"},
    // Control flow.
    {"if_same_shapes", 13, "bool c, float[N,4] x",
     "y = If(c) <then_branch = t () => (float[N,4] a) { a = Relu(x) }, else_branch = e () => "
     "(float[N,4] b) { b = Neg(x) }>",
     "y=float32[N, 4]"},
    {"if_different_dims", 13, "bool c, float[N,4] x, float[M,4] z",
     "y = If(c) <then_branch = t () => (float[N,4] a) { a = Relu(x) }, else_branch = e () => "
     "(float[M,4] b) { b = Neg(z) }>",
     "y=float32[?0, 4]", true},
    {"loop_for_scan", 13, "float[2] x",
     "m = Constant<value = int64 {5}>()\n"
     " v, s = Loop(m, , x) <body = b (int64 i, bool c, float[2] vi) => (bool co, float[2] vo, "
     "float[2] so) {\n"
     "   co = Identity(c)\n vo = Add(vi, vi)\n so = Identity(vo) }>",
     "v=float32[2]; s=float32[5, 2]"},
    {"loop_while_grows", 13, "float[1] x, bool cond",
     "m = Constant<value = int64 {5}>()\n"
     " v = Loop(m, cond, x) <body = b (int64 i, bool c, float[1] vi) => (bool co, vo) {\n"
     "   co = Identity(c)\n vo = Concat<axis = 0>(vi, vi) }>",
     "v=float32[?0]", true},
};

BOOST_DATA_TEST_CASE(shape_rules_give_known_answers, data::make(kRuleCases), c) {
  std::vector<std::pair<std::string, std::string>> expect = ParseExpect(c.expect);
  std::string text = ModelText(c.opset, c.inputs, c.body, expect);
  StatusOr<Graph> g = testing::InferText(text);
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString() << "\n" << text);
  for (const auto& [name, type] : expect) BOOST_TEST(testing::TypeOf(*g, name) == type, name);
  const Node& last = g->node(g->num_nodes() - 1);
  BOOST_TEST(last.data_dependent_shape == c.data_dependent);
}

// ---- Rule errors -------------------------------------------------------------------------------

struct ErrorCase {
  const char* name;
  int opset;
  const char* inputs;
  const char* body;
  StatusCode code;
  const char* message;  // the whole message
};
std::ostream& operator<<(std::ostream& os, const ErrorCase& c) { return os << c.name; }

const ErrorCase kErrorCases[] = {
    {"broadcast", 13, "float[N,4] a, float[3] b", "y = Add(a, b)", StatusCode::kInvalidFormat,
     "node 'Add_0' (Add): cannot broadcast [N, 4] with [3]"},
    {"dtype_mismatch", 13, "float[4] a, int64[4] b", "y = Add(a, b)", StatusCode::kInvalidFormat,
     "node 'Add_0' (Add): input 1 'b' has dtype int64, expected float32 like input 0 'a'"},
    {"op_dtype", 13, "int64[4] a", "y = Sigmoid(a)", StatusCode::kUnsupported,
     "node 'Sigmoid_0' (Sigmoid): input 0 'a' has dtype int64; Sigmoid accepts float32, float16, "
     "bfloat16, float64"},
    {"conv_channels", 13, "float[1,3,8,8] x, float[4,2,3,3] w", "y = Conv(x, w)",
     StatusCode::kInvalidFormat,
     "node 'Conv_0' (Conv): input channels vs W channels * group: 3 vs 2"},
    {"conv_input_count", 13, "float[1,3,8,8] x", "y = Conv(x)", StatusCode::kInvalidFormat,
     "node 'Conv_0' (Conv): has 1 inputs, expected 2 to 3"},
    {"conv_too_small", 13, "float[1,1,2,2] x, float[1,1,3,3] w", "y = Conv(x, w)",
     StatusCode::kInvalidFormat,
     "node 'Conv_0' (Conv): spatial dim 0: padded input 2 is smaller than the kernel extent 3"},
    {"matmul_inner", 13, "float[2,3] a, float[4,5] b", "y = MatMul(a, b)",
     StatusCode::kInvalidFormat,
     "node 'MatMul_0' (MatMul): inner dims of [2, 3] and [4, 5]: 3 vs 4"},
    {"gemm_inner", 13, "float[2,3] a, float[4,5] b", "y = Gemm(a, b)", StatusCode::kInvalidFormat,
     "node 'Gemm_0' (Gemm): inner dims of A [2, 3] and B [4, 5]: 3 vs 4"},
    {"concat_rank", 13, "float[2,3] a, float[3] b", "y = Concat<axis = 0>(a, b)",
     StatusCode::kInvalidFormat,
     "node 'Concat_0' (Concat): input 1 has shape [3], rank 2 expected like [2, 3]"},
    {"concat_dims", 13, "float[2,3] a, float[2,4] b", "y = Concat<axis = 0>(a, b)",
     StatusCode::kInvalidFormat,
     "node 'Concat_0' (Concat): input 1 [2, 4] dim 1 differs from [2, 3]: 3 vs 4"},
    {"reshape_count", 13, "float[2,3] x",
     "s = Constant<value = int64[2] {4, 2}>()\n y = Reshape(x, s)", StatusCode::kInvalidFormat,
     "node 'Reshape_1' (Reshape): cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)"},
    {"reshape_two_minus_one", 13, "float[2,3] x",
     "s = Constant<value = int64[2] {-1, -1}>()\n y = Reshape(x, s)", StatusCode::kInvalidFormat,
     "node 'Reshape_1' (Reshape): shape [-1, -1] has more than one -1"},
    {"reshape_not_multiple", 13, "float[2,3] x",
     "s = Constant<value = int64[2] {4, -1}>()\n y = Reshape(x, s)", StatusCode::kInvalidFormat,
     "node 'Reshape_1' (Reshape): cannot reshape [2, 3] to [4, -1]: 6 elements are not a multiple "
     "of 4"},
    {"transpose_perm", 13, "float[2,3] x", "y = Transpose<perm = [0, 0]>(x)",
     StatusCode::kInvalidFormat,
     "node 'Transpose_0' (Transpose): perm [0, 0] is not a permutation of rank 2"},
    {"squeeze_non_one", 13, "float[2,3] x",
     "a = Constant<value = int64[1] {0}>()\n y = Squeeze(x, a)", StatusCode::kInvalidFormat,
     "node 'Squeeze_1' (Squeeze): cannot squeeze dim 0 of [2, 3]: it is not 1"},
    {"squeeze_runtime_axes_too_many", 13, "float[2,1] x, int64[3] a", "y = Squeeze(x, a)",
     StatusCode::kInvalidFormat, "node 'Squeeze_0' (Squeeze): more axes than dims"},
    {"gather_axis", 13, "float[2,3] x, int64 i", "y = Gather<axis = 2>(x, i)",
     StatusCode::kInvalidFormat, "node 'Gather_0' (Gather): axis 2 is out of range for rank 2"},
    {"split_uneven", 13, "float[2,7] x", "a, b = Split<axis = 1>(x)", StatusCode::kInvalidFormat,
     "node 'Split_0' (Split): dim 1 of [2, 7] does not split into 2 equal parts"},
    {"split_sizes", 13, "float[2,7] x",
     "s = Constant<value = int64[2] {3, 3}>()\n a, b = Split<axis = 1>(x, s)",
     StatusCode::kInvalidFormat,
     "node 'Split_1' (Split): split sizes add up to 6, dim 1 is 7: 6 vs 7"},
    {"attribute_type", 13, "float[2,3] x", "y = Softmax<axis = 1.5>(x)", StatusCode::kInvalidFormat,
     "node 'Softmax_0' (Softmax): attribute 'axis' is float, expected int"},
    {"missing_required_attribute", 13, "float[2,3] x", "y = Cast(x)", StatusCode::kInvalidFormat,
     "node 'Cast_0' (Cast): required attribute 'to' is missing"},
    {"cast_to_string", 13, "float[2,3] x", "y = Cast<to = 8>(x)", StatusCode::kUnsupported,
     "node 'Cast_0' (Cast): element type STRING is not supported by kiln"},
    {"reshape_runtime_rank", 13, "float[2,3] x, int64[R] s", "y = Reshape(x, s)",
     StatusCode::kUnsupported,
     "node 'Reshape_0' (Reshape): shape has run-time length R, so the output rank is unknown"},
    {"if_branch_dtypes", 13, "bool c, float[4] x, int64[4] z",
     "y = If(c) <then_branch = t () => (a) { a = Relu(x) }, else_branch = e () => (b) { b = Neg(z) "
     "}>",
     StatusCode::kInvalidFormat,
     "node 'If_0' (If): output 0 has dtype float32 on one path and int64 on the other"},
    {"error_inside_a_branch", 13, "bool c, float[4] x, float[3] z",
     "y = If(c) <then_branch = t () => (a) { a = Add(x, z) }, else_branch = e () => (b) { b = "
     "Neg(x) }>",
     StatusCode::kInvalidFormat,
     "node 'If_0' (If) subgraph 't': node 'Add_0' (Add): cannot broadcast [4] with [3]"},
    {"depth_to_space_channels", 13, "float[1,6,2,2] x", "y = DepthToSpace<blocksize = 2>(x)",
     StatusCode::kInvalidFormat,
     "node 'DepthToSpace_0' (DepthToSpace): channels 6 is not divisible by 4"},
};

BOOST_DATA_TEST_CASE(shape_rule_errors_name_the_node, data::make(kErrorCases), c) {
  std::string text = ModelText(c.opset, c.inputs, c.body, {{"y", ""}});
  if (std::string(c.body).find("a, b =") != std::string::npos)
    text = ModelText(c.opset, c.inputs, c.body, {{"a", ""}, {"b", ""}});
  StatusOr<Graph> g = testing::InferText(text);
  BOOST_TEST_REQUIRE(!g.ok(), text);
  BOOST_TEST(g.status().code() == c.code, g.status().ToString());
  BOOST_TEST(g.status().message() == c.message);
}

}  // namespace
}  // namespace kiln::compiler
