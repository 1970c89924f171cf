#include "external/onednn/rules.h"

#include "external/onednn/codegen.h"

namespace kiln::onednn {

compiler::VendorRules Rules() {
  using P = compiler::Pattern;
  compiler::VendorRules r;
  r.vendor = "onednn";
  r.supported = [](const compiler::Graph& g, compiler::NodeId n) { return IsSupported(g, n); };
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
  r.anchor_ops = {"Conv",
                  "ConvTranspose",
                  "MatMul",
                  "Gemm",
                  "MaxPool",
                  "AveragePool",
                  "GlobalAveragePool",
                  "GlobalMaxPool",
                  "Softmax",
                  "LogSoftmax",
                  "LayerNormalization",
                  "BatchNormalization"};
  return r;
}

}  // namespace kiln::onednn
