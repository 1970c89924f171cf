// The oneDNN vendor's annotation rules (composites, anchors) and their options.
#include "external/onednn/compile/rules.h"

#include "external/onednn/compile/codegen.h"
#include "external/onednn/region.h"

namespace kiln::onednn {

namespace {

// MatMul / Gemm whose B is known at compile time (an initializer or a folded value).
bool IsConstantWeightGemm(const compiler::Graph& g, compiler::NodeId id) {
  const compiler::Node& n = g.node(id);
  if ((n.op_type != "MatMul" && n.op_type != "Gemm") || n.inputs.size() < 2) return false;
  return n.inputs[1] != compiler::kNoValue && g.value(n.inputs[1]).data != nullptr;
}

// "0" / "1" / "false" / "true" -> *out; InvalidArgument naming the key otherwise.
Status ParseBool(const std::string& key, const std::string& value, bool* out) {
  if (value == "1" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "false") {
    *out = false;
  } else {
    return InvalidArgument("onednn option " + key + "=" + value +
                           ": expected 0, 1, false or true");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<RulesOptions> ParseRulesOptions(const compiler::ExternalOptions& options) {
  RulesOptions parsed;
  for (const auto& [key, value] : options) {
    if (key == "constant_weight_gemms") {
      RETURN_IF_ERROR(ParseBool(key, value, &parsed.constant_weight_gemms));
    } else if (key == "regions_without_conv") {
      RETURN_IF_ERROR(ParseBool(key, value, &parsed.regions_without_conv));
    } else {
      return InvalidArgument("onednn option '" + key +
                             "' is unknown (options: constant_weight_gemms, "
                             "regions_without_conv)");
    }
  }
  return parsed;
}

compiler::VendorRules Rules(RulesOptions options) {
  using P = compiler::Pattern;
  compiler::VendorRules r;
  r.vendor = kVendorName;
  r.supported = [options](const compiler::Graph& g, compiler::NodeId n) {
    if (!options.constant_weight_gemms && IsConstantWeightGemm(g, n)) return false;
    return IsSupported(g, n);
  };
  P erf_term =
      P::Op({"Add"}, {P::Op({"Erf"}, {P::Op({"Div", "Mul"}, {P::Any(), P::Any()})}), P::Any()})
          .Commutative();
  // 0.5 * (x * (1 + erf(x / sqrt 2)))
  r.composites.push_back(
      {"gelu_erf", P::Op({"Mul"}, {P::Op({"Mul"}, {P::Any(), erf_term}).Commutative(), P::Any()})
                       .Commutative()});
  // (x * 0.5) * (1 + erf(x / sqrt 2))
  r.composites.push_back(
      {"gelu_erf_scaled_first",
       P::Op({"Mul"}, {P::Op({"Mul"}, {P::Any(), P::Any()}), erf_term}).Commutative()});
  // LayerNorm as exporters decompose it (opset < 17); IsLayerNormRoot checks the constants,
  // axes and that the two Subs / ReduceMeans read the same x.
  P mean = P::Op({"ReduceMean"}, {P::Any()});
  P centered = P::Op({"Sub"}, {P::Any(), mean});
  P var = P::Op({"ReduceMean"}, {P::Op({"Pow"}, {centered, P::Any()})});
  P std_dev = P::Op({"Sqrt"}, {P::Op({"Add"}, {var, P::Any()}).Commutative()});
  r.composites.push_back(
      {"layer_norm",
       P::Op({"Add"},
             {P::Op({"Mul"}, {P::Op({"Div"}, {centered, std_dev}), P::Any()}).Commutative(),
              P::Any()})
           .Commutative()
           .Where([](const compiler::Graph& g, compiler::NodeId n) {
             return IsLayerNormRoot(g, n);
           })});
  // ShuffleNet's channel shuffle, Reshape [N, g, C/g, ...] -> Transpose -> Reshape back (none
  // of them supported alone): one kChannels copy inside the region instead of two boundaries.
  r.composites.push_back(
      {"channel_shuffle",
       P::Op({"Reshape"}, {P::Op({"Transpose"}, {P::Op({"Reshape"}, {P::Any()})})})
           .Where([](const compiler::Graph& g, compiler::NodeId n) {
             return IsShuffleRoot(g, n);
           })});
  // Int8 in the QDQ form: Q(Relu?(Conv / MatMul / Gemm(DQ(x), W, ...))) (IsInt8Root checks
  // the dtypes, scales and constant weights); it anchors a region on its own.
  P int8_anchor = P::Op({"Conv", "MatMul", "Gemm"}, {P::Op({"DequantizeLinear"}, {P::Any()})});
  r.composites.push_back(
      {"int8", P::Op({"QuantizeLinear"}, {P::Op({"Relu"}, {int8_anchor}).Optional()})
                   .Where([](const compiler::Graph& g, compiler::NodeId n) {
                     return IsInt8Root(g, n);
                   })});
  if (options.regions_without_conv) {
    r.anchor_ops = {"Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool",
                    "GlobalAveragePool", "GlobalMaxPool", "Softmax", "LogSoftmax",
                    "LayerNormalization", "BatchNormalization",
                    // Only ever claimed inside a decomposed LayerNorm (never alone).
                    "ReduceMean",
                    // Only ever claimed inside an int8 composite (never alone).
                    "QuantizeLinear"};
  } else {
    r.anchor_ops = {"Conv", "ConvTranspose", "QuantizeLinear"};
    if (options.constant_weight_gemms) r.anchor_ops.insert(r.anchor_ops.end(), {"MatMul", "Gemm"});
  }
  return r;
}

}  // namespace kiln::onednn
