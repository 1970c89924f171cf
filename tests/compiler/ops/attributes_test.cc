// Attribute structs (compiler/ops/attributes.h): defaults, auto_pad, ConvTranspose extras,
// Resize's axes and policy, Col2Im's window, the Einsum equation (ellipsis, implicit output),
// and errors naming the node and the attribute.
#define BOOST_TEST_MODULE attributes_test
#include "compiler/ops/attributes.h"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

namespace data = boost::unit_test::data;

Node MakeNode(const std::string& op, std::map<std::string, Attribute> attrs, int inputs = 1) {
  Node n;
  n.name = "n0";
  n.op_type = op;
  n.inputs.assign(inputs, 0);
  n.outputs = {1};
  n.attributes = std::move(attrs);
  return n;
}

// Requires an InvalidFormat whose message names node n0 and `attr`, and contains `what`.
void ExpectAttrError(const Status& s, const std::string& attr, const std::string& what) {
  BOOST_TEST_REQUIRE(!s.ok());
  BOOST_TEST(s.code() == StatusCode::kInvalidFormat);
  BOOST_TEST(s.message().find("node 'n0'") != std::string::npos, s.message());
  BOOST_TEST(s.message().find("attribute '" + attr + "'") != std::string::npos, s.message());
  BOOST_TEST(s.message().find(what) != std::string::npos, s.message());
}

// ---- Windows ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(conv_defaults_and_kernel_from_weights) {
  Node n = MakeNode("Conv", {}, 2);
  StatusOr<ConvAttributes> c = ParseConvAttributes(n, 2, std::vector<int64_t>{3, 5});
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->kernel == (std::vector<int64_t>{3, 5}));
  BOOST_TEST(c->strides == (std::vector<int64_t>{1, 1}));
  BOOST_TEST(c->dilations == (std::vector<int64_t>{1, 1}));
  BOOST_TEST(c->pads == (std::vector<int64_t>{0, 0, 0, 0}));
  BOOST_TEST((c->auto_pad == AutoPad::kNotSet));
  BOOST_TEST(c->group == 1);
  BOOST_TEST(c->extent(1) == 5);
  BOOST_TEST(c->output_padding.empty());  // Conv has none
}

struct AutoPadCase {
  std::string text;
  AutoPad expected;
  bool same;
};
std::ostream& operator<<(std::ostream& os, const AutoPadCase& c) { return os << c.text; }

BOOST_DATA_TEST_CASE(auto_pad_values,
                     data::make(std::vector<AutoPadCase>{
                         {"NOTSET", AutoPad::kNotSet, false},
                         {"SAME_UPPER", AutoPad::kSameUpper, true},
                         {"SAME_LOWER", AutoPad::kSameLower, true},
                         {"VALID", AutoPad::kValid, false},
                     }),
                     c) {
  Node n = MakeNode("MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})},
                                {"strides", Attribute::Ints({2, 1})},
                                {"dilations", Attribute::Ints({1, 3})},
                                {"auto_pad", Attribute::String(c.text)}});
  StatusOr<PoolAttributes> p = ParsePoolAttributes(n, 2);
  BOOST_TEST_REQUIRE(p.ok(), p.status().ToString());
  BOOST_TEST((p->auto_pad == c.expected));
  BOOST_TEST(p->same() == c.same);
  BOOST_TEST(p->strides == (std::vector<int64_t>{2, 1}));
  BOOST_TEST(p->extent(1) == 4);
}

BOOST_AUTO_TEST_CASE(pool_extras) {
  Node n = MakeNode("AveragePool", {{"kernel_shape", Attribute::Ints({3})},
                                    {"pads", Attribute::Ints({1, 2})},
                                    {"ceil_mode", Attribute::Int(1)},
                                    {"count_include_pad", Attribute::Int(1)}});
  StatusOr<PoolAttributes> p = ParsePoolAttributes(n, 1);
  BOOST_TEST_REQUIRE(p.ok(), p.status().ToString());
  BOOST_TEST(p->pads == (std::vector<int64_t>{1, 2}));
  BOOST_TEST(p->ceil_mode);
  BOOST_TEST(p->count_include_pad);
  BOOST_TEST(p->storage_order == 0);
  BOOST_TEST(p->p == 2);
}

BOOST_AUTO_TEST_CASE(conv_transpose_output_shape) {
  Node n = MakeNode("ConvTranspose",
                    {{"output_shape", Attribute::Ints({1, 8, 10, 12})},
                     {"output_padding", Attribute::Ints({1, 0})},
                     {"group", Attribute::Int(2)}},
                    2);
  StatusOr<ConvAttributes> c = ParseConvAttributes(n, 2, std::vector<int64_t>{3, 3});
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->group == 2);
  BOOST_TEST(c->output_padding == (std::vector<int64_t>{1, 0}));
  BOOST_TEST(*c->OutputSize(0) == 10);  // the whole shape given: spatial dims start at 2
  BOOST_TEST(*c->OutputSize(1) == 12);
  Node spatial_only = MakeNode("ConvTranspose", {{"output_shape", Attribute::Ints({10, 12})}}, 2);
  BOOST_TEST(*ParseConvAttributes(spatial_only, 2, std::vector<int64_t>{3, 3})->OutputSize(0) ==
             10);
}

struct WindowError {
  std::string name;
  std::string op;
  std::map<std::string, Attribute> attrs;
  std::string attr;  // named in the message
  std::string what;  // also in the message
};
std::ostream& operator<<(std::ostream& os, const WindowError& c) { return os << c.name; }

BOOST_DATA_TEST_CASE(
    window_errors,
    data::make(std::vector<WindowError>{
        {"unknown_auto_pad",
         "MaxPool",
         {{"kernel_shape", Attribute::Ints({2})}, {"auto_pad", Attribute::String("SAME")}},
         "auto_pad",
         "unknown value 'SAME'"},
        {"pool_needs_kernel", "MaxPool", {}, "kernel_shape", "is required"},
        {"kernel_rank",
         "MaxPool",
         {{"kernel_shape", Attribute::Ints({2, 2})}},
         "kernel_shape",
         "does not match 1 spatial dims"},
        {"stride_count",
         "AveragePool",
         {{"kernel_shape", Attribute::Ints({2})}, {"strides", Attribute::Ints({1, 1})}},
         "strides",
         "must have 1 values"},
        {"zero_dilation",
         "LpPool",
         {{"kernel_shape", Attribute::Ints({2})}, {"dilations", Attribute::Ints({0})}},
         "dilations",
         "must be positive"},
        {"negative_pad",
         "MaxPool",
         {{"kernel_shape", Attribute::Ints({2})}, {"pads", Attribute::Ints({0, -1})}},
         "pads",
         "must be non-negative"},
        {"pads_type",
         "MaxPool",
         {{"kernel_shape", Attribute::Ints({2})}, {"pads", Attribute::Int(1)}},
         "pads",
         "expected"},
        {"conv_group", "Conv", {{"group", Attribute::Int(0)}}, "group", "must be positive"},
        {"conv_kernel_vs_weights",
         "Conv",
         {{"kernel_shape", Attribute::Ints({5})}},
         "kernel_shape",
         "does not match the weights"},
        {"transpose_output_shape",
         "ConvTranspose",
         {{"output_shape", Attribute::Ints({4, 4})}},
         "output_shape",
         "wrong length"},
        {"transpose_output_padding",
         "ConvTranspose",
         {{"output_padding", Attribute::Ints({0, 0})}},
         "output_padding",
         "must have 1 values"},
    }),
    c) {
  Node n = MakeNode(c.op, c.attrs, c.op[0] == 'C' ? 2 : 1);
  Status s = c.op[0] == 'C' ? ParseConvAttributes(n, 1, std::vector<int64_t>{3}).status()
                            : ParsePoolAttributes(n, 1).status();
  ExpectAttrError(s, c.attr, c.what);
}

// ---- Resize and Col2Im -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(resize_defaults_axes_and_policy) {
  StatusOr<ResizeAttributes> r = ParseResizeAttributes(MakeNode("Resize", {}, 3), 3);
  BOOST_TEST_REQUIRE(r.ok(), r.status().ToString());
  BOOST_TEST(r->axes == (std::vector<int>{0, 1, 2}));
  BOOST_TEST(!r->axes_given);
  BOOST_TEST((r->policy == AspectPolicy::kStretch));
  BOOST_TEST(!r->antialias);
  r = ParseResizeAttributes(
      MakeNode("Resize", {{"axes", Attribute::Ints({-1, 1})},
                          {"keep_aspect_ratio_policy", Attribute::String("not_smaller")},
                          {"mode", Attribute::String("cubic")},
                          {"antialias", Attribute::Int(1)}}),
      4);
  BOOST_TEST_REQUIRE(r.ok(), r.status().ToString());
  BOOST_TEST(r->axes == (std::vector<int>{3, 1}));
  BOOST_TEST(r->SlotOf(1) == 1);
  BOOST_TEST(r->SlotOf(3) == 0);
  BOOST_TEST(r->SlotOf(0) == -1);
  BOOST_TEST((r->policy == AspectPolicy::kNotSmaller));
  BOOST_TEST(r->antialias);
}

BOOST_AUTO_TEST_CASE(resize_and_col2im_errors) {
  auto resize = [](std::map<std::string, Attribute> attrs) {
    return ParseResizeAttributes(MakeNode("Resize", std::move(attrs)), 4).status();
  };
  ExpectAttrError(resize({{"antialias", Attribute::Int(1)}}), "antialias", "linear and cubic");
  ExpectAttrError(resize({{"keep_aspect_ratio_policy", Attribute::String("fit")}}),
                  "keep_aspect_ratio_policy", "unknown value 'fit'");
  ExpectAttrError(resize({{"axes", Attribute::Ints({1, -3})}}), "axes", "repeats a dim");
  ExpectAttrError(resize({{"axes", Attribute::Ints({4})}}), "axes", "out of range for rank 4");
  auto col2im = [](std::map<std::string, Attribute> attrs) {
    return ParseCol2ImAttributes(MakeNode("Col2Im", std::move(attrs), 3), 2).status();
  };
  ExpectAttrError(col2im({{"strides", Attribute::Ints({1, 0})}}), "strides", "must be positive");
  ExpectAttrError(col2im({{"pads", Attribute::Ints({1, 1})}}), "pads", "must have 4 values");
  ExpectAttrError(col2im({{"pads", Attribute::Ints({0, 0, -1, 0})}}), "pads",
                  "must be non-negative");
  StatusOr<Col2ImAttributes> c = ParseCol2ImAttributes(MakeNode("Col2Im", {}, 3), 2);
  BOOST_TEST_REQUIRE(c.ok(), c.status().ToString());
  BOOST_TEST(c->dilations == (std::vector<int64_t>{1, 1}));
  BOOST_TEST(c->pads == (std::vector<int64_t>{0, 0, 0, 0}));
}

// ---- Einsum ----------------------------------------------------------------------------------

std::string Labels(const EinsumEquation::Term& t) {
  std::string s(t.labels.begin(), t.labels.end());
  if (t.has_ellipsis()) s.insert(t.ellipsis_at, "...");
  return s;
}

struct EinsumCase {
  std::string equation;
  int inputs;
  std::vector<std::string> terms;  // operands as parsed (ellipsis re-inserted)
  std::string output;
  bool implicit;
};
std::ostream& operator<<(std::ostream& os, const EinsumCase& c) { return os << c.equation; }

BOOST_DATA_TEST_CASE(einsum_equations,
                     data::make(std::vector<EinsumCase>{
                         {"ij,jk->ik", 2, {"ij", "jk"}, "ik", false},
                         {"b ij, bjk -> bik", 2, {"bij", "bjk"}, "bik", false},
                         {"...ii->...i", 1, {"...ii"}, "...i", false},
                         {"i...j,j...->...", 2, {"i...j", "j..."}, "...", false},
                         // Implicit: "..." first, then labels used once, alphabetically.
                         {"kj,ji", 2, {"kj", "ji"}, "ik", true},
                         {"b...i,bi", 2, {"b...i", "bi"}, "...", true},
                         {"...ij,jk", 2, {"...ij", "jk"}, "...ik", true},
                         {"ii", 1, {"ii"}, "", true},
                     }),
                     c) {
  Node n = MakeNode("Einsum", {{"equation", Attribute::String(c.equation)}}, c.inputs);
  StatusOr<EinsumEquation> e = ParseEinsumEquation(n);
  BOOST_TEST_REQUIRE(e.ok(), e.status().ToString());
  BOOST_TEST_REQUIRE(e->inputs.size() == c.terms.size());
  for (size_t t = 0; t < c.terms.size(); ++t) BOOST_TEST(Labels(e->inputs[t]) == c.terms[t]);
  BOOST_TEST(Labels(e->output) == c.output);
  BOOST_TEST(e->implicit_output == c.implicit);
}

BOOST_AUTO_TEST_CASE(einsum_ellipsis_rank) {
  Node n = MakeNode("Einsum", {{"equation", Attribute::String("a...b,ab->a")}}, 2);
  StatusOr<EinsumEquation> e = ParseEinsumEquation(n);
  BOOST_TEST_REQUIRE(e.ok(), e.status().ToString());
  BOOST_TEST(*e->inputs[0].EllipsisRank(5) == 3);
  BOOST_TEST(*e->inputs[0].EllipsisRank(2) == 0);
  BOOST_TEST(!e->inputs[0].EllipsisRank(1));
  BOOST_TEST(*e->inputs[1].EllipsisRank(2) == 0);
  BOOST_TEST(!e->inputs[1].EllipsisRank(3));  // no "...": extra dims do not fit
}

struct EinsumError {
  std::string equation;
  int inputs;
  std::string what;
};
std::ostream& operator<<(std::ostream& os, const EinsumError& c) { return os << c.equation; }

BOOST_DATA_TEST_CASE(einsum_errors,
                     data::make(std::vector<EinsumError>{
                         {"ij,jk->ik", 3, "has 2 operands, the node has 3 inputs"},
                         {"i1,jk->ik", 2, "operand 0 'i1' has a character that is not a letter"},
                         {"...i...->i", 1, "has a character that is not a letter"},
                         {"ij,jk->iz", 2, "output label 'z' is not an input label"},
                         {"ij->i.", 1, "the output"},
                     }),
                     c) {
  Node n = MakeNode("Einsum", {{"equation", Attribute::String(c.equation)}}, c.inputs);
  ExpectAttrError(ParseEinsumEquation(n).status(), "equation", c.what);
}

}  // namespace
}  // namespace kiln::compiler
