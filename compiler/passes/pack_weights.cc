#include "compiler/passes/pack_weights.h"

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::compiler {
namespace {

int64_t IntAttr(const Node& n, const char* name, int64_t fallback) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kInt ? a->i() : fallback;
}

float FloatAttr(const Node& n, const char* name, float fallback) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kFloat ? a->f() : fallback;
}

// A 2-D f32 matrix known at compile time (an initializer, or a node output shape inference
// folded, e.g. an Identity of a shared initializer), or null.
const TensorData* ConstantMatrix(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const Value& val = g.value(v);
  if ((val.kind != ValueKind::kConstant && val.kind != ValueKind::kNodeOutput) || !val.data ||
      val.data->dtype() != DType::kF32 || val.data->dims().size() != 2)
    return nullptr;
  return val.data.get();
}

std::string UniqueValueName(const Graph& g, const std::string& base) {
  if (!g.FindValue(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!g.FindValue(n)) return n;
  }
}

}  // namespace

Status PackMatMulWeights(Graph& graph, int64_t cols, const std::set<NodeId>& skip,
                         PackWeightsStats* stats) {
  if (cols < 1) return InvalidArgument("PackMatMulWeights: panel width " + std::to_string(cols));
  PackWeightsStats local;
  PackWeightsStats& st = stats ? *stats : local;
  std::map<std::tuple<ValueId, bool, float>, ValueId> packed;  // (B, transB, alpha) -> Bp
  bool rewrote = false;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    if (skip.count(id)) continue;
    const Node& n = graph.node(id);
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    bool matmul = n.op_type == "MatMul", gemm = n.op_type == "Gemm";
    if (!(matmul || gemm) || n.inputs.size() < 2 || n.outputs.empty() ||
        n.outputs[0] == kNoValue)
      continue;
    const Value& a = graph.value(n.inputs[0]);
    const Value& y = graph.value(n.outputs[0]);
    if (a.dtype != DType::kF32 || y.dtype != DType::kF32 || !a.shape || a.shape->size() < 2)
      continue;
    if (a.kind == ValueKind::kConstant) continue;  // folding's business
    const TensorData* b = ConstantMatrix(graph, n.inputs[1]);
    if (b == nullptr) continue;
    bool trans_b = false;
    float alpha = 1.0f;
    bool drop_c = false;
    if (gemm) {
      if (IntAttr(n, "transA", 0) != 0) continue;
      trans_b = IntAttr(n, "transB", 0) != 0;
      alpha = FloatAttr(n, "alpha", 1.0f);
      float beta = FloatAttr(n, "beta", 1.0f);
      bool has_c = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
      if (has_c && beta != 1.0f && beta != 0.0f) continue;
      drop_c = has_c && beta == 0.0f;
    }
    const int64_t k = b->dims()[trans_b ? 1 : 0], cols_n = b->dims()[trans_b ? 0 : 1];
    if (cols_n < 2) continue;  // matrix-vector: the lowering's dot-product path is better
    auto key = std::make_tuple(n.inputs[1], trans_b, alpha);
    auto it = packed.find(key);
    if (it == packed.end()) {
      const int64_t panels = (cols_n + cols - 1) / cols;
      std::vector<float> data(static_cast<size_t>(panels * k * cols), 0.0f);
      const float* src = static_cast<const float*>(b->data());
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t jj = 0; jj < cols && p * cols + jj < cols_n; ++jj) {
            int64_t j = p * cols + jj;
            float v = trans_b ? src[j * k + kk] : src[kk * cols_n + j];
            data[static_cast<size_t>((p * k + kk) * cols + jj)] = alpha * v;
          }
      ASSIGN_OR_RETURN(std::shared_ptr<const TensorData> td,
                       TensorData::Copy(DType::kF32, {panels, k, cols}, data.data(),
                                        data.size() * sizeof(float)));
      ASSIGN_OR_RETURN(ValueId v, graph.AddValue(UniqueValueName(graph, graph.value(n.inputs[1]).name +
                                                                            "_packed"),
                                                 ValueKind::kConstant));
      Value& pv = graph.mutable_value(v);
      pv.dtype = DType::kF32;
      pv.shape = SymbolicShape{DimExpr(panels), DimExpr(k), DimExpr(cols)};
      pv.data = td;
      st.packed_bytes += static_cast<int64_t>(data.size() * sizeof(float));
      it = packed.emplace(key, v).first;
    }
    ValueId bp = it->second;
    graph.SetNodeInput(id, 1, bp);
    if (drop_c) graph.SetNodeInput(id, 2, kNoValue);
    Node& m = graph.mutable_node(id);
    m.op_type = "PackedMatMul";
    m.domain = kKilnDomain;
    m.attributes.clear();
    m.attributes.emplace("n", Attribute::Int(cols_n));
    (matmul ? st.matmuls : st.gemms) += 1;
    rewrote = true;
  }
  if (rewrote) {
    std::map<std::string, int64_t> imports = graph.opset_imports();
    imports[kKilnDomain] = 1;
    graph.set_opset_imports(std::move(imports));
  }
  return Status::Ok();
}

}  // namespace kiln::compiler
