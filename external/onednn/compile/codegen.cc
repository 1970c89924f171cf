// The oneDNN codegen: support predicates per op, and region -> blob with BatchNormalization
// folding and post-op fusion (see codegen.h).
#include "external/onednn/compile/codegen.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "compiler/ops/attributes.h"
#include "external/onednn/region.h"

namespace kiln::onednn {
namespace {

using compiler::Attribute;
using compiler::DimExpr;
using compiler::Graph;
using compiler::kNoValue;
using compiler::Node;
using compiler::NodeId;
using compiler::SymbolicShape;
using compiler::TensorData;
using compiler::TensorDataRef;
using compiler::ValueId;
using compiler::ValueKind;

// ---- Attribute and value helpers -----------------------------------------------------------

int64_t GetInt(const Node& n, const char* name, int64_t def) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kInt ? a->i() : def;
}

float GetFloat(const Node& n, const char* name, float def) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kFloat ? a->f() : def;
}

std::vector<int64_t> GetInts(const Node& n, const char* name) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kInts ? a->ints() : std::vector<int64_t>{};
}

// A node input or kNoValue when absent.
ValueId In(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : kNoValue; }

// The value's data when it is known at compile time.
const TensorData* Data(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const compiler::Value& val = g.value(v);
  if (val.kind == ValueKind::kGraphInput) return nullptr;  // overridable default
  return val.data.get();
}

std::optional<float> Scalar(const Graph& g, ValueId v) {
  const TensorData* d = Data(g, v);
  if (!d || d->num_elements() != 1) return std::nullopt;
  return static_cast<float>(d->ToDoubles()[0]);
}

const SymbolicShape* ShapeOf(const Graph& g, ValueId v) {
  const compiler::Value& val = g.value(v);
  return val.shape ? &*val.shape : nullptr;
}

int RankOf(const Graph& g, ValueId v) { return static_cast<int>(ShapeOf(g, v)->size()); }

bool IsF32(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).dtype == DType::kF32 && ShapeOf(g, v) &&
         ShapeOf(g, v)->size() <= 8;
}

bool StaticDims(const SymbolicShape& s, size_t from) {
  for (size_t i = from; i < s.size(); ++i) {
    if (!s[i].is_const()) return false;
  }
  return true;
}

// An optional output that nothing reads.
bool Unused(const Graph& g, ValueId v) {
  if (v == kNoValue) return true;
  if (!g.Users(v).empty()) return false;
  const std::vector<ValueId>& outs = g.outputs();
  return std::find(outs.begin(), outs.end(), v) == outs.end();
}

int64_t NormalizeAxis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

// `small` broadcasts into `big` by oneDNN's rule: after rank alignment each dim is 1 or equal.
bool BroadcastsInto(const SymbolicShape& small, const SymbolicShape& big) {
  if (small.size() > big.size()) return false;
  size_t off = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i) {
    if (small[i] != DimExpr(1) && small[i] != big[i + off]) return false;
  }
  return true;
}

struct EltwiseSpec {
  EltwiseAlg alg;
  float alpha = 0.0f, beta = 0.0f;
};

// The eltwise algorithm of a unary node (nullopt: not one oneDNN runs).
std::optional<EltwiseSpec> ScalarBinaryAsEltwise(const Graph& g, const Node& n, size_t* data);

// The eltwise oneDNN runs for `n` on its data operand (DataInput), if any.
std::optional<EltwiseSpec> EltwiseOf(const Graph& g, const Node& n) {
  const std::string& op = n.op_type;
  size_t data = 0;
  if (std::optional<EltwiseSpec> e = ScalarBinaryAsEltwise(g, n, &data)) return e;
  if (op == "Relu") return EltwiseSpec{EltwiseAlg::kRelu};
  if (op == "LeakyRelu") return EltwiseSpec{EltwiseAlg::kRelu, GetFloat(n, "alpha", 0.01f)};
  if (op == "Sigmoid") return EltwiseSpec{EltwiseAlg::kSigmoid};
  if (op == "Tanh") return EltwiseSpec{EltwiseAlg::kTanh};
  if (op == "HardSwish") return EltwiseSpec{EltwiseAlg::kHardSwish};
  if (op == "Elu") return EltwiseSpec{EltwiseAlg::kElu, GetFloat(n, "alpha", 1.0f)};
  if (op == "Exp") return EltwiseSpec{EltwiseAlg::kExp};
  if (op == "Log") return EltwiseSpec{EltwiseAlg::kLog};
  if (op == "Abs") return EltwiseSpec{EltwiseAlg::kAbs};
  if (op == "Sqrt") return EltwiseSpec{EltwiseAlg::kSqrt};
  if (op == "Softplus") return EltwiseSpec{EltwiseAlg::kSoftplus};
  if (op == "Neg") return EltwiseSpec{EltwiseAlg::kLinear, -1.0f, 0.0f};
  if (op == "Round") return EltwiseSpec{EltwiseAlg::kRound};
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
    if (g.OpsetFor("") < 11) {
      lo = GetFloat(n, "min", lo);
      hi = GetFloat(n, "max", hi);
    } else {
      for (size_t i = 1; i < 3; ++i) {
        ValueId v = In(n, i);
        if (v == kNoValue) continue;
        std::optional<float> s = Scalar(g, v);
        if (!s) return std::nullopt;  // run-time bounds
        (i == 1 ? lo : hi) = *s;
      }
    }
    return EltwiseSpec{EltwiseAlg::kClip, lo, hi};
  }
  return std::nullopt;
}

// A binary op with a constant scalar on one side and the output's shape on the other, as an
// eltwise on the data operand: x + c and c + x -> linear(1, c); x - c -> linear(1, -c);
// c - x -> linear(-1, c); x * c -> linear(c, 0); x / c -> linear(1 / c, 0) (within one rounding
// of the division); max(x, c) / min(x, c) -> clip. oneDNN's binary primitive runs a scalar
// operand on blocked layouts with its reference kernel (234 ms for one 1x32x160x240 add), its
// eltwise primitive and post-ops with JIT kernels. `*data` receives the data operand's index.
std::optional<EltwiseSpec> ScalarBinaryAsEltwise(const Graph& g, const Node& n, size_t* data) {
  const std::string& op = n.op_type;
  if (n.inputs.size() != 2 || n.outputs.empty()) return std::nullopt;
  const SymbolicShape* out = ShapeOf(g, n.outputs[0]);
  for (size_t d = 0; d < 2; ++d) {
    std::optional<float> c = Scalar(g, n.inputs[1 - d]);
    const SymbolicShape* x = ShapeOf(g, n.inputs[d]);
    if (!c || !x || !out || *x != *out) continue;
    *data = d;
    const float kMax = std::numeric_limits<float>::max();
    if (op == "Add") return EltwiseSpec{EltwiseAlg::kLinear, 1.0f, *c};
    if (op == "Mul") return EltwiseSpec{EltwiseAlg::kLinear, *c, 0.0f};
    if (op == "Sub") {
      return d == 0 ? EltwiseSpec{EltwiseAlg::kLinear, 1.0f, -*c}
                    : EltwiseSpec{EltwiseAlg::kLinear, -1.0f, *c};
    }
    if (op == "Div" && d == 0 && *c != 0.0f && std::isfinite(1.0f / *c)) {
      return EltwiseSpec{EltwiseAlg::kLinear, 1.0f / *c, 0.0f};
    }
    if (op == "Max") return EltwiseSpec{EltwiseAlg::kClip, *c, kMax};
    if (op == "Min") return EltwiseSpec{EltwiseAlg::kClip, -kMax, *c};
    return std::nullopt;
  }
  return std::nullopt;
}

// The operand an eltwise from EltwiseOf applies to: input 0, or the non-constant side of a
// scalar binary.
ValueId DataInput(const Graph& g, const Node& n) {
  size_t data = 0;
  ScalarBinaryAsEltwise(g, n, &data);
  return n.inputs[data];
}

std::optional<BinaryAlg> BinaryOf(const std::string& op) {
  if (op == "Add") return BinaryAlg::kAdd;
  if (op == "Sub") return BinaryAlg::kSub;
  if (op == "Mul") return BinaryAlg::kMul;
  if (op == "Div") return BinaryAlg::kDiv;
  if (op == "Max") return BinaryAlg::kMax;
  if (op == "Min") return BinaryAlg::kMin;
  return std::nullopt;
}

bool IsCommutative(BinaryAlg a) { return a != BinaryAlg::kSub && a != BinaryAlg::kDiv; }

// ---- Support predicates --------------------------------------------------------------------

// A Conv node's attributes as compiler/ops parses them for shape inference and lowering (one
// parser for all three); a Conv without kernel_shape takes its weights' spatial dims. nullopt
// when malformed.
std::optional<compiler::ConvAttributes> ConvOf(const Graph& g, const Node& n, int spatial) {
  std::optional<std::vector<int64_t>> from_weights;
  const SymbolicShape* w = n.inputs.size() > 1 ? ShapeOf(g, n.inputs[1]) : nullptr;
  if (w && static_cast<int>(w->size()) == spatial + 2 && StaticDims(*w, 2)) {
    from_weights.emplace();
    for (int i = 0; i < spatial; ++i) from_weights->push_back((*w)[2 + i].const_value());
  }
  StatusOr<compiler::ConvAttributes> a = compiler::ParseConvAttributes(n, spatial, from_weights);
  if (!a.ok()) return std::nullopt;
  return *a;
}

// The window of a Conv or pool node; nullopt when malformed.
std::optional<compiler::WindowAttributes> Window(const Graph& g, const Node& n, int spatial,
                                                 bool pool) {
  if (!pool) return ConvOf(g, n, spatial);
  StatusOr<compiler::PoolAttributes> a = compiler::ParsePoolAttributes(n, spatial);
  if (!a.ok()) return std::nullopt;
  return *a;
}

// A window oneDNN takes: well formed, and every size below 2^20 (oneDNN's dims are int64 but
// its kernels index with int).
bool WindowSupported(const Graph& g, const Node& n, int spatial, bool pool) {
  std::optional<compiler::WindowAttributes> w = Window(g, n, spatial, pool);
  if (!w) return false;
  // A Conv kernel taken from the weights (no kernel_shape) is not limited here: this predicate
  // claims exactly the nodes it claimed when it read the attributes itself.
  std::vector<const std::vector<int64_t>*> lists = {&w->strides, &w->dilations, &w->pads};
  if (n.FindAttribute("kernel_shape")) lists.push_back(&w->kernel);
  for (const std::vector<int64_t>* v : lists) {
    for (int64_t x : *v) {
      if (x >= (1 << 20)) return false;
    }
  }
  return true;
}

bool BinarySupported(const Graph& g, const Node& n, BinaryAlg alg) {
  if (n.inputs.size() != 2) return false;
  const SymbolicShape &a = *ShapeOf(g, n.inputs[0]), &b = *ShapeOf(g, n.inputs[1]);
  const SymbolicShape& out = *ShapeOf(g, n.outputs[0]);
  auto full = [&](const SymbolicShape& s) { return s.size() == out.size() && s == out; };
  if (full(a) && BroadcastsInto(b, out)) return true;
  return IsCommutative(alg) && full(b) && BroadcastsInto(a, out);
}

bool SupportedImpl(const Graph& g, const Node& n) {
  const std::string& op = n.op_type;
  ValueId x = In(n, 0);
  if (!IsF32(g, x)) return false;
  int rank = RankOf(g, x);
  if (op == "Conv") {
    ValueId w = In(n, 1), b = In(n, 2);
    if (!IsF32(g, w) || (b != kNoValue && !IsF32(g, b))) return false;
    if (rank < 3 || rank > 5 || RankOf(g, w) != rank || !StaticDims(*ShapeOf(g, w), 0))
      return false;
    if (!WindowSupported(g, n, rank - 2, false)) return false;
    int64_t group = ConvOf(g, n, rank - 2)->group;
    return (*ShapeOf(g, w))[0].const_value() % group == 0;
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (rank < 3 || rank > 5 || !WindowSupported(g, n, rank - 2, true)) return false;
    StatusOr<compiler::PoolAttributes> pool = compiler::ParsePoolAttributes(n, rank - 2);
    if (op == "MaxPool")
      return (n.outputs.size() < 2 || Unused(g, n.outputs[1])) && pool->storage_order == 0;
    return !(pool->ceil_mode && pool->count_include_pad);
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return rank >= 3 && rank <= 5;
  if (op == "Flatten") {
    int64_t axis = NormalizeAxis(GetInt(n, "axis", 1), rank);
    return axis >= 0 && axis <= rank;
  }
  if (op == "MatMul") return IsF32(g, In(n, 1)) && rank >= 2 && RankOf(g, In(n, 1)) >= 2;
  if (op == "Gemm") {
    ValueId c = In(n, 2);
    if (GetFloat(n, "alpha", 1.0f) == 0.0f) return false;  // nothing to multiply; not worth it
    if (!IsF32(g, In(n, 1)) || (c != kNoValue && !IsF32(g, c))) return false;
    if (c == kNoValue || Data(g, c)) return true;
    float alpha = GetFloat(n, "alpha", 1.0f), beta = GetFloat(n, "beta", 1.0f);
    return alpha == beta;
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    if (rank < 1) return false;
    int64_t axis = NormalizeAxis(GetInt(n, "axis", g.OpsetFor("") >= 13 ? -1 : 1), rank);
    return axis >= 0 && axis < rank && (g.OpsetFor("") >= 13 || axis == rank - 1);
  }
  if (op == "LayerNormalization") {
    for (size_t i = 1; i < n.outputs.size(); ++i) {
      if (!Unused(g, n.outputs[i])) return false;
    }
    int64_t axis = NormalizeAxis(GetInt(n, "axis", -1), rank);
    if (axis < 0 || axis >= rank || !StaticDims(*ShapeOf(g, x), axis)) return false;
    SymbolicShape norm(ShapeOf(g, x)->begin() + axis, ShapeOf(g, x)->end());
    for (size_t i = 1; i < 3; ++i) {
      ValueId v = In(n, i);
      if (v == kNoValue) continue;
      if (!IsF32(g, v) || !StaticDims(*ShapeOf(g, v), 0)) return false;
      int64_t count = 1, want = 1;
      for (const DimExpr& d : *ShapeOf(g, v)) count *= d.const_value();
      for (const DimExpr& d : norm) want *= d.const_value();
      if (count != want) return false;
    }
    return In(n, 1) != kNoValue;
  }
  if (op == "Concat") {
    for (ValueId v : n.inputs) {
      if (!IsF32(g, v) || RankOf(g, v) != rank) return false;
    }
    return rank >= 1;
  }
  if (op == "BatchNormalization") {
    for (size_t i = 1; i < 5; ++i) {
      if (!IsF32(g, In(n, i))) return false;
    }
    for (size_t i = 1; i < n.outputs.size(); ++i) {
      if (!Unused(g, n.outputs[i])) return false;
    }
    return rank >= 2 && GetInt(n, "training_mode", 0) == 0;
  }
  size_t data = 0;
  if (ScalarBinaryAsEltwise(g, n, &data)) return IsF32(g, In(n, 1));
  if (std::optional<BinaryAlg> alg = BinaryOf(op)) {
    return IsF32(g, In(n, 1)) && BinarySupported(g, n, *alg);
  }
  return EltwiseOf(g, n).has_value();
}

// ---- Erf-based Gelu: 0.5 * x * (1 + erf(x / sqrt(2))) ---------------------------------------

struct GeluMatch {
  ValueId x = kNoValue, out = kNoValue;
  std::set<NodeId> nodes;
};

bool Near(std::optional<float> v, double want) { return v && std::fabs(*v - want) < 1e-3; }

// The other input of binary node `n` when one input is `v`.
std::optional<ValueId> Other(const Node& n, ValueId v) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v && n.op_type != "Div" && n.op_type != "Sub") return n.inputs[0];
  return std::nullopt;
}

// Matches 0.5 * x * (1 + erf(x / sqrt(2))) (the forms exporters emit) around Erf node
// `erf_id`. `allowed` says which nodes may be part of it; `escapes` marks values read outside
// (those cannot be intermediates). x itself may have other users.
std::optional<GeluMatch> MatchGelu(const Graph& g, NodeId erf_id,
                                   const std::function<bool(NodeId)>& allowed,
                                   const std::function<bool(ValueId)>& escapes) {
  // The one user of `v` when it is allowed and `v` does not escape.
  auto Only = [&](ValueId v) -> std::optional<NodeId> {
    if (escapes(v) || g.Users(v).size() != 1 || !allowed(g.Users(v)[0])) return std::nullopt;
    return g.Users(v)[0];
  };

  const Node& erf = g.node(erf_id);
  GeluMatch m;
  ValueId a = erf.inputs[0];
  NodeId div = g.value(a).producer;
  if (div == compiler::kNoNode || !allowed(div) || escapes(a) || g.Users(a).size() != 1)
    return std::nullopt;
  const Node& d = g.node(div);
  if (d.inputs.size() != 2) return std::nullopt;
  m.x = d.inputs[0];
  if (!IsF32(g, m.x)) return std::nullopt;
  std::optional<float> c = Scalar(g, d.inputs[1]);
  if (!((d.op_type == "Div" && Near(c, std::sqrt(2.0))) ||
        (d.op_type == "Mul" && Near(c, std::sqrt(0.5)))))
    return std::nullopt;
  std::optional<NodeId> add = Only(erf.outputs[0]);
  if (!add || g.node(*add).op_type != "Add") return std::nullopt;
  std::optional<ValueId> one = Other(g.node(*add), erf.outputs[0]);
  if (!one || !Near(Scalar(g, *one), 1.0)) return std::nullopt;
  m.nodes = {div, erf_id, *add};
  ValueId p = g.node(*add).outputs[0];  // 1 + erf(x / sqrt 2)
  std::optional<NodeId> m1 = Only(p);
  if (!m1 || g.node(*m1).op_type != "Mul") return std::nullopt;
  std::optional<ValueId> y = Other(g.node(*m1), p);
  if (!y) return std::nullopt;
  m.nodes.insert(*m1);
  ValueId q = g.node(*m1).outputs[0];
  if (*y == m.x || Near(Scalar(g, *y), 0.5)) {
    // x * p then * 0.5, or 0.5 * p then * x.
    std::optional<NodeId> m2 = Only(q);
    if (!m2 || g.node(*m2).op_type != "Mul") return std::nullopt;
    std::optional<ValueId> z = Other(g.node(*m2), q);
    if (!z || !(*y == m.x ? Near(Scalar(g, *z), 0.5) : *z == m.x)) return std::nullopt;
    m.nodes.insert(*m2);
    m.out = g.node(*m2).outputs[0];
  } else {
    // (x * 0.5) * p.
    NodeId h = g.value(*y).producer;
    if (h == compiler::kNoNode || !allowed(h) || !Only(*y)) return std::nullopt;
    const Node& hn = g.node(h);
    std::optional<ValueId> half = hn.op_type == "Mul" ? Other(hn, m.x) : std::nullopt;
    if (!half || !Near(Scalar(g, *half), 0.5)) return std::nullopt;
    m.nodes.insert(h);
    m.out = q;
  }
  // Every node is allowed and every intermediate has its one user in the pattern (Only);
  // x may have other users (then the pattern is one gelu op, not a post-op).
  return m;
}

// ---- Decomposed LayerNorm: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * g + b --------

struct LnMatch {
  ValueId x = kNoValue, gamma = kNoValue, beta = kNoValue, out = kNoValue;
  float epsilon = 0.0f;
  std::set<NodeId> nodes;
};

// The producer of `v` when it is one of `ops`, allowed, and `v` has `users` readers, none
// outside the pattern (escapes).
std::optional<NodeId> Producer(const Graph& g, ValueId v, const char* op, size_t users,
                               const std::function<bool(NodeId)>& allowed,
                               const std::function<bool(ValueId)>& escapes) {
  if (v == kNoValue) return std::nullopt;
  NodeId p = g.value(v).producer;
  if (p == compiler::kNoNode || g.node(p).op_type != op || !allowed(p) || escapes(v) ||
      g.Users(v).size() != users || !g.node(p).domain.empty())
    return std::nullopt;
  return p;
}

// ReduceMean over the last axis only, keeping dims (axes as an attribute, or a constant input
// from opset 18).
bool MeanOfLastAxis(const Graph& g, const Node& n) {
  if (n.inputs.empty() || !ShapeOf(g, n.inputs[0]) || GetInt(n, "keepdims", 1) != 1) return false;
  int rank = RankOf(g, n.inputs[0]);
  std::vector<int64_t> axes = GetInts(n, "axes");
  if (n.inputs.size() > 1) {
    const TensorData* d = Data(g, n.inputs[1]);
    if (!d || !axes.empty()) return false;
    for (double a : d->ToDoubles()) axes.push_back(static_cast<int64_t>(a));
  }
  return axes.size() == 1 && rank >= 1 && NormalizeAxis(axes[0], rank) == rank - 1;
}

// A constant f32 of `c` elements laid out along the last dim ([c], [1, c], ...).
bool LastDimVector(const Graph& g, ValueId v, int64_t c) {
  const TensorData* d = Data(g, v);
  if (!d || d->dtype() != DType::kF32 || d->num_elements() != c || d->dims().empty() ||
      d->dims().back() != c)
    return false;
  return true;
}

// Matches the decomposed LayerNorm exporters emit for torch.nn.LayerNorm at its root, the last
// Add: Add(Mul(Div(Sub(x, ReduceMean(x)), Sqrt(Add(ReduceMean(Pow(Sub, 2)), eps))), g), b) with
// Mul and both Adds in either operand order, reductions over the last axis, and constant g, b
// of the last dim's size. Intermediates must have their readers inside the pattern.
std::optional<LnMatch> MatchLayerNorm(const Graph& g, NodeId root,
                                      const std::function<bool(NodeId)>& allowed,
                                      const std::function<bool(ValueId)>& escapes) {
  const Node& add = g.node(root);
  if (add.op_type != "Add" || add.inputs.size() != 2 || !add.domain.empty()) return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    LnMatch m;
    m.beta = add.inputs[1 - order];
    std::optional<NodeId> mul = Producer(g, add.inputs[order], "Mul", 1, allowed, escapes);
    if (!mul || g.node(*mul).inputs.size() != 2) continue;
    for (int mo = 0; mo < 2; ++mo) {
      const Node& mn = g.node(*mul);
      m.gamma = mn.inputs[1 - mo];
      std::optional<NodeId> div = Producer(g, mn.inputs[mo], "Div", 1, allowed, escapes);
      if (!div || g.node(*div).inputs.size() != 2) continue;
      const Node& dn = g.node(*div);
      std::optional<NodeId> sub = Producer(g, dn.inputs[0], "Sub", 2, allowed, escapes);
      std::optional<NodeId> sqrt = Producer(g, dn.inputs[1], "Sqrt", 1, allowed, escapes);
      if (!sub || !sqrt || g.node(*sub).inputs.size() != 2) continue;
      const Node& sn = g.node(*sub);
      m.x = sn.inputs[0];
      std::optional<NodeId> mean = Producer(g, sn.inputs[1], "ReduceMean", 1, allowed, escapes);
      if (!mean || g.node(*mean).inputs[0] != m.x || !MeanOfLastAxis(g, g.node(*mean))) continue;
      std::optional<NodeId> eps_add =
          Producer(g, g.node(*sqrt).inputs[0], "Add", 1, allowed, escapes);
      if (!eps_add || g.node(*eps_add).inputs.size() != 2) continue;
      const Node& en = g.node(*eps_add);
      bool eps_second = Scalar(g, en.inputs[1]).has_value();
      std::optional<float> eps = Scalar(g, en.inputs[eps_second ? 1 : 0]);
      std::optional<NodeId> var =
          Producer(g, en.inputs[eps_second ? 0 : 1], "ReduceMean", 1, allowed, escapes);
      if (!eps || *eps < 0 || !var || !MeanOfLastAxis(g, g.node(*var))) continue;
      std::optional<NodeId> pow = Producer(g, g.node(*var).inputs[0], "Pow", 1, allowed, escapes);
      if (!pow || g.node(*pow).inputs.size() != 2 || g.node(*pow).inputs[0] != dn.inputs[0] ||
          !Near(Scalar(g, g.node(*pow).inputs[1]), 2.0))
        continue;
      // The Sub's two readers are the Pow and the Div.
      const std::vector<NodeId>& su = g.Users(dn.inputs[0]);
      if (!((su[0] == *pow && su[1] == *div) || (su[0] == *div && su[1] == *pow))) continue;
      if (!IsF32(g, m.x) || RankOf(g, m.x) < 1 || !IsF32(g, add.outputs[0])) continue;
      const DimExpr& last = ShapeOf(g, m.x)->back();
      if (!last.is_const() || last.const_value() < 1 ||
          *ShapeOf(g, add.outputs[0]) != *ShapeOf(g, m.x))
        continue;
      if (!LastDimVector(g, m.gamma, last.const_value()) ||
          !LastDimVector(g, m.beta, last.const_value()))
        continue;
      m.epsilon = *eps;
      m.out = add.outputs[0];
      m.nodes = {root, *mul, *div, *sub, *sqrt, *mean, *eps_add, *var, *pow};
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace

bool IsSupported(const Graph& graph, NodeId node) {
  const Node& n = graph.node(node);
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  for (ValueId v : n.outputs) {
    if (v != kNoValue && !graph.value(v).shape) return false;
  }
  if (n.outputs.empty() || !IsF32(graph, n.outputs[0])) return false;
  return SupportedImpl(graph, n);
}

namespace {

class Generator {
 public:
  Generator(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& inputs,
            const std::vector<ValueId>& outputs)
      : g_(g), inputs_(inputs), outputs_(outputs.begin(), outputs.end()), output_list_(outputs) {
    in_region_.insert(nodes.begin(), nodes.end());
  }

  StatusOr<compiler::ExternalCode> Run() {
    ASSIGN_OR_RETURN(std::vector<NodeId> topo, g_.TopologicalOrder());
    for (NodeId n : topo) {
      if (in_region_.count(n)) order_.push_back(n);
    }
    if (order_.size() != in_region_.size())
      return InvalidArgument("oneDNN codegen: a region node is not in the graph");
    for (ValueId v : inputs_) {
      if (!IsF32(g_, v))
        return InvalidArgument("oneDNN codegen: input '" + g_.value(v).name +
                               "' is not f32 of known rank");
      BoundTensor b{NewTensor(RankOf(g_, v)), {}};
      for (const DimExpr& d : *ShapeOf(g_, v))
        b.dims.push_back(d.is_const() ? d.const_value() : -1);
      tensor_of_[v] = b.tensor;
      region_.inputs.push_back(std::move(b));
    }
    FindGelus();
    FindLayerNorms();
    for (NodeId n : order_) {
      if (consumed_.count(n)) continue;
      if (auto ln = ln_root_.find(n); ln != ln_root_.end()) {
        Status s = EmitLayerNorm(lns_[ln->second]);
        if (!s.ok()) return s.WithContext("oneDNN codegen: " + g_.DescribeNode(n));
        continue;
      }
      if (ln_member_.count(n)) continue;  // emitted with its root
      auto gelu = gelu_last_.find(n);
      if (gelu_member_.count(n) && gelu == gelu_last_.end()) continue;  // emitted with its last
      Status s = gelu != gelu_last_.end() ? EmitGelu(gelus_[gelu->second]) : EmitNode(n);
      if (!s.ok()) return s.WithContext("oneDNN codegen: " + g_.DescribeNode(n));
    }
    for (ValueId v : output_list_) {
      auto it = tensor_of_.find(v);
      if (it == tensor_of_.end() || !produced_.count(it->second))
        return InvalidArgument("oneDNN codegen: output '" + g_.value(v).name +
                               "' is not produced by the region");
      region_.outputs.push_back(it->second);
    }
    Status valid = ValidateRegion(region_);
    if (!valid.ok())
      return Internal("oneDNN codegen produced an invalid region: " + valid.message());
    code_.blob = EncodeRegion(region_);
    return std::move(code_);
  }

 private:
  // ---- Tensors ----

  int32_t NewTensor(int rank) {
    region_.tensors.push_back({DType::kF32, rank});
    return static_cast<int32_t>(region_.tensors.size()) - 1;
  }
  int32_t AddConstant(ValueId value, TensorDataRef data) {
    const TensorData& d = value != kNoValue ? *Data(g_, value) : *data;
    int32_t t = NewTensor(static_cast<int>(d.dims().size()));
    region_.constants.push_back({t, d.dims()});
    code_.constants.push_back({value, value != kNoValue ? nullptr : std::move(data)});
    return t;
  }
  // The region tensor of a value read by a node: an input, an earlier result, or a constant.
  StatusOr<int32_t> Use(ValueId v) {
    auto it = tensor_of_.find(v);
    if (it != tensor_of_.end()) return it->second;
    const TensorData* d = Data(g_, v);
    if (!d || (g_.value(v).producer != compiler::kNoNode && in_region_.count(g_.value(v).producer)))
      return InvalidArgument("value '" + g_.value(v).name +
                             "' is neither a region input nor a constant");
    if (d->dtype() != DType::kF32)
      return InvalidArgument("constant '" + g_.value(v).name + "' is not f32");
    int32_t t = AddConstant(v, nullptr);
    tensor_of_[v] = t;
    return t;
  }
  // A value that can be read now (for post-ops: it must exist before the anchor op runs).
  bool Available(ValueId v) const {
    if (tensor_of_.count(v)) return true;
    return Data(g_, v) &&
           !(g_.value(v).producer != compiler::kNoNode && in_region_.count(g_.value(v).producer));
  }
  int32_t Define(ValueId v) {
    int32_t t = NewTensor(RankOf(g_, v));
    tensor_of_[v] = t;
    produced_.insert(t);
    return t;
  }
  Status Emit(Op op, ValueId out) {
    op.output = Define(out);
    region_.ops.push_back(std::move(op));
    return Status::Ok();
  }
  Status Inputs(Op* op, const Node& n, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      if (In(n, i) == kNoValue) continue;
      ASSIGN_OR_RETURN(int32_t t, Use(In(n, i)));
      op->inputs.push_back(t);
    }
    return Status::Ok();
  }

  // The single region user of `v` that may be fused (v is not read outside the op).
  std::optional<NodeId> SoleUser(ValueId v) const {
    if (outputs_.count(v) || g_.Users(v).size() != 1) return std::nullopt;
    NodeId u = g_.Users(v)[0];
    if (!in_region_.count(u) || consumed_.count(u) || gelu_member_.count(u) || ln_member_.count(u))
      return std::nullopt;
    return u;
  }

  // ---- Nodes ----

  Status EmitNode(NodeId id) {
    const Node& n = g_.node(id);
    if (!IsSupported(g_, id)) return InvalidArgument("not supported by oneDNN");
    const std::string& t = n.op_type;
    Op op;
    if (t == "Conv") return EmitConv(id);
    if (t == "MatMul" || t == "Gemm") return EmitMatMul(id);
    if (t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool") {
      op.kind = OpKind::kPool;
      op.global = t[0] == 'G';
      op.pool = t.find("Max") != std::string::npos ? PoolAlg::kMax : PoolAlg::kAvgExcludePad;
      if (!op.global) {
        ASSIGN_OR_RETURN(compiler::PoolAttributes pool,
                         compiler::ParsePoolAttributes(n, RankOf(g_, n.inputs[0]) - 2));
        SetWindow(&op, pool);
        op.ceil_mode = pool.ceil_mode;
        if (op.pool != PoolAlg::kMax && pool.count_include_pad) op.pool = PoolAlg::kAvgIncludePad;
      }
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    int rank = RankOf(g_, n.inputs[0]);
    if (t == "Softmax" || t == "LogSoftmax") {
      op.kind = OpKind::kSoftmax;
      op.log_softmax = t == "LogSoftmax";
      op.axis = NormalizeAxis(GetInt(n, "axis", g_.OpsetFor("") >= 13 ? -1 : 1), rank);
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "LayerNormalization") {
      op.kind = OpKind::kLayerNorm;
      op.axis = NormalizeAxis(GetInt(n, "axis", -1), rank);
      op.epsilon = GetFloat(n, "epsilon", 1e-5f);
      RETURN_IF_ERROR(Inputs(&op, n, 3));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "Flatten") {  // a view: no oneDNN primitive, no copy inside the region
      op.kind = OpKind::kFlatten;
      op.axis = NormalizeAxis(GetInt(n, "axis", 1), rank);
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "Concat") {
      op.kind = OpKind::kConcat;
      op.axis = NormalizeAxis(GetInt(n, "axis", 0), rank);
      RETURN_IF_ERROR(Inputs(&op, n, n.inputs.size()));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "BatchNormalization") {
      op.kind = OpKind::kBatchNorm;
      op.epsilon = GetFloat(n, "epsilon", 1e-5f);
      RETURN_IF_ERROR(Inputs(&op, n, 5));
      return Emit(std::move(op), n.outputs[0]);
    }
    std::optional<EltwiseSpec> e = EltwiseOf(g_, n);
    if (!e) {
      op.kind = OpKind::kBinary;
      op.binary = *BinaryOf(t);
      RETURN_IF_ERROR(Inputs(&op, n, 2));
      return Emit(std::move(op), n.outputs[0]);
    }
    op.kind = OpKind::kEltwise;
    op.eltwise = e->alg;
    op.alpha = e->alpha;
    op.beta = e->beta;
    ASSIGN_OR_RETURN(int32_t t_in, Use(DataInput(g_, n)));
    op.inputs.push_back(t_in);
    return Emit(std::move(op), n.outputs[0]);
  }

  // The parsed window into the blob's op (its AutoPad mirrors compiler::AutoPad).
  static void SetWindow(Op* op, const compiler::WindowAttributes& w) {
    op->kernel = w.kernel;
    op->strides = w.strides;
    op->dilations = w.dilations;
    op->pads = w.pads;
    op->auto_pad = w.auto_pad == compiler::AutoPad::kSameUpper   ? AutoPad::kSameUpper
                   : w.auto_pad == compiler::AutoPad::kSameLower ? AutoPad::kSameLower
                   : w.auto_pad == compiler::AutoPad::kValid     ? AutoPad::kValid
                                                                  : AutoPad::kNotSet;
  }

  Status EmitConv(NodeId id) {
    const Node& n = g_.node(id);
    Op op;
    op.kind = OpKind::kConv;
    std::optional<compiler::ConvAttributes> conv = ConvOf(g_, n, RankOf(g_, n.inputs[0]) - 2);
    if (!conv) return InvalidArgument("malformed Conv attributes");
    op.group = conv->group;
    SetWindow(&op, *conv);
    // An empty kernel tells the runtime to take W's dims; a Conv without kernel_shape keeps it
    // empty so its blob stays byte-identical to the one it always had.
    if (!n.FindAttribute("kernel_shape")) op.kernel.clear();
    ValueId out = n.outputs[0];
    // BatchNormalization folded into constant weights: W' = W * s, B' = (B - mean) * s + beta
    // with s = gamma / sqrt(var + eps), per output channel.
    std::optional<NodeId> bn = SoleUser(out);
    if (bn && g_.node(*bn).op_type == "BatchNormalization" && IsSupported(g_, *bn) &&
        g_.node(*bn).inputs[0] == out && FoldableBn(n, g_.node(*bn))) {
      RETURN_IF_ERROR(FoldBn(&op, n, g_.node(*bn)));
      consumed_.insert(*bn);
      out = g_.node(*bn).outputs[0];
    } else {
      RETURN_IF_ERROR(Inputs(&op, n, 3));
    }
    RETURN_IF_ERROR(Fuse(&op, &out));
    return Emit(std::move(op), out);
  }

  bool FoldableBn(const Node& conv, const Node& bn) const {
    if (!Data(g_, conv.inputs[1]) || (In(conv, 2) != kNoValue && !Data(g_, In(conv, 2))))
      return false;
    for (size_t i = 1; i < 5; ++i) {
      if (!Data(g_, bn.inputs[i])) return false;
    }
    return true;
  }

  Status FoldBn(Op* op, const Node& conv, const Node& bn) {
    const TensorData& w = *Data(g_, conv.inputs[1]);
    int64_t oc = w.dims()[0], per = w.num_elements() / std::max<int64_t>(oc, 1);
    std::vector<double> gamma = Data(g_, bn.inputs[1])->ToDoubles();
    std::vector<double> beta = Data(g_, bn.inputs[2])->ToDoubles();
    std::vector<double> mean = Data(g_, bn.inputs[3])->ToDoubles();
    std::vector<double> var = Data(g_, bn.inputs[4])->ToDoubles();
    if (static_cast<int64_t>(gamma.size()) != oc || beta.size() != gamma.size() ||
        mean.size() != gamma.size() || var.size() != gamma.size())
      return InvalidArgument("BatchNormalization statistics do not match the conv's channels");
    double eps = GetFloat(bn, "epsilon", 1e-5f);
    std::vector<double> bias(oc, 0.0);
    if (In(conv, 2) != kNoValue) bias = Data(g_, In(conv, 2))->ToDoubles();
    std::vector<double> wv = w.ToDoubles();
    std::vector<float> nw(wv.size()), nb(oc);
    for (int64_t o = 0; o < oc; ++o) {
      double s = gamma[o] / std::sqrt(var[o] + eps);
      for (int64_t k = 0; k < per; ++k) nw[o * per + k] = static_cast<float>(wv[o * per + k] * s);
      nb[o] = static_cast<float>((bias[o] - mean[o]) * s + beta[o]);
    }
    ASSIGN_OR_RETURN(int32_t x, Use(conv.inputs[0]));
    ASSIGN_OR_RETURN(TensorDataRef wd,
                     TensorData::Copy(DType::kF32, w.dims(), nw.data(), nw.size() * sizeof(float)));
    ASSIGN_OR_RETURN(TensorDataRef bd,
                     TensorData::Copy(DType::kF32, {oc}, nb.data(), nb.size() * sizeof(float)));
    op->inputs = {x, AddConstant(kNoValue, wd), AddConstant(kNoValue, bd)};
    return Status::Ok();
  }

  // MatMul, and Gemm as alpha * (op(A) op(B) + C / alpha * beta) with alpha and beta folded into
  // constant B and C where possible.
  Status EmitMatMul(NodeId id) {
    const Node& n = g_.node(id);
    Op op;
    op.kind = OpKind::kMatMul;
    if (n.op_type == "MatMul") {
      RETURN_IF_ERROR(Inputs(&op, n, 2));
    } else {
      op.trans_a = GetInt(n, "transA", 0) != 0;
      op.trans_b = GetInt(n, "transB", 0) != 0;
      float alpha = GetFloat(n, "alpha", 1.0f), beta = GetFloat(n, "beta", 1.0f);
      ASSIGN_OR_RETURN(int32_t a, Use(n.inputs[0]));
      op.inputs.push_back(a);
      if (alpha != 1.0f && Data(g_, n.inputs[1])) {
        ASSIGN_OR_RETURN(TensorDataRef b, Scaled(*Data(g_, n.inputs[1]), alpha));
        op.inputs.push_back(AddConstant(kNoValue, b));
        alpha = 1.0f;
      } else {
        ASSIGN_OR_RETURN(int32_t b, Use(n.inputs[1]));
        op.inputs.push_back(b);
      }
      op.alpha = alpha;
      ValueId c = In(n, 2);
      if (c != kNoValue) {
        float scale = beta / alpha;
        if (Data(g_, c) && scale != 1.0f) {
          ASSIGN_OR_RETURN(TensorDataRef cd, Scaled(*Data(g_, c), scale));
          op.inputs.push_back(AddConstant(kNoValue, cd));
        } else if (Data(g_, c) || scale == 1.0f) {
          ASSIGN_OR_RETURN(int32_t ct, Use(c));
          op.inputs.push_back(ct);
        } else {
          return InvalidArgument("Gemm with a run-time C needs alpha == beta");
        }
      }
    }
    ValueId out = n.outputs[0];
    RETURN_IF_ERROR(Fuse(&op, &out));
    return Emit(std::move(op), out);
  }

  static StatusOr<TensorDataRef> Scaled(const TensorData& d, double s) {
    std::vector<double> v = d.ToDoubles();
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i] * s);
    return TensorData::Copy(DType::kF32, d.dims(), f.data(), f.size() * sizeof(float));
  }

  // ---- Post-op fusion ----

  // Appends the elementwise chain after `*out` to the anchor op's post-ops, moving `*out` to
  // the chain's last value.
  Status Fuse(Op* op, ValueId* out) {
    for (;;) {
      if (auto g = gelu_by_x_.find(*out); g != gelu_by_x_.end() && !outputs_.count(*out)) {
        const GeluMatch& m = gelus_[g->second];
        bool all_in = true;
        for (NodeId u : g_.Users(*out)) all_in = all_in && m.nodes.count(u);
        if (all_in) {
          op->post_ops.push_back({PostOpKind::kEltwise, EltwiseAlg::kGeluErf});
          for (NodeId u : m.nodes) consumed_.insert(u);
          for (NodeId u : m.nodes) gelu_member_.erase(u);
          *out = m.out;
          continue;
        }
      }
      std::optional<NodeId> u = SoleUser(*out);
      if (!u || !IsSupported(g_, *u)) return Status::Ok();
      const Node& n = g_.node(*u);
      std::optional<EltwiseSpec> e = EltwiseOf(g_, n);
      if (e ? DataInput(g_, n) != *out : (n.inputs.empty() || n.inputs[0] != *out)) {
        if (e || !(n.inputs.size() == 2 && n.inputs[1] == *out && BinaryOf(n.op_type) &&
                   IsCommutative(*BinaryOf(n.op_type))))
          return Status::Ok();
      }
      if (e) {
        if (e->alg == EltwiseAlg::kRound) return Status::Ok();  // not a oneDNN post-op
        op->post_ops.push_back({PostOpKind::kEltwise, e->alg, BinaryAlg::kAdd, e->alpha, e->beta});
      } else if (std::optional<BinaryAlg> alg = BinaryOf(n.op_type)) {
        if (*alg == BinaryAlg::kMax || *alg == BinaryAlg::kMin) return Status::Ok();
        std::optional<ValueId> other = Other(n, *out);
        if (!other || !Available(*other)) return Status::Ok();
        const SymbolicShape &o = *ShapeOf(g_, *other), &v = *ShapeOf(g_, *out);
        if (*ShapeOf(g_, n.outputs[0]) != v || !BroadcastsInto(o, v)) return Status::Ok();
        if (!FuseBias(op, *alg, *other, v)) {
          ASSIGN_OR_RETURN(int32_t t, Use(*other));
          bool sum = *alg == BinaryAlg::kAdd && o == v && op->post_ops.empty();
          op->post_ops.push_back({sum ? PostOpKind::kSum : PostOpKind::kBinary, EltwiseAlg::kRelu,
                                  *alg, 0.0f, 0.0f, t});
        }
      } else {
        return Status::Ok();
      }
      consumed_.insert(*u);
      *out = n.outputs[0];
    }
  }

  // A constant Add right after a bias-less MatMul ([.., N] with ones before) or Conv ([C, 1..]
  // or [1, C, 1..]) becomes the op's bias.
  bool FuseBias(Op* op, BinaryAlg alg, ValueId v, const SymbolicShape& out) {
    const TensorData* d = Data(g_, v);
    if (alg != BinaryAlg::kAdd || !d || d->dtype() != DType::kF32 || !op->post_ops.empty() ||
        op->inputs.size() != 2 || op->alpha != 1.0f)
      return false;
    const std::vector<int64_t>& dims = d->dims();
    if (op->kind == OpKind::kMatMul) {
      for (size_t i = 0; i + 1 < dims.size(); ++i) {
        if (dims[i] != 1) return false;
      }
    } else {
      int rank = region_.tensors[op->inputs[0]].rank;
      if (static_cast<int>(dims.size()) < rank - 1) return false;
      size_t c = dims.size() - (rank - 1);  // the channel dim, aligned
      if (out[1] != DimExpr(d->num_elements())) return false;
      for (size_t i = 0; i < dims.size(); ++i) {
        if (i != c && dims[i] != 1) return false;
      }
    }
    if (op->kind == OpKind::kMatMul) {  // the runtime broadcasts a bias of any rank
      StatusOr<int32_t> t = Use(v);
      if (!t.ok()) return false;
      op->inputs.push_back(*t);
      return true;
    }
    // Conv takes a [C] bias: a new constant viewing the same bytes.
    StatusOr<TensorDataRef> flat = TensorData::Make(DType::kF32, {d->num_elements()},
                                                    g_.value(v).data, d->data(), d->size_bytes());
    if (!flat.ok()) return false;
    op->inputs.push_back(AddConstant(kNoValue, *flat));
    return true;
  }

  // ---- Gelu ----

  void FindGelus() {
    for (NodeId n : order_) {
      const Node& erf = g_.node(n);
      if (erf.op_type != "Erf" || erf.inputs.size() != 1) continue;
      std::optional<GeluMatch> m = MatchGelu(
          g_, n, [&](NodeId u) { return in_region_.count(u) > 0; },
          [&](ValueId v) { return outputs_.count(v) > 0; });
      if (!m) continue;
      int index = static_cast<int>(gelus_.size());
      NodeId last = *std::max_element(m->nodes.begin(), m->nodes.end(), [&](NodeId a, NodeId b) {
        return Position(a) < Position(b);
      });
      gelu_last_[last] = index;
      gelu_by_x_[m->x] = index;
      gelu_member_.insert(m->nodes.begin(), m->nodes.end());
      gelus_.push_back(std::move(*m));
    }
  }

  // ---- Decomposed LayerNorm ----

  void FindLayerNorms() {
    for (NodeId n : order_) {
      if (gelu_member_.count(n) || ln_member_.count(n)) continue;
      std::optional<LnMatch> m = MatchLayerNorm(
          g_, n, [&](NodeId u) { return in_region_.count(u) > 0 && !gelu_member_.count(u); },
          [&](ValueId v) { return outputs_.count(v) > 0; });
      if (!m) continue;
      ln_root_[n] = static_cast<int>(lns_.size());  // the root Add comes last in order_
      ln_member_.insert(m->nodes.begin(), m->nodes.end());
      lns_.push_back(std::move(*m));
    }
  }

  Status EmitLayerNorm(const LnMatch& m) {
    Op op;
    op.kind = OpKind::kLayerNorm;
    op.axis = RankOf(g_, m.x) - 1;
    op.epsilon = m.epsilon;
    for (ValueId v : {m.x, m.gamma, m.beta}) {
      ASSIGN_OR_RETURN(int32_t t, Use(v));
      op.inputs.push_back(t);
    }
    for (NodeId u : m.nodes) consumed_.insert(u);
    return Emit(std::move(op), m.out);
  }

  size_t Position(NodeId n) const {
    return std::find(order_.begin(), order_.end(), n) - order_.begin();
  }

  Status EmitGelu(const GeluMatch& m) {
    Op op;
    op.kind = OpKind::kEltwise;
    op.eltwise = EltwiseAlg::kGeluErf;
    ASSIGN_OR_RETURN(int32_t x, Use(m.x));
    op.inputs = {x};
    for (NodeId u : m.nodes) consumed_.insert(u);
    return Emit(std::move(op), m.out);
  }

  const Graph& g_;
  std::vector<ValueId> inputs_;
  std::set<ValueId> outputs_;
  std::vector<ValueId> output_list_;
  std::set<NodeId> in_region_, consumed_, gelu_member_;
  std::vector<NodeId> order_;
  std::map<ValueId, int32_t> tensor_of_;
  std::set<int32_t> produced_;
  std::vector<GeluMatch> gelus_;
  std::map<NodeId, int> gelu_last_;
  std::map<ValueId, int> gelu_by_x_;
  std::vector<LnMatch> lns_;
  std::map<NodeId, int> ln_root_;  // root Add -> lns_ index
  std::set<NodeId> ln_member_;
  onednn::RegionProgram region_;
  compiler::ExternalCode code_;
};

}  // namespace

bool IsLayerNormRoot(const Graph& graph, NodeId node) {
  const std::vector<ValueId>& outs = graph.outputs();
  return MatchLayerNorm(
             graph, node, [](NodeId) { return true; },
             [&](ValueId v) { return std::find(outs.begin(), outs.end(), v) != outs.end(); })
      .has_value();
}

std::vector<std::vector<NodeId>> FindComposites(const Graph& graph) {
  std::vector<std::vector<NodeId>> groups;
  const std::vector<ValueId>& outs = graph.outputs();
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    std::optional<LnMatch> m = MatchLayerNorm(
        graph, n, [](NodeId) { return true; },
        [&](ValueId v) { return std::find(outs.begin(), outs.end(), v) != outs.end(); });
    if (m) groups.emplace_back(m->nodes.begin(), m->nodes.end());
  }
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    const Node& erf = graph.node(n);
    if (erf.op_type != "Erf" || erf.inputs.size() != 1 || !erf.domain.empty()) continue;
    std::optional<GeluMatch> m = MatchGelu(
        graph, n, [](NodeId) { return true; },
        [&](ValueId v) { return std::find(outs.begin(), outs.end(), v) != outs.end(); });
    if (m && IsF32(graph, m->out)) groups.emplace_back(m->nodes.begin(), m->nodes.end());
  }
  return groups;
}

StatusOr<compiler::ExternalCode> Codegen(const Graph& graph, const std::vector<NodeId>& nodes,
                                         const std::vector<ValueId>& inputs,
                                         const std::vector<ValueId>& outputs) {
  for (NodeId n : nodes) {
    if (n < 0 || n >= graph.num_nodes())
      return InvalidArgument("oneDNN codegen: node id " + std::to_string(n) + " is out of range");
  }
  for (ValueId v : inputs) {
    if (v < 0 || v >= graph.num_values())
      return InvalidArgument("oneDNN codegen: input value id " + std::to_string(v) +
                             " is out of range");
  }
  for (ValueId v : outputs) {
    if (v < 0 || v >= graph.num_values())
      return InvalidArgument("oneDNN codegen: output value id " + std::to_string(v) +
                             " is out of range");
  }
  return Generator(graph, nodes, inputs, outputs).Run();
}

}  // namespace kiln::onednn
