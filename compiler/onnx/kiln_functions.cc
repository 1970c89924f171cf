// Kept function bodies for opset 18-21 ops (see kiln_functions.h), each as ONNX's definition
// of the op states it, in ONNX text syntax with the node's attribute values filled in.
#include "compiler/onnx/kiln_functions.h"

#include <onnx/defs/parser.h>

#include <cstdio>
#include <vector>

namespace kiln::compiler::onnx_import {
namespace {

using Ctx = onnx::FunctionBodyBuildContext;

// A double as ONNX text: enough digits to round-trip.
std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string Ints(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

float FloatAttr(const Ctx& ctx, const char* name, float dflt) {
  const onnx::AttributeProto* a = ctx.getAttribute(name);
  return a ? a->f() : dflt;
}

int64_t IntAttr(const Ctx& ctx, const char* name, int64_t dflt) {
  const onnx::AttributeProto* a = ctx.getAttribute(name);
  return a ? a->i() : dflt;
}

std::string Header(const char* name, const char* ins, int opset) {
  return std::string("<domain: \"kiln\", opset_import: [\"\" : ") + std::to_string(opset) +
         "]>\n" + name + " (" + ins + ") => (Y) {\n";
}

// A scalar constant of X's type: `name` = CastLike(double value, X).
std::string Scalar(const std::string& name, double v) {
  return "  " + name + "_d = Constant <value = double {" + Num(v) + "}> ()\n  " + name +
         " = CastLike (" + name + "_d, X)\n";
}

// Mish-18: x * tanh(softplus(x)).
StatusOr<std::string> Mish(const Ctx&, const std::string&) {
  return Header("Mish", "X", 18) + "  sp = Softplus (X)\n  t = Tanh (sp)\n  Y = Mul (X, t)\n}";
}

// Gelu-20: 0.5 x (1 + erf(x / sqrt 2)), or with approximate="tanh"
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
StatusOr<std::string> Gelu(const Ctx& ctx, const std::string& desc) {
  const onnx::AttributeProto* a = ctx.getAttribute("approximate");
  std::string approximate = a ? a->s() : "none";
  std::string body = Header("Gelu", "X", 20) + Scalar("half", 0.5) + Scalar("one", 1.0);
  if (approximate == "none") {
    body += Scalar("rsqrt2", 0.70710678118654752440) +
            "  xs = Mul (X, rsqrt2)\n  e = Erf (xs)\n  p = Add (one, e)\n";
  } else if (approximate == "tanh") {
    body += Scalar("c", 0.79788456080286535588) + Scalar("k", 0.044715) +
            "  x2 = Mul (X, X)\n  x3 = Mul (x2, X)\n  kx3 = Mul (k, x3)\n  s = Add (X, kx3)\n"
            "  inner = Mul (c, s)\n  t = Tanh (inner)\n  p = Add (one, t)\n";
  } else {
    return InvalidArgument(desc + ": approximate is '" + approximate +
                           "'; ONNX allows 'none' and 'tanh'");
  }
  return body + "  hx = Mul (half, X)\n  Y = Mul (hx, p)\n}";
}

// GroupNormalization: x viewed as (N, G, C/G * spatial) is normalized per (n, g) with epsilon,
// then scaled and shifted: per group at opset 18 (scale and bias have G elements), per channel
// from 21 (C elements), where stash_type (default float) is also the type computed in.
StatusOr<std::string> GroupNorm(const Ctx& ctx, const std::string& desc, int opset) {
  const onnx::AttributeProto* groups = ctx.getAttribute("num_groups");
  if (groups == nullptr) return InvalidArgument(desc + ": num_groups is required");
  if (groups->i() <= 0) return InvalidArgument(desc + ": num_groups must be positive");
  int64_t stash = opset >= 21 ? IntAttr(ctx, "stash_type", 1) : 0;
  std::string body = Header("GroupNormalization", "X0, scale0, bias0", opset);
  if (stash != 0) {
    body += "  X = Cast <to = " + std::to_string(stash) + "> (X0)\n  scale = Cast <to = " +
            std::to_string(stash) + "> (scale0)\n  bias = Cast <to = " + std::to_string(stash) +
            "> (bias0)\n";
  } else {
    body += "  X = Identity (X0)\n  scale = Identity (scale0)\n  bias = Identity (bias0)\n";
  }
  body += "  grouped = Constant <value = int64[3] {" + Ints({0, groups->i(), -1}) + "}> ()\n" +
          "  xg = Reshape (X, grouped)\n  axes = Constant <value = int64[1] {2}> ()\n" +
          "  mean = ReduceMean (xg, axes)\n  d = Sub (xg, mean)\n  d2 = Mul (d, d)\n" +
          "  var = ReduceMean (d2, axes)\n" + Scalar("eps", FloatAttr(ctx, "epsilon", 1e-5f)) +
          "  ve = Add (var, eps)\n  sd = Sqrt (ve)\n  norm = Div (d, sd)\n" +
          "  one = Constant <value = int64[1] {1}> ()\n  s = Unsqueeze (scale, one)\n" +
          "  b = Unsqueeze (bias, one)\n  xshape = Shape (X0)\n";
  if (opset < 21) {
    body += "  ys = Mul (norm, s)\n  yb = Add (ys, b)\n  y = Reshape (yb, xshape)\n";
  } else {
    body += "  chans = Constant <value = int64[3] {0, 0, -1}> ()\n  nx = Reshape (norm, xshape)\n"
            "  nc = Reshape (nx, chans)\n  ys = Mul (nc, s)\n  yb = Add (ys, b)\n"
            "  y = Reshape (yb, xshape)\n";
  }
  return body + "  Y = CastLike (y, X0)\n}";
}

StatusOr<std::string> GroupNorm18(const Ctx& ctx, const std::string& desc) {
  return GroupNorm(ctx, desc, 18);
}
StatusOr<std::string> GroupNorm21(const Ctx& ctx, const std::string& desc) {
  return GroupNorm(ctx, desc, 21);
}

// CenterCropPad-18: along `axes` (default all), a dim larger than the wanted size is cropped
// around its centre (start (d - s) / 2), a smaller one padded with zeros (begin (s - d) / 2,
// the rest at the end).
StatusOr<std::string> CenterCropPad(const Ctx& ctx, const std::string& desc) {
  std::vector<int64_t> axes;
  if (const onnx::AttributeProto* a = ctx.getAttribute("axes")) {
    axes.assign(a->ints().begin(), a->ints().end());
  } else {
    const onnx::TypeProto* t = ctx.getInputType(0);
    if (t == nullptr || !t->tensor_type().has_shape()) return std::string();
    for (int i = 0; i < t->tensor_type().shape().dim_size(); ++i) axes.push_back(i);
  }
  if (axes.empty()) return InvalidArgument(desc + ": no axes to crop or pad");
  return Header("CenterCropPad", "X, shape", 18) + "  axes = Constant <value = int64[" +
         std::to_string(axes.size()) + "] {" + Ints(axes) + "}> ()\n" +
         "  want = Cast <to = 7> (shape)\n  xs = Shape (X)\n  dims = Gather (xs, axes)\n"
         "  zero = Constant <value = int64 {0}> ()\n  two = Constant <value = int64 {2}> ()\n"
         "  diff = Sub (dims, want)\n  crop = Max (diff, zero)\n  start = Div (crop, two)\n"
         "  keep = Min (dims, want)\n  end = Add (start, keep)\n"
         "  cropped = Slice (X, start, end, axes)\n  negd = Neg (diff)\n  pad = Max (negd, zero)\n"
         "  pb = Div (pad, two)\n  pe = Sub (pad, pb)\n  pads = Concat <axis = 0> (pb, pe)\n"
         "  Y = Pad (cropped, pads, , axes)\n}";
}

constexpr KilnFunction kFunctions[] = {
    {"Mish", 18, 21, Mish},
    {"Gelu", 20, 21, Gelu},
    {"GroupNormalization", 18, 20, GroupNorm18},
    {"GroupNormalization", 21, 21, GroupNorm21},
    {"CenterCropPad", 18, 21, CenterCropPad},
};

}  // namespace

const KilnFunction* FindKilnFunction(std::string_view op_type, int64_t opset) {
  for (const KilnFunction& f : kFunctions) {
    if (op_type == f.op_type && f.since_version <= opset && opset <= f.until_version) return &f;
  }
  return nullptr;
}

StatusOr<onnx::FunctionProto> ParseKilnFunction(const std::string& text, const std::string& desc) {
  onnx::FunctionProto f;
  onnx::Common::Status s = onnx::OnnxParser::Parse(f, text.c_str());
  if (!s.IsOK()) {
    return Internal(desc + ": kiln's function body does not parse: " + s.ErrorMessage());
  }
  return f;
}

}  // namespace kiln::compiler::onnx_import
