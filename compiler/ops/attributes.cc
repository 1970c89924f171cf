// Parsing of the attribute structs in attributes.h.
#include "compiler/ops/attributes.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "compiler/ops/node_context.h"

namespace kiln::compiler {
namespace {

std::string IntsText(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// An ints attribute of `n` values, `fill` repeated when it is absent or empty.
StatusOr<std::vector<int64_t>> IntsOrFill(const NodeAttributes& attrs, const char* name,
                                          int64_t fill, size_t n) {
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, attrs.GetInts(name));
  if (!v || v->empty()) return std::vector<int64_t>(n, fill);
  if (v->size() != n)
    return attrs.AttrError(name, IntsText(*v) + " must have " + std::to_string(n) + " values");
  return *v;
}

StatusOr<AutoPad> ParseAutoPad(const NodeAttributes& attrs) {
  ASSIGN_OR_RETURN(std::string s, attrs.GetString("auto_pad", "NOTSET"));
  if (s == "NOTSET") return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  return attrs.AttrError("auto_pad", "unknown value '" + s + "'");
}

// Fills `w` for `spatial` dims; `kernel_from_weights` as in ParseConvAttributes.
Status ParseWindow(const NodeAttributes& attrs, int spatial,
                   const std::optional<std::vector<int64_t>>& kernel_from_weights,
                   WindowAttributes& w) {
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> k, attrs.GetInts("kernel_shape"));
  if (k && kernel_from_weights && *k != *kernel_from_weights) {
    return attrs.AttrError("kernel_shape", IntsText(*k) + " does not match the weights' spatial " +
                                               "dims " + IntsText(*kernel_from_weights));
  }
  if (!k) k = kernel_from_weights;
  if (!k) return attrs.AttrError("kernel_shape", "is required");
  if (k->size() != static_cast<size_t>(spatial)) {
    return attrs.AttrError("kernel_shape", IntsText(*k) + " does not match " +
                                               std::to_string(spatial) + " spatial dims");
  }
  w.kernel = *k;
  ASSIGN_OR_RETURN(w.strides, IntsOrFill(attrs, "strides", 1, spatial));
  ASSIGN_OR_RETURN(w.dilations, IntsOrFill(attrs, "dilations", 1, spatial));
  ASSIGN_OR_RETURN(w.pads, IntsOrFill(attrs, "pads", 0, 2 * spatial));
  ASSIGN_OR_RETURN(w.auto_pad, ParseAutoPad(attrs));
  struct Positive {
    const char* name;
    const std::vector<int64_t>& values;
  };
  for (const Positive& list :
       {Positive{"kernel_shape", w.kernel}, {"strides", w.strides}, {"dilations", w.dilations}}) {
    if (std::any_of(list.values.begin(), list.values.end(), [](int64_t v) { return v <= 0; }))
      return attrs.AttrError(list.name, IntsText(list.values) + " must be positive");
  }
  if (std::any_of(w.pads.begin(), w.pads.end(), [](int64_t v) { return v < 0; }))
    return attrs.AttrError("pads", IntsText(w.pads) + " must be non-negative");
  return Status::Ok();
}

}  // namespace

std::optional<int64_t> ConvAttributes::OutputSize(int i) const {
  if (output_shape.empty()) return std::nullopt;
  size_t offset = output_shape.size() == static_cast<size_t>(spatial()) + 2 ? 2 : 0;
  return output_shape[i + offset];
}

StatusOr<ConvAttributes> ParseConvAttributes(
    const Node& node, int spatial, const std::optional<std::vector<int64_t>>& kernel_from_weights) {
  NodeAttributes attrs(node);
  ConvAttributes c;
  ASSIGN_OR_RETURN(c.group, attrs.GetInt("group", 1));
  if (c.group <= 0) return attrs.AttrError("group", std::to_string(c.group) + " must be positive");
  RETURN_IF_ERROR(ParseWindow(attrs, spatial, kernel_from_weights, c));
  if (node.op_type != "ConvTranspose") return c;
  ASSIGN_OR_RETURN(c.output_padding, IntsOrFill(attrs, "output_padding", 0, spatial));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> shape, attrs.GetInts("output_shape"));
  if (shape && !shape->empty()) {
    // Either the spatial dims only, or the whole output shape.
    if (shape->size() != static_cast<size_t>(spatial) &&
        shape->size() != static_cast<size_t>(spatial) + 2) {
      return attrs.AttrError("output_shape", IntsText(*shape) + " has the wrong length for " +
                                                 std::to_string(spatial) + " spatial dims");
    }
    c.output_shape = *shape;
  }
  return c;
}

StatusOr<PoolAttributes> ParsePoolAttributes(const Node& node, int spatial) {
  NodeAttributes attrs(node);
  PoolAttributes p;
  RETURN_IF_ERROR(ParseWindow(attrs, spatial, std::nullopt, p));
  ASSIGN_OR_RETURN(int64_t ceil_mode, attrs.GetInt("ceil_mode", 0));
  ASSIGN_OR_RETURN(int64_t count_include_pad, attrs.GetInt("count_include_pad", 0));
  ASSIGN_OR_RETURN(p.storage_order, attrs.GetInt("storage_order", 0));
  ASSIGN_OR_RETURN(p.p, attrs.GetInt("p", 2));
  p.ceil_mode = ceil_mode != 0;
  p.count_include_pad = count_include_pad != 0;
  return p;
}

// ---- Resize and Col2Im ---------------------------------------------------------------------

int ResizeAttributes::SlotOf(int d) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == d) return static_cast<int>(i);
  return -1;
}

StatusOr<ResizeAttributes> ParseResizeAttributes(const Node& node, int rank) {
  NodeAttributes attrs(node);
  ResizeAttributes r;
  ASSIGN_OR_RETURN(int64_t antialias, attrs.GetInt("antialias", 0));
  r.antialias = antialias != 0;
  ASSIGN_OR_RETURN(std::string mode, attrs.GetString("mode", "nearest"));
  if (r.antialias && mode != "linear" && mode != "cubic")
    return attrs.AttrError("antialias", "applies to modes linear and cubic only, not " + mode);
  ASSIGN_OR_RETURN(std::string policy, attrs.GetString("keep_aspect_ratio_policy", "stretch"));
  if (policy == "not_larger") {
    r.policy = AspectPolicy::kNotLarger;
  } else if (policy == "not_smaller") {
    r.policy = AspectPolicy::kNotSmaller;
  } else if (policy != "stretch") {
    return attrs.AttrError("keep_aspect_ratio_policy", "unknown value '" + policy + "'");
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, attrs.GetInts("axes"));
  r.axes_given = axes.has_value();
  if (!axes) {
    for (int d = 0; d < rank; ++d) r.axes.push_back(d);
    return r;
  }
  for (int64_t a : *axes) {
    int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank)
      return attrs.AttrError("axes",
                             IntsText(*axes) + " is out of range for rank " + std::to_string(rank));
    if (r.SlotOf(static_cast<int>(d)) >= 0)
      return attrs.AttrError("axes", IntsText(*axes) + " repeats a dim");
    r.axes.push_back(static_cast<int>(d));
  }
  return r;
}

StatusOr<Col2ImAttributes> ParseCol2ImAttributes(const Node& node, int spatial) {
  NodeAttributes attrs(node);
  Col2ImAttributes c;
  ASSIGN_OR_RETURN(c.dilations, IntsOrFill(attrs, "dilations", 1, spatial));
  ASSIGN_OR_RETURN(c.strides, IntsOrFill(attrs, "strides", 1, spatial));
  ASSIGN_OR_RETURN(c.pads, IntsOrFill(attrs, "pads", 0, 2 * spatial));
  for (const char* name : {"dilations", "strides"}) {
    const std::vector<int64_t>& v = name[0] == 'd' ? c.dilations : c.strides;
    if (std::any_of(v.begin(), v.end(), [](int64_t x) { return x <= 0; }))
      return attrs.AttrError(name, IntsText(v) + " must be positive");
  }
  if (std::any_of(c.pads.begin(), c.pads.end(), [](int64_t v) { return v < 0; }))
    return attrs.AttrError("pads", IntsText(c.pads) + " must be non-negative");
  return c;
}

// ---- DFT ----------------------------------------------------------------------------------------

StatusOr<int> DftAxis(const NodeContextBase& ctx, int rank,
                      const std::optional<std::vector<int64_t>>& axis_input) {
  int64_t axis = 1;
  if (ctx.opset() >= 20) {
    if (ctx.has_input(2) && !axis_input)
      return ctx.UnsupportedError("needs the axis input known at compile time");
    axis = axis_input && !axis_input->empty() ? (*axis_input)[0] : -2;
  } else {
    ASSIGN_OR_RETURN(axis, ctx.GetInt("axis", 1));
  }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1)
    return ctx.Error("axis must name a dim other than the last (rank " + std::to_string(rank) +
                     ")");
  return static_cast<int>(axis);
}

// ---- Einsum ---------------------------------------------------------------------------------

std::optional<int> EinsumEquation::Term::EllipsisRank(int rank) const {
  int ell = rank - static_cast<int>(labels.size());
  if (ell < 0 || (!has_ellipsis() && ell != 0)) return std::nullopt;
  return ell;
}

namespace {

// One term: letters and at most one "...". `what` names it in errors.
StatusOr<EinsumEquation::Term> ParseTerm(const NodeAttributes& attrs, const std::string& eq,
                                         const std::string& term, const std::string& what) {
  EinsumEquation::Term t;
  for (size_t c = 0; c < term.size(); ++c) {
    if (term.compare(c, 3, "...") == 0 && !t.has_ellipsis()) {
      t.ellipsis_at = static_cast<int>(t.labels.size());
      c += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(term[c]))) {
      return attrs.AttrError("equation", "'" + eq + "': " + what + " '" + term +
                                             "' has a character that is not a letter");
    }
    t.labels.push_back(term[c]);
  }
  return t;
}

}  // namespace

StatusOr<EinsumEquation> ParseEinsumEquation(const Node& node) {
  NodeAttributes attrs(node);
  EinsumEquation e;
  ASSIGN_OR_RETURN(e.text, attrs.GetString("equation", ""));
  e.text.erase(std::remove(e.text.begin(), e.text.end(), ' '), e.text.end());
  size_t arrow = e.text.find("->");
  std::string lhs = e.text.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != node.inputs.size()) {
    return attrs.AttrError("equation", "'" + e.text + "' has " + std::to_string(terms.size()) +
                                           " operands, the node has " +
                                           std::to_string(node.inputs.size()) + " inputs");
  }
  std::map<char, int> uses;  // sorted: the implicit output's order
  bool any_ellipsis = false;
  for (size_t t = 0; t < terms.size(); ++t) {
    ASSIGN_OR_RETURN(EinsumEquation::Term term,
                     ParseTerm(attrs, e.text, terms[t], "operand " + std::to_string(t)));
    for (char l : term.labels) ++uses[l];
    any_ellipsis = any_ellipsis || term.has_ellipsis();
    e.inputs.push_back(std::move(term));
  }
  if (arrow == std::string::npos) {
    e.implicit_output = true;
    if (any_ellipsis) e.output.ellipsis_at = 0;
    for (const auto& [l, n] : uses)
      if (n == 1) e.output.labels.push_back(l);
    return e;
  }
  ASSIGN_OR_RETURN(e.output, ParseTerm(attrs, e.text, e.text.substr(arrow + 2), "the output"));
  for (char l : e.output.labels) {
    if (!uses.count(l)) {
      return attrs.AttrError("equation", "'" + e.text + "': output label '" + std::string(1, l) +
                                             "' is not an input label");
    }
  }
  return e;
}

}  // namespace kiln::compiler
