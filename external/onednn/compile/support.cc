// The oneDNN codegen's support side: which nodes oneDNN runs (IsSupported), the composites it
// runs only whole (FindComposites, IsLayerNormRoot), and the graph helpers and matchers the
// Generator in codegen.cc shares (support.h).
#include "external/onednn/compile/support.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/ops/attributes.h"
#include "external/onednn/compile/codegen.h"
#include "external/onednn/region.h"

namespace kiln::onednn {
namespace internal {

using compiler::Attribute;
using compiler::ValueKind;

// ---- Attribute and value helpers -----------------------------------------------------------

namespace {

std::vector<int64_t> GetInts(const Node& n, const char* name) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kInts ? a->ints() : std::vector<int64_t>{};
}

std::optional<float> Scalar(const Graph& g, ValueId v) {
  const TensorData* d = Data(g, v);
  if (!d || d->num_elements() != 1) return std::nullopt;
  return static_cast<float>(d->ToDoubles()[0]);
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

}  // namespace

std::string GetString(const Node& n, const char* name, const std::string& def) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kString ? a->s() : def;
}

int64_t GetInt(const Node& n, const char* name, int64_t def) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kInt ? a->i() : def;
}

float GetFloat(const Node& n, const char* name, float def) {
  const Attribute* a = n.FindAttribute(name);
  return a && a->type() == Attribute::Type::kFloat ? a->f() : def;
}

ValueId In(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : kNoValue; }

const TensorData* Data(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const compiler::Value& val = g.value(v);
  if (val.kind == ValueKind::kGraphInput) return nullptr;  // overridable default
  return val.data.get();
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

int64_t NormalizeAxis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

bool BroadcastsInto(const SymbolicShape& small, const SymbolicShape& big) {
  if (small.size() > big.size()) return false;
  size_t off = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i) {
    if (small[i] != DimExpr(1) && small[i] != big[i + off]) return false;
  }
  return true;
}

// ---- Eltwise and binary ops -----------------------------------------------------------------

namespace {

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

}  // namespace

std::optional<EltwiseSpec> EltwiseOf(const Graph& g, const Node& n, bool scalar_binaries) {
  const std::string& op = n.op_type;
  size_t data = 0;
  if (scalar_binaries) {
    if (std::optional<EltwiseSpec> e = ScalarBinaryAsEltwise(g, n, &data)) return e;
  }
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

namespace {

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
  // Mobilenet_v3's squeeze-excite gate: unclaimed, it split the network into a region per
  // block, each returning its blocked activations as plain copies for the JIT and taking them
  // back (a fifth of mobilenet_v3_large's time). The codegen runs it as linear + clip.
  if (op == "HardSigmoid") return true;
  // ShuffleNet's channel split: a copy of some channels (kChannels) on the region's layout.
  if (op == "Slice") return ChannelSlice(g, n).has_value();
  if (op == "Split") return ChannelSplit(g, n).has_value();
  // YOLO's top-down neck: nearest Upsample x2 between convs (region op kResize).
  if (op == "Resize" || op == "Upsample") return UpsampleFactors(g, n).has_value();
  // A ConvTranspose as phase convolutions ends in one (region op kDepthToSpace); outside, it
  // cut every DCGAN layer into a region of its own.
  if (op == "DepthToSpace") {
    const int64_t s = GetInt(n, "blocksize", 0);
    const std::string mode = GetString(n, "mode", "DCR");
    return rank == 4 && s >= 1 && s <= kMaxUpsampleFactor && (mode == "DCR" || mode == "CRD");
  }
  return EltwiseOf(g, n).has_value();
}

}  // namespace

// ---- Erf-based Gelu: 0.5 * x * (1 + erf(x / sqrt(2))) ---------------------------------------

namespace {

bool Near(std::optional<float> v, double want) { return v && std::fabs(*v - want) < 1e-3; }

}  // namespace

std::optional<ValueId> Other(const Node& n, ValueId v) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v && n.op_type != "Div" && n.op_type != "Sub") return n.inputs[0];
  return std::nullopt;
}

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

namespace {

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

}  // namespace

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

// ---- Channel copies: Slice on dim 1 and ShuffleNet's channel shuffle -------------------------

std::optional<std::pair<int64_t, int64_t>> ChannelSlice(const Graph& g, const Node& n) {
  if (n.op_type != "Slice" || g.OpsetFor("") < 10 || n.inputs.size() < 4 || n.outputs.empty())
    return std::nullopt;
  ValueId x = n.inputs[0];
  if (!IsF32(g, x) || RankOf(g, x) < 3 || RankOf(g, x) > 5) return std::nullopt;
  const DimExpr& cd = (*ShapeOf(g, x))[1];
  if (!cd.is_const()) return std::nullopt;
  int64_t c = cd.const_value();
  auto ints = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    const TensorData* d = Data(g, In(n, i));
    if (!d || d->num_elements() != 1) return std::nullopt;
    StatusOr<std::vector<int64_t>> v = d->ToInt64s();
    if (!v.ok()) return std::nullopt;
    return *v;
  };
  std::optional<std::vector<int64_t>> starts = ints(1), ends = ints(2), axes = ints(3);
  if (!starts || !ends || !axes || NormalizeAxis((*axes)[0], RankOf(g, x)) != 1)
    return std::nullopt;
  if (In(n, 4) != kNoValue) {
    std::optional<std::vector<int64_t>> steps = ints(4);
    if (!steps || (*steps)[0] != 1) return std::nullopt;
  }
  auto clamp = [c](int64_t v) {
    if (v < 0) v += c;
    return std::min(std::max<int64_t>(v, 0), c);
  };
  int64_t start = clamp((*starts)[0]), end = clamp((*ends)[0]);
  if (end <= start) return std::nullopt;
  return std::make_pair(start, end - start);
}

std::optional<std::vector<std::pair<int64_t, int64_t>>> ChannelSplit(const Graph& g,
                                                                     const Node& n) {
  if (n.op_type != "Split" || n.inputs.empty() || n.outputs.empty()) return std::nullopt;
  ValueId x = n.inputs[0];
  if (!IsF32(g, x) || RankOf(g, x) < 3 || RankOf(g, x) > 5) return std::nullopt;
  if (NormalizeAxis(GetInt(n, "axis", 0), RankOf(g, x)) != 1) return std::nullopt;
  const DimExpr& cd = (*ShapeOf(g, x))[1];
  if (!cd.is_const()) return std::nullopt;
  int64_t c = cd.const_value(), parts = static_cast<int64_t>(n.outputs.size());
  std::vector<int64_t> sizes = GetInts(n, "split");
  if (In(n, 1) != kNoValue) {
    const TensorData* d = Data(g, In(n, 1));
    if (!d) return std::nullopt;
    StatusOr<std::vector<int64_t>> v = d->ToInt64s();
    if (!v.ok()) return std::nullopt;
    sizes = *v;
  }
  if (sizes.empty()) {
    int64_t each = (c + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::min(each, c - i * each));
  }
  if (static_cast<int64_t>(sizes.size()) != parts) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t at = 0;
  for (int64_t s : sizes) {
    if (s < 1) return std::nullopt;
    ranges.push_back({at, s});
    at += s;
  }
  if (at != c) return std::nullopt;
  return ranges;
}

namespace {

// Whether Resize-11+'s (coordinate_transformation_mode, nearest_mode) maps output index o to
// input index o / s for every whole scale s >= 1 (o = k s + r, 0 <= r < s):
//   asymmetric, floor:            floor(o / s) = k
//   tf_half_pixel_for_nn, floor:  (o + 0.5) / s lies in (k, k + 1)
//   half_pixel (also pytorch_half_pixel and half_pixel_symmetric, equal to it when the output
//   length is s times the input's), either round_prefer: (o + 0.5) / s - 0.5 lies in
//   (k - 0.5, k + 0.5), so rounds to k whichever way ties go (no tie occurs).
// Every other pair (half_pixel with floor or ceil, asymmetric rounding, align_corners,
// tf_crop_and_resize) picks other pixels for some s.
bool RepeatsPixels(const std::string& coord, const std::string& nearest) {
  if (nearest == "floor") return coord == "asymmetric" || coord == "tf_half_pixel_for_nn";
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil") return false;
  return coord == "half_pixel" || coord == "pytorch_half_pixel" || coord == "half_pixel_symmetric";
}

// The constant values of input i as doubles; nullopt when absent or not known.
std::optional<std::vector<double>> ConstDoubles(const Graph& g, const Node& n, size_t i) {
  const TensorData* d = Data(g, In(n, i));
  if (!d) return std::nullopt;
  return d->ToDoubles();
}

}  // namespace

std::optional<std::vector<int64_t>> UpsampleFactors(const Graph& g, const Node& n) {
  const bool upsample = n.op_type == "Upsample";
  if ((!upsample && n.op_type != "Resize") || n.outputs.empty()) return std::nullopt;
  ValueId x = In(n, 0);
  if (!IsF32(g, x) || !IsF32(g, n.outputs[0])) return std::nullopt;
  const int rank = RankOf(g, x);
  if (rank < 3 || rank > 5 || GetString(n, "mode", "nearest") != "nearest") return std::nullopt;
  // Every operand but x (roi, scales, sizes) is absent or a constant: the region reads x only.
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i] != kNoValue && !Data(g, n.inputs[i])) return std::nullopt;
  }
  const int opset = g.OpsetFor("");
  // Upsample and Resize-10 floor the asymmetric coordinate when scaling up.
  if (!upsample && opset >= 11 &&
      !RepeatsPixels(GetString(n, "coordinate_transformation_mode", "half_pixel"),
                     GetString(n, "nearest_mode", "round_prefer_floor")))
    return std::nullopt;
  compiler::ResizeAttributes attrs;
  for (int d = 0; d < rank; ++d) attrs.axes.push_back(d);
  if (!upsample) {
    StatusOr<compiler::ResizeAttributes> parsed = compiler::ParseResizeAttributes(n, rank);
    if (!parsed.ok()) return std::nullopt;
    attrs = *parsed;
  }
  std::optional<std::vector<double>> scales;
  if (upsample) {
    const Attribute* a = n.FindAttribute("scales");
    if (a && a->type() == Attribute::Type::kFloats) {
      scales.emplace(a->floats().begin(), a->floats().end());
    } else {
      scales = ConstDoubles(g, n, 1);
    }
  } else {
    scales = ConstDoubles(g, n, opset < 11 ? 1 : 2);
    if (!scales || scales->empty()) {  // sizes instead: whole multiples of constant dims
      std::optional<std::vector<double>> sizes = ConstDoubles(g, n, 3);
      if (opset < 11 || !sizes || sizes->size() != attrs.axes.size() ||
          attrs.policy != compiler::AspectPolicy::kStretch)
        return std::nullopt;
      scales.emplace();
      for (size_t i = 0; i < sizes->size(); ++i) {
        const DimExpr& in = (*ShapeOf(g, x))[attrs.axes[i]];
        if (!in.is_const() || in.const_value() < 1) return std::nullopt;
        const double len = static_cast<double>(in.const_value());
        if (std::fmod((*sizes)[i], len) != 0) return std::nullopt;
        scales->push_back((*sizes)[i] / len);
      }
    }
  }
  if (!scales || scales->size() != attrs.axes.size()) return std::nullopt;
  std::vector<int64_t> factors(rank, 1);
  for (size_t i = 0; i < scales->size(); ++i) {
    const double s = (*scales)[i];
    if (!(s >= 1 && s <= static_cast<double>(kMaxUpsampleFactor) && s == std::floor(s)))
      return std::nullopt;
    factors[attrs.axes[i]] = static_cast<int64_t>(s);
  }
  if (factors[0] != 1 || factors[1] != 1) return std::nullopt;
  return std::vector<int64_t>(factors.begin() + 2, factors.end());
}

std::optional<ShuffleMatch> MatchShuffle(const Graph& g, NodeId root,
                                         const std::function<bool(NodeId)>& allowed,
                                         const std::function<bool(ValueId)>& escapes) {
  const Node& back = g.node(root);
  if (back.op_type != "Reshape" || !back.domain.empty() || back.inputs.empty() ||
      back.outputs.empty())
    return std::nullopt;
  std::optional<NodeId> tr = Producer(g, back.inputs[0], "Transpose", 1, allowed, escapes);
  if (!tr) return std::nullopt;
  const Node& t = g.node(*tr);
  std::optional<NodeId> split = Producer(g, t.inputs[0], "Reshape", 1, allowed, escapes);
  if (!split) return std::nullopt;
  ShuffleMatch m;
  m.x = g.node(*split).inputs[0];
  m.out = back.outputs[0];
  if (!IsF32(g, m.x) || !IsF32(g, m.out) || !IsF32(g, t.inputs[0])) return std::nullopt;
  const SymbolicShape &xs = *ShapeOf(g, m.x), &mid = *ShapeOf(g, t.inputs[0]);
  int r = static_cast<int>(xs.size());
  if (r < 3 || r > 5 || *ShapeOf(g, m.out) != xs || static_cast<int>(mid.size()) != r + 1)
    return std::nullopt;
  std::vector<int64_t> perm = GetInts(t, "perm");
  if (static_cast<int>(perm.size()) != r + 1) return std::nullopt;
  for (int i = 0; i <= r; ++i) {
    if (perm[i] != (i == 1 ? 2 : i == 2 ? 1 : i)) return std::nullopt;
  }
  if (!xs[1].is_const() || !mid[1].is_const() || !mid[2].is_const() || mid[0] != xs[0])
    return std::nullopt;
  for (int i = 2; i < r; ++i) {
    if (mid[i + 1] != xs[i]) return std::nullopt;
  }
  m.group = mid[1].const_value();
  if (m.group < 1 || m.group * mid[2].const_value() != xs[1].const_value()) return std::nullopt;
  m.nodes = {root, *tr, *split};
  return m;
}

}  // namespace internal

// ---- The predicates codegen.h declares ------------------------------------------------------

bool IsSupported(const compiler::Graph& graph, compiler::NodeId node) {
  const compiler::Node& n = graph.node(node);
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  for (compiler::ValueId v : n.outputs) {
    if (v != compiler::kNoValue && !graph.value(v).shape) return false;
  }
  if (n.outputs.empty() || !internal::IsF32(graph, n.outputs[0])) return false;
  return internal::SupportedImpl(graph, n);
}

bool IsLayerNormRoot(const compiler::Graph& graph, compiler::NodeId node) {
  return internal::MatchesInGraph(graph, node, internal::MatchLayerNorm);
}

bool IsShuffleRoot(const compiler::Graph& graph, compiler::NodeId node) {
  return internal::MatchesInGraph(graph, node, internal::MatchShuffle);
}

std::vector<std::vector<compiler::NodeId>> FindComposites(const compiler::Graph& graph) {
  std::vector<std::vector<compiler::NodeId>> groups;
  const std::vector<compiler::ValueId>& outs = graph.outputs();
  for (compiler::NodeId n = 0; n < graph.num_nodes(); ++n) {
    std::optional<internal::LnMatch> m = internal::MatchLayerNorm(
        graph, n, [](compiler::NodeId) { return true; },
        [&](compiler::ValueId v) { return std::find(outs.begin(), outs.end(), v) != outs.end(); });
    if (m) groups.emplace_back(m->nodes.begin(), m->nodes.end());
  }
  for (compiler::NodeId n = 0; n < graph.num_nodes(); ++n) {
    const compiler::Node& erf = graph.node(n);
    if (erf.op_type != "Erf" || erf.inputs.size() != 1 || !erf.domain.empty()) continue;
    std::optional<internal::GeluMatch> m = internal::MatchGelu(
        graph, n, [](compiler::NodeId) { return true; },
        [&](compiler::ValueId v) { return std::find(outs.begin(), outs.end(), v) != outs.end(); });
    if (m && internal::IsF32(graph, m->out)) groups.emplace_back(m->nodes.begin(), m->nodes.end());
  }
  return groups;
}

}  // namespace kiln::onednn
