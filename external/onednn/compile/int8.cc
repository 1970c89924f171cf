// The oneDNN codegen's int8 matcher: DequantizeLinear -> Conv / MatMul / Gemm (-> Relu) ->
// QuantizeLinear in the QDQ form, with the operand conditions oneDNN's integer primitives meet
// exactly (see Int8Match in support.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "external/onednn/compile/codegen.h"
#include "external/onednn/compile/support.h"

namespace kiln::onednn {
namespace internal {
namespace {

// The node producing `v` when it is a default-domain `op`, else null.
const Node* ProducerOf(const Graph& g, ValueId v, const char* op) {
  if (v == kNoValue || g.value(v).producer == compiler::kNoNode) return nullptr;
  const Node& n = g.node(g.value(v).producer);
  if (n.op_type != op || (!n.domain.empty() && n.domain != "ai.onnx")) return nullptr;
  return &n;
}

// A constant scalar (or 1-element) scale and the zero point beside it (0 when absent), for a
// per-tensor Q / DQ of u8: the zero point, when present, must be a constant u8.
bool PerTensorU8(const Graph& g, const Node& n, float* scale, int32_t* zero) {
  const TensorData* s = Data(g, In(n, 1));
  if (!s || s->num_elements() != 1 || s->dtype() != DType::kF32) return false;
  *scale = static_cast<float>(s->ToDoubles()[0]);
  *zero = 0;
  if (In(n, 2) != kNoValue) {
    const TensorData* z = Data(g, In(n, 2));
    if (!z || z->num_elements() != 1 || z->dtype() != DType::kU8) return false;
    *zero = static_cast<int32_t>(z->ToDoubles()[0]);
  }
  return *scale > 0.0f && std::isfinite(*scale);
}

// The DQ feeding `v` from constant `dtype` data with zero points all 0 (or absent) and scales
// per tensor or along `axis` (of `channels`); its scales (one per channel) in *scales.
const Node* ConstantDq(const Graph& g, ValueId v, DType dtype, int axis, int64_t channels,
                       std::vector<double>* scales) {
  const Node* dq = ProducerOf(g, v, "DequantizeLinear");
  if (!dq) return nullptr;
  const TensorData* q = Data(g, In(*dq, 0));
  const TensorData* s = Data(g, In(*dq, 1));
  if (!q || q->dtype() != dtype || !s || s->dtype() != DType::kF32) return nullptr;
  if (In(*dq, 2) != kNoValue) {
    const TensorData* z = Data(g, In(*dq, 2));
    if (!z) return nullptr;
    for (double x : z->ToDoubles()) {
      if (x != 0) return nullptr;
    }
  }
  int rank = static_cast<int>(q->dims().size());
  if (s->num_elements() != 1 &&
      (NormalizeAxis(GetInt(*dq, "axis", 1), rank) != axis || s->num_elements() != channels))
    return nullptr;
  std::vector<double> sv = s->ToDoubles();
  scales->assign(channels, sv[0]);
  if (sv.size() == static_cast<size_t>(channels)) *scales = sv;
  for (double x : *scales) {
    if (!(x > 0.0) || !std::isfinite(x)) return nullptr;
  }
  return dq;
}

// The anchor's operands: x through a per-tensor u8 DQ read only by the anchor, W and the bias
// (if any) through constant DQs. `axis` is W's output-channel axis.
bool MatchOperands(const Graph& g, const Node& anchor, int axis,
                   const std::function<bool(NodeId)>& allowed, Int8Match* m) {
  const Node* dq = ProducerOf(g, In(anchor, 0), "DequantizeLinear");
  if (!dq || g.Users(In(anchor, 0)).size() != 1 || !allowed(g.value(In(anchor, 0)).producer))
    return false;
  if (!PerTensorU8(g, *dq, &m->x_scale, &m->x_zero) || Data(g, In(*dq, 0))) return false;
  m->x_q = In(*dq, 0);
  if (g.value(m->x_q).dtype != DType::kU8 || !ShapeOf(g, m->x_q)) return false;
  m->nodes.insert(g.value(In(anchor, 0)).producer);
  const Node* wdq = ProducerOf(g, In(anchor, 1), "DequantizeLinear");
  const TensorData* wq = wdq ? Data(g, In(*wdq, 0)) : nullptr;
  if (!wq || wq->dims().size() < 2) return false;
  int64_t channels = wq->dims()[axis];
  if (!ConstantDq(g, In(anchor, 1), DType::kI8, axis, channels, &m->w_scales)) return false;
  m->w_q = In(*wdq, 0);
  ValueId b = In(anchor, 2);
  if (b == kNoValue) return true;
  std::vector<double> bias_scales;
  const Node* bdq = ConstantDq(g, b, DType::kI32, 0, channels, &bias_scales);
  if (!bdq || Data(g, In(*bdq, 0))->dims() != std::vector<int64_t>{channels}) return false;
  // The bias is added to the accumulator, so it must be in its units: x_scale * w_scale[c]
  // (as ONNX Runtime's quantizer writes it); other scales stay on the float path.
  for (int64_t c = 0; c < channels; ++c) {
    double acc_unit = static_cast<double>(m->x_scale) * m->w_scales[c];
    if (std::abs(bias_scales[c] - acc_unit) > 1e-6 * acc_unit) return false;
  }
  m->bias_q = In(*bdq, 0);
  return true;
}

}  // namespace

std::optional<Int8Match> MatchInt8(const Graph& g, NodeId q_id,
                                   const std::function<bool(NodeId)>& allowed,
                                   const std::function<bool(ValueId)>& escapes) {
  const Node& q = g.node(q_id);
  if (q.op_type != "QuantizeLinear" || (!q.domain.empty() && q.domain != "ai.onnx")) return {};
  Int8Match m;
  if (!PerTensorU8(g, q, &m.y_scale, &m.y_zero) || q.outputs.empty()) return {};
  m.out = q.outputs[0];
  if (g.value(m.out).dtype != DType::kU8) return {};
  m.nodes.insert(q_id);
  ValueId v = In(q, 0);
  // Inner values are read by the pattern only.
  auto inner = [&](ValueId x) {
    NodeId p = x == kNoValue ? compiler::kNoNode : g.value(x).producer;
    return p != compiler::kNoNode && allowed(p) && !escapes(x) && g.Users(x).size() == 1;
  };
  if (!inner(v)) return {};
  if (const Node* relu = ProducerOf(g, v, "Relu")) {
    m.relu = true;
    m.nodes.insert(g.value(v).producer);
    v = In(*relu, 0);
    if (!inner(v)) return {};
  }
  NodeId anchor_id = g.value(v).producer;
  const Node& anchor = g.node(anchor_id);
  if (!anchor.domain.empty() && anchor.domain != "ai.onnx") return {};
  if (!IsF32(g, v) || anchor.outputs.size() != 1) return {};
  int axis;
  if (anchor.op_type == "Conv") {
    m.conv = true;
    axis = 0;
  } else if (anchor.op_type == "MatMul") {
    axis = 1;
  } else if (anchor.op_type == "Gemm") {
    if (GetInt(anchor, "transA", 0) != 0 || GetFloat(anchor, "alpha", 1.0f) != 1.0f ||
        GetFloat(anchor, "beta", 1.0f) != 1.0f)
      return {};
    m.trans_b = GetInt(anchor, "transB", 0) != 0;
    axis = m.trans_b ? 0 : 1;
  } else {
    return {};
  }
  if (anchor.op_type == "MatMul" && In(anchor, 2) != kNoValue) return {};
  if (!MatchOperands(g, anchor, axis, allowed, &m)) return {};
  const TensorData& w = *Data(g, m.w_q);
  if (m.conv ? w.dims().size() < 3 : w.dims().size() != 2) return {};
  if (!m.conv && RankOf(g, m.x_q) < 2) return {};
  m.anchor = anchor_id;
  m.nodes.insert(anchor_id);
  return m;
}

}  // namespace internal

bool IsInt8Root(const compiler::Graph& graph, compiler::NodeId node) {
  return internal::MatchesInGraph(graph, node, internal::MatchInt8);
}

}  // namespace kiln::onednn
