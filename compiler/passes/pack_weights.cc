// Weight prepacking for the JIT's GEMM (see pack_weights.h).
#include "compiler/passes/pack_weights.h"

#include <cstring>
#include <map>
#include <memory>
#include <optional>
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

// A 2-D f32 matrix known at compile time (an initializer, a node output shape inference
// folded, e.g. an Identity of a shared initializer, or a subgraph's capture of either), or null.
// A capture's data is its outer value's: a Loop body reads it unchanged on every iteration.
const TensorData* ConstantMatrix(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const Value& val = g.value(v);
  if (val.kind == ValueKind::kGraphInput || !val.data || val.data->dtype() != DType::kF32 ||
      val.data->dims().size() != 2)
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

// How one product reads its constant B.
struct PackKey {
  bool trans_b = false;
  float alpha = 1.0f;
  bool drop_c = false;
};

// The packing of a MatMul / Gemm node, or nullopt when it is not rewritten (see the header).
std::optional<PackKey> Packable(const Graph& g, const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return std::nullopt;
  bool matmul = n.op_type == "MatMul", gemm = n.op_type == "Gemm";
  if (!(matmul || gemm) || n.inputs.size() < 2 || n.outputs.empty() || n.outputs[0] == kNoValue)
    return std::nullopt;
  const Value& a = g.value(n.inputs[0]);
  const Value& y = g.value(n.outputs[0]);
  if (a.dtype != DType::kF32 || y.dtype != DType::kF32 || !a.shape || a.shape->size() < 2)
    return std::nullopt;
  if (a.kind == ValueKind::kConstant) return std::nullopt;  // folding's business
  const TensorData* b = ConstantMatrix(g, n.inputs[1]);
  if (b == nullptr) return std::nullopt;
  PackKey key;
  if (gemm) {
    if (IntAttr(n, "transA", 0) != 0) return std::nullopt;
    key.trans_b = IntAttr(n, "transB", 0) != 0;
    key.alpha = FloatAttr(n, "alpha", 1.0f);
    float beta = FloatAttr(n, "beta", 1.0f);
    bool has_c = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    if (has_c && beta != 1.0f && beta != 0.0f) return std::nullopt;
    key.drop_c = has_c && beta == 0.0f;
  }
  // n = 1 is a matrix-vector product: the lowering's dot-product path is better.
  if (b->dims()[key.trans_b ? 0 : 1] < 2) return std::nullopt;
  return key;
}

// B [K, N] (or [N, K] with trans_b) times alpha, as [ceil(N / cols), K, cols] panels.
StatusOr<std::shared_ptr<const TensorData>> PackPanels(const TensorData& b, const PackKey& key,
                                                       int64_t cols) {
  const int64_t k = b.dims()[key.trans_b ? 1 : 0], n = b.dims()[key.trans_b ? 0 : 1];
  const int64_t panels = (n + cols - 1) / cols;
  std::vector<float> data(static_cast<size_t>(panels * k * cols), 0.0f);
  const float* src = static_cast<const float*>(b.data());
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t jj = 0; jj < cols && p * cols + jj < n; ++jj) {
        int64_t j = p * cols + jj;
        float v = key.trans_b ? src[j * k + kk] : src[kk * n + j];
        data[static_cast<size_t>((p * k + kk) * cols + jj)] = key.alpha * v;
      }
  return TensorData::Copy(DType::kF32, {panels, k, cols}, data.data(),
                          data.size() * sizeof(float));
}

// One run over a graph and its subgraphs. A matrix is packed once per (data, transB, alpha)
// whichever graph reads it; each graph gets its own constant value for it.
class Packer {
 public:
  Packer(int64_t cols, PackWeightsStats& st) : cols_(cols), st_(st) {}

  Status Run(Graph& g, const std::set<NodeId>& skip) {
    std::map<std::tuple<ValueId, bool, float>, ValueId> values;  // (B, transB, alpha) -> Bp
    bool rewrote = false;
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      if (skip.count(id)) continue;
      RETURN_IF_ERROR(IntoSubgraphs(g.mutable_node(id)));
      std::optional<PackKey> key = Packable(g, g.node(id));
      if (!key) continue;
      const ValueId b = g.node(id).inputs[1];
      auto it = values.find({b, key->trans_b, key->alpha});
      if (it == values.end()) {
        ASSIGN_OR_RETURN(ValueId bp, PackedValue(g, b, *key));
        it = values.emplace(std::make_tuple(b, key->trans_b, key->alpha), bp).first;
      }
      Rewrite(g, id, it->second, *key);
      rewrote = true;
    }
    if (rewrote) {
      std::map<std::string, int64_t> imports = g.opset_imports();
      imports[kKilnDomain] = 1;
      g.set_opset_imports(std::move(imports));
    }
    return Status::Ok();
  }

 private:
  // Loop / Scan bodies and If branches: their products with a captured constant are packed
  // here, at compile time, instead of packing B on every call (every iteration of a loop).
  Status IntoSubgraphs(Node& node) {
    for (auto& [name, attr] : node.attributes) {
      if (attr.type() != Attribute::Type::kGraph || !attr.graph()) continue;
      RETURN_IF_ERROR(Run(*attr.graph(), {}).WithContext(node.Describe() + " subgraph '" +
                                                         name + "'"));
    }
    return Status::Ok();
  }

  // A new constant of `g` holding B's panels (shared with any other graph packing the same B).
  StatusOr<ValueId> PackedValue(Graph& g, ValueId b, const PackKey& key) {
    const Value& bv = g.value(b);
    auto cache_key = std::make_tuple(bv.data.get(), key.trans_b, key.alpha);
    auto it = data_.find(cache_key);
    if (it == data_.end()) {
      ASSIGN_OR_RETURN(std::shared_ptr<const TensorData> td, PackPanels(*bv.data, key, cols_));
      st_.packed_bytes += static_cast<int64_t>(td->num_elements() * sizeof(float));
      it = data_.emplace(cache_key, std::move(td)).first;
    }
    const std::shared_ptr<const TensorData>& td = it->second;
    ASSIGN_OR_RETURN(ValueId v, g.AddValue(UniqueValueName(g, bv.name + "_packed"),
                                           ValueKind::kConstant));
    Value& pv = g.mutable_value(v);
    pv.dtype = DType::kF32;
    pv.shape = SymbolicShape(td->dims().begin(), td->dims().end());
    pv.data = td;
    return v;
  }

  void Rewrite(Graph& g, NodeId id, ValueId bp, const PackKey& key) {
    const ValueId b = g.node(id).inputs[1];
    const int64_t n = g.value(b).data->dims()[key.trans_b ? 0 : 1];
    const bool matmul = g.node(id).op_type == "MatMul";
    g.SetNodeInput(id, 1, bp);
    if (key.drop_c) g.SetNodeInput(id, 2, kNoValue);
    Node& m = g.mutable_node(id);
    m.op_type = "PackedMatMul";
    m.domain = kKilnDomain;
    m.attributes.clear();
    m.attributes.emplace("n", Attribute::Int(n));
    (matmul ? st_.matmuls : st_.gemms) += 1;
  }

  const int64_t cols_;
  PackWeightsStats& st_;
  std::map<std::tuple<const TensorData*, bool, float>, std::shared_ptr<const TensorData>> data_;
};

}  // namespace

Status PackMatMulWeights(Graph& graph, int64_t cols, const std::set<NodeId>& skip,
                         PackWeightsStats* stats) {
  if (cols < 1) return InvalidArgument("PackMatMulWeights: panel width " + std::to_string(cols));
  PackWeightsStats local;
  Packer packer(cols, stats ? *stats : local);
  return packer.Run(graph, skip);
}

}  // namespace kiln::compiler
