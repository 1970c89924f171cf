// Graph simplification after shape inference (simplify.h): local rewrites in topological order.
#include "compiler/passes/simplify.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/ops/attributes.h"
#include "compiler/ops/node_context.h"

namespace kiln::compiler {
namespace {

bool IsDefault(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The permutation of a Transpose node (default: reversed dims), or empty if malformed.
std::vector<int64_t> PermOf(const Graph& g, const Node& n) {
  const Value& in = g.value(n.inputs[0]);
  int rank = in.shape ? static_cast<int>(in.shape->size()) : -1;
  const Attribute* a = n.FindAttribute("perm");
  std::vector<int64_t> perm;
  if (a && a->type() == Attribute::Type::kInts && !a->ints().empty()) {
    perm = a->ints();
  } else {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) return {};
  return perm;
}

// The producer of v if it is a node of `op_type` in the default domain.
const Node* ProducerOf(const Graph& g, ValueId v, const std::set<std::string>& op_types,
                       NodeId* id) {
  const Value& val = g.value(v);
  if (val.kind != ValueKind::kNodeOutput || val.producer == kNoNode || val.data) return nullptr;
  const Node& p = g.node(val.producer);
  if (!IsDefault(p) || !op_types.count(p.op_type)) return nullptr;
  *id = val.producer;
  return &p;
}

// A Pad node's arguments as far as they are compile-time constants.
struct PadArgs {
  std::vector<int64_t> pads;    // begins then ends (per dim; with Pad-18 axes, per listed axis)
  std::optional<double> value;  // constant mode's fill; nullopt when known only at run time
  std::string mode;             // "constant", "reflect", "edge" or "wrap"
  bool axes = false;            // Pad-18's axes input is given
};

// The data of `v` if it is a compile-time constant (a graph input's default is not: the caller
// may pass another value).
const TensorData* ConstantData(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const Value& val = g.value(v);
  return val.kind == ValueKind::kGraphInput ? nullptr : val.data.get();
}

// Pad `n`'s pads and fill: inputs from opset 11, attributes before. Nullopt when the pads are
// not constants or an attribute has the wrong type.
std::optional<PadArgs> ReadPad(const Graph& g, const Node& n) {
  NodeAttributes attrs(n);
  PadArgs a;
  StatusOr<std::string> mode = attrs.GetString("mode", "constant");
  if (!mode.ok()) return std::nullopt;
  a.mode = *mode;
  if (n.inputs.size() >= 2 && n.inputs[1] != kNoValue) {
    const TensorData* pads = ConstantData(g, n.inputs[1]);
    if (!pads) return std::nullopt;
    StatusOr<std::vector<int64_t>> p = pads->ToInt64s();
    if (!p.ok()) return std::nullopt;
    a.pads = *p;
    if (n.inputs.size() < 3 || n.inputs[2] == kNoValue) {
      a.value = 0.0;
    } else if (const TensorData* fill = ConstantData(g, n.inputs[2]);
               fill && fill->num_elements() == 1) {
      a.value = fill->ToDoubles()[0];
    }
    a.axes = n.inputs.size() >= 4 && n.inputs[3] != kNoValue;
    return a;
  }
  StatusOr<std::optional<std::vector<int64_t>>> pads = attrs.GetInts("pads");
  StatusOr<float> fill = attrs.GetFloat("value", 0.0f);
  if (!pads.ok() || !*pads || !fill.ok()) return std::nullopt;
  a.pads = **pads;
  a.value = *fill;
  return a;
}

// Whether Pad node `n` pads nothing: its pads are known and all zero. Any mode then returns its
// input unchanged.
bool PadsNothing(const Graph& g, const Node& n) {
  std::optional<PadArgs> a = ReadPad(g, n);
  return a && std::all_of(a->pads.begin(), a->pads.end(), [](int64_t p) { return p == 0; });
}

// The only reader of Pad `n`'s output, reading it as input 0 and nothing else (not a graph
// output, not a subgraph capture); kNoNode otherwise.
NodeId SoleDataReader(const Graph& g, const Node& n) {
  ValueId out = n.outputs.empty() ? kNoValue : n.outputs[0];
  if (out == kNoValue || g.Users(out).size() != 1) return kNoNode;
  for (ValueId o : g.outputs()) {
    if (o == out) return kNoNode;
  }
  NodeId u = g.Users(out)[0];
  const Node& reader = g.node(u);
  if (reader.inputs.empty() || reader.inputs[0] != out) return kNoNode;
  if (std::count(reader.inputs.begin(), reader.inputs.end(), out) != 1) return kNoNode;
  const std::vector<ValueId>& implicit = reader.implicit_inputs;
  if (std::find(implicit.begin(), implicit.end(), out) != implicit.end()) return kNoNode;
  return u;
}

// The window attributes of Conv / AveragePool / MaxPool node `u` for `spatial` dims, when they
// parse and pad explicitly (auto_pad NOTSET or VALID, no ceil_mode).
std::optional<PoolAttributes> WindowOf(const Graph& g, const Node& u, int spatial) {
  PoolAttributes w;
  if (u.op_type == "Conv") {
    std::optional<std::vector<int64_t>> kernel;
    if (u.inputs.size() >= 2 && u.inputs[1] != kNoValue && g.value(u.inputs[1]).shape) {
      const SymbolicShape& ws = *g.value(u.inputs[1]).shape;
      kernel.emplace();
      for (size_t i = 2; i < ws.size() && kernel; ++i) {
        if (!ws[i].is_const()) kernel.reset();
        if (kernel) kernel->push_back(ws[i].const_value());
      }
    }
    StatusOr<ConvAttributes> c = ParseConvAttributes(u, spatial, kernel);
    if (!c.ok()) return std::nullopt;
    static_cast<WindowAttributes&>(w) = *c;
  } else {
    StatusOr<PoolAttributes> p = ParsePoolAttributes(u, spatial);
    if (!p.ok() || p->ceil_mode) return std::nullopt;
    w = *p;
  }
  if (w.auto_pad == AutoPad::kValid) w.pads.assign(2 * spatial, 0);
  if (w.auto_pad != AutoPad::kNotSet && w.auto_pad != AutoPad::kValid) return std::nullopt;
  return w;
}

// Whether a reader of a padded tensor (a Conv, AveragePool or MaxPool) sees the same with
// `fill` as its own padding: Conv and AveragePool pad with zeros (AveragePool then counts the
// padding, as it counted the padded zeros), MaxPool with -inf (and has no Indices output).
bool FillMatchesWindow(const Node& reader, double fill) {
  if (reader.op_type == "MaxPool") {
    bool indices = reader.outputs.size() > 1 && reader.outputs[1] != kNoValue;
    return !indices && std::isinf(fill) && fill < 0;
  }
  if (reader.op_type != "Conv" && reader.op_type != "AveragePool") return false;
  return fill == 0 && !std::signbit(fill);
}

// Folds Pad node `n` into the window of its only reader: exporters write avg_pool2d(3, 1,
// padding=1) as Pad(zeros) + AveragePool (inception_v3: nine of them, each a JIT Pad cutting
// the oneDNN region and a plain-layout pool). Only when the result is the same: a constant
// fill the reader pads with, on spatial dims only, none negative (a crop).
bool FoldPadIntoWindow(Graph& g, const Node& n) {
  std::optional<PadArgs> a = ReadPad(g, n);
  const Value& in = g.value(n.inputs[0]);
  if (!a || a->mode != "constant" || !a->value || a->axes || !in.shape) return false;
  int rank = static_cast<int>(in.shape->size()), spatial = rank - 2;
  if (spatial < 1 || static_cast<int>(a->pads.size()) != 2 * rank) return false;
  if (std::any_of(a->pads.begin(), a->pads.end(), [](int64_t p) { return p < 0; })) return false;
  if (a->pads[0] || a->pads[1] || a->pads[rank] || a->pads[rank + 1]) return false;
  NodeId u = SoleDataReader(g, n);
  if (u == kNoNode || !IsDefault(g.node(u)) || !FillMatchesWindow(g.node(u), *a->value))
    return false;
  std::optional<PoolAttributes> w = WindowOf(g, g.node(u), spatial);
  if (!w) return false;
  bool average = g.node(u).op_type == "AveragePool";
  bool padded = std::any_of(w->pads.begin(), w->pads.end(), [](int64_t p) { return p != 0; });
  if (average && padded && !w->count_include_pad) return false;
  std::vector<int64_t> pads = w->pads;
  for (int i = 0; i < spatial; ++i) {
    pads[i] += a->pads[2 + i];
    pads[spatial + i] += a->pads[rank + 2 + i];
    // A window wholly in the padding is legal ONNX, but oneDNN rejects such pads.
    if (pads[i] >= w->extent(i) || pads[spatial + i] >= w->extent(i)) return false;
  }
  Node& r = g.mutable_node(u);
  r.attributes.erase("auto_pad");
  r.attributes["pads"] = Attribute::Ints(pads);
  if (average) r.attributes["count_include_pad"] = Attribute::Int(1);
  g.SetNodeInput(u, 0, n.inputs[0]);
  return true;
}

// Points every reader of Pad node `n`'s output at its input instead, when all of them read it
// as an ordinary input (a subgraph's capture names the value) and it is not a graph output.
// torchvision's DenseNet exports each transition's AvgPool as Pad(pads = 0) + AveragePool:
// the Pad split its oneDNN region in four, with layout reorders and JIT copies between them.
bool BypassPad(Graph& g, const Node& n) {
  ValueId out = n.outputs.empty() ? kNoValue : n.outputs[0];
  if (out == kNoValue || !PadsNothing(g, n)) return false;
  for (ValueId o : g.outputs()) {
    if (o == out) return false;
  }
  std::vector<NodeId> users = g.Users(out);
  for (NodeId u : users) {
    const std::vector<ValueId>& implicit = g.node(u).implicit_inputs;
    if (std::find(implicit.begin(), implicit.end(), out) != implicit.end()) return false;
  }
  for (NodeId u : users) {
    for (size_t k = 0; k < g.node(u).inputs.size(); ++k) {
      if (g.node(u).inputs[k] == out) g.SetNodeInput(u, static_cast<int>(k), n.inputs[0]);
    }
  }
  return true;
}

// Gives each reader of a run-time DequantizeLinear after the first its own copy (ONNX Runtime's
// "dedicated QDQ pair"), so a vendor can fuse DQ -> Conv / MatMul -> Q per reader (a shared DQ
// output would escape each pattern). A DQ of a constant is folded and left alone; a reader
// through a subgraph capture keeps the original. Returns the copies made.
StatusOr<int> DedicateDequantize(Graph& g, NodeId n) {
  const Node& dq = g.node(n);
  if (!IsDefault(dq) || dq.op_type != "DequantizeLinear" || dq.outputs.empty()) return 0;
  ValueId v = dq.outputs[0];
  if (v == kNoValue || g.value(v).data || g.Users(v).size() < 2) return 0;
  std::vector<NodeId> readers(g.Users(v).begin() + 1, g.Users(v).end());
  int copies = 0;
  for (NodeId r : readers) {
    std::vector<size_t> slots;
    for (size_t i = 0; i < g.node(r).inputs.size(); ++i) {
      if (g.node(r).inputs[i] == v) slots.push_back(i);
    }
    if (slots.empty()) continue;  // reads v as a capture only
    ASSIGN_OR_RETURN(ValueId copy, g.AddValue(g.UniqueValueName(g.value(v).name + "_dedicated"),
                                              ValueKind::kNodeOutput));
    g.mutable_value(copy).dtype = g.value(v).dtype;
    g.mutable_value(copy).shape = g.value(v).shape;
    Node node = g.node(n);
    node.name = g.UniqueNodeName(node.name);
    node.outputs = {copy};
    RETURN_IF_ERROR(g.AddNode(std::move(node)).status());
    for (size_t i : slots) g.SetNodeInput(r, static_cast<int>(i), copy);
    ++copies;
  }
  return copies;
}

// Whether `v` holds an [N, C, spatial...] tensor: the output of a convolution, pool or batch
// norm, possibly through a few unary activations (which keep the layout's meaning).
bool ChannelsFirst(const Graph& g, ValueId v) {
  static const std::set<std::string> kSources = {
      "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "BatchNormalization"};
  static const std::set<std::string> kUnary = {"Relu",      "LeakyRelu", "Clip",    "Sigmoid",
                                               "Tanh",      "Elu",       "Selu",    "HardSigmoid",
                                               "HardSwish", "Softplus",  "Identity"};
  for (int depth = 0; depth < 4 && v != kNoValue; ++depth) {
    const Value& val = g.value(v);
    if (val.kind != ValueKind::kNodeOutput || val.producer == kNoNode || val.data) return false;
    const Node& p = g.node(val.producer);
    if (!IsDefault(p) || p.inputs.empty()) return false;
    if (kSources.count(p.op_type)) return true;
    if (!kUnary.count(p.op_type)) return false;
    v = p.inputs[0];
  }
  return false;
}

// The axes of reduce node `n` when they are known at compile time and non-empty (the
// attribute before opset 18, the constant input 1 from 18), normalized; empty otherwise.
std::set<int64_t> ReducedAxes(const Graph& g, const Node& n, int64_t rank) {
  std::vector<int64_t> axes;
  if (g.OpsetFor("") >= 18) {
    const TensorData* data = n.inputs.size() > 1 ? ConstantData(g, n.inputs[1]) : nullptr;
    if (!data) return {};
    StatusOr<std::vector<int64_t>> values = data->ToInt64s();
    if (!values.ok()) return {};
    axes = *values;
  } else {
    const Attribute* a = n.FindAttribute("axes");
    if (!a || a->type() != Attribute::Type::kInts) return {};
    axes = a->ints();
  }
  std::set<int64_t> normalized;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return {};
    normalized.insert(a < 0 ? a + rank : a);
  }
  return normalized;
}

// The global pool that computes reduce op `op_type` over every spatial dim, or null.
const char* GlobalPoolFor(const std::string& op_type) {
  if (op_type == "ReduceMax") return "GlobalMaxPool";
  if (op_type == "ReduceMean") return "GlobalAveragePool";
  return nullptr;
}

// ReduceMax / ReduceMean over every spatial dim of a channels-first float tensor is a
// GlobalMaxPool / GlobalAveragePool (then a Flatten from axis 1 when keepdims = 0). As a pool
// it joins its convolutions' oneDNN region and reads their blocked layout; as a reduction it cut
// the region, whose output was reordered to plain layout for the JIT to reduce it. PointNet's
// max over points after its shared-MLP convolutions: 2x512x1024 reordered (1.0 ms) for a 0.47 ms
// reduction; ShuffleNetV2's and MNASNet's mean over H, W before their classifier. Returns
// whether it rewrote `n`.
StatusOr<bool> ReduceToGlobalPool(Graph& g, NodeId n) {
  const Node& node = g.node(n);
  const char* pool_op = GlobalPoolFor(node.op_type);
  if (!pool_op || node.outputs.size() != 1 || node.outputs[0] == kNoValue) return false;
  const Value& x = g.value(node.inputs[0]);
  if (!x.shape || x.shape->size() < 3) return false;
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16 && x.dtype != DType::kF64) return false;
  const int64_t rank = static_cast<int64_t>(x.shape->size());
  std::set<int64_t> spatial;
  for (int64_t d = 2; d < rank; ++d) spatial.insert(d);
  if (ReducedAxes(g, node, rank) != spatial || !ChannelsFirst(g, node.inputs[0])) return false;
  const Attribute* keep = node.FindAttribute("keepdims");
  if (keep && keep->type() != Attribute::Type::kInt) return false;
  const bool keepdims = !keep || keep->i() != 0;
  SymbolicShape pooled = *x.shape;
  for (int64_t d = 2; d < rank; ++d) pooled[d] = DimExpr(1);
  const DType dtype = x.dtype;
  const ValueId out = node.outputs[0];
  if (node.inputs.size() > 1) g.SetNodeInput(n, 1, kNoValue);
  Node& pool = g.mutable_node(n);
  pool.op_type = pool_op;
  pool.attributes.clear();
  pool.inputs.resize(1);
  pool.dim_facts.clear();
  if (keepdims) return true;  // same output value and shape
  ASSIGN_OR_RETURN(ValueId mid, g.AddValue(g.UniqueValueName(g.value(out).name + "_pooled"),
                                           ValueKind::kNodeOutput));
  g.mutable_value(mid).dtype = dtype;
  g.mutable_value(mid).shape = pooled;
  g.mutable_node(n).outputs[0] = mid;
  g.mutable_value(mid).producer = n;
  g.mutable_value(out).producer = kNoNode;
  Node flatten;
  flatten.name = g.UniqueNodeName(g.node(n).name + "_flatten");
  flatten.op_type = "Flatten";
  flatten.attributes["axis"] = Attribute::Int(1);
  flatten.inputs = {mid};
  flatten.outputs = {out};
  RETURN_IF_ERROR(g.AddNode(std::move(flatten)).status());
  return true;
}

// Whether Dropout node `n` is the identity: not in training mode (opset 12's training_mode
// input absent or a constant false), or training with a constant zero ratio. The same rule as
// its lowering, which rejects the other cases.
bool DropoutIsIdentity(const Graph& g, const Node& n) {
  if (g.OpsetFor("") < 12 || n.inputs.size() < 3 || n.inputs[2] == kNoValue) return true;
  if (const TensorData* t = ConstantData(g, n.inputs[2]); t && t->num_elements() == 1) {
    StatusOr<std::vector<int64_t>> training = t->ToInt64s();
    if (training.ok() && (*training)[0] == 0) return true;
  }
  const TensorData* ratio = n.inputs.size() > 1 ? ConstantData(g, n.inputs[1]) : nullptr;
  return ratio && ratio->num_elements() == 1 && ratio->ToDoubles()[0] == 0;
}

// Whether `v` is read by a subgraph capture or is a graph output: its name must stay.
bool NamedOutsideInputs(const Graph& g, ValueId v) {
  for (ValueId o : g.outputs()) {
    if (o == v) return true;
  }
  for (NodeId u : g.Users(v)) {
    const std::vector<ValueId>& implicit = g.node(u).implicit_inputs;
    if (std::find(implicit.begin(), implicit.end(), v) != implicit.end()) return true;
  }
  return false;
}

// An inference Dropout is the identity: its readers read its input instead, and dead-node
// removal drops it. PyTorch exports every nn.Dropout with its mask output, which no one reads
// but which made the node a copy kernel writing an all-true mask (swin_t: 24 of them, 480
// calls a run). A mask that is read keeps the node (its lowering writes the mask); a data
// output that is a graph output or a capture keeps it with the mask dropped, as a view.
// Returns whether it changed `n`.
bool BypassDropout(Graph& g, NodeId n) {
  const Node& node = g.node(n);
  if (node.outputs.empty() || node.outputs[0] == kNoValue || !DropoutIsIdentity(g, node))
    return false;
  const ValueId out = node.outputs[0];
  const ValueId mask = node.outputs.size() > 1 ? node.outputs[1] : kNoValue;
  if (mask != kNoValue && (!g.Users(mask).empty() || NamedOutsideInputs(g, mask))) return false;
  bool changed = false;
  if (mask != kNoValue) {
    g.mutable_node(n).outputs.resize(1);
    g.mutable_value(mask).producer = kNoNode;
    changed = true;
  }
  if (NamedOutsideInputs(g, out)) return changed;
  const ValueId source = node.inputs[0];
  std::vector<NodeId> users = g.Users(out);
  for (NodeId u : users) {
    for (size_t k = 0; k < g.node(u).inputs.size(); ++k) {
      if (g.node(u).inputs[k] == out) g.SetNodeInput(u, static_cast<int>(k), source);
    }
  }
  return changed || !users.empty();
}

// ---- A Transpose sunk below Slice -> elementwise -> Concat ----

// Elementwise ops whose output has their chain input's shape when their other operands
// broadcast to it: these commute with a permutation of all operands' dims.
bool CommutesWithPermutation(const std::string& op) {
  static const std::set<std::string> kOps = {"Sigmoid", "Exp", "Relu", "Tanh", "Neg", "Abs",
                                             "Sqrt",    "Add", "Sub",  "Mul",  "Div", "Pow"};
  return kOps.count(op) > 0;
}

// The constant `data` of rank r with its dims permuted: out.dims[j] = in.dims[q[j]].
StatusOr<TensorDataRef> PermuteConstant(const TensorData& data, const std::vector<int64_t>& q) {
  const std::vector<int64_t>& in = data.dims();
  const size_t r = in.size(), size = DTypeSize(data.dtype());
  std::vector<int64_t> out_dims(r), in_strides(r, 1);
  for (size_t j = 0; j < r; ++j) out_dims[j] = in[q[j]];
  for (size_t d = r - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * in[d];
  std::vector<uint8_t> bytes(data.size_bytes());
  const uint8_t* src = static_cast<const uint8_t*>(data.data());
  std::vector<int64_t> index(r, 0);
  for (int64_t k = 0; k < data.num_elements(); ++k) {
    int64_t offset = 0;
    for (size_t j = 0; j < r; ++j) offset += index[j] * in_strides[q[j]];
    std::copy(src + offset * size, src + (offset + 1) * size, bytes.begin() + k * size);
    for (size_t j = r; j-- > 0;) {
      if (++index[j] < out_dims[j]) break;
      index[j] = 0;
    }
  }
  return TensorData::Copy(data.dtype(), out_dims, bytes.data(), bytes.size());
}

// One Concat input of a sinkable pattern: Slice(T, axes = [axis]) then `chain` (elementwise
// nodes, each read only by the next).
struct SlicedChain {
  NodeId slice = kNoNode;
  std::vector<NodeId> chain;  // from the Slice's reader to the Concat's input
};

// The only reader of `v` when it is read once, as an ordinary input, and named nowhere else.
NodeId OnlyReader(const Graph& g, ValueId v) {
  if (g.Users(v).size() != 1 || NamedOutsideInputs(g, v)) return kNoNode;
  NodeId u = g.Users(v)[0];
  const std::vector<ValueId>& in = g.node(u).inputs;
  return std::count(in.begin(), in.end(), v) == 1 ? u : kNoNode;
}

// Walks Concat input `v` back to a Slice of Transpose `*t` (set by the first input) along
// `axis` only, through elementwise nodes whose other operands are constants, all-ones, or
// full-rank values. Nullopt when it is not such a chain.
std::optional<SlicedChain> ChainToSlice(const Graph& g, ValueId v, int64_t axis, NodeId* t) {
  SlicedChain c;
  for (int depth = 0; depth < 8; ++depth) {
    const Value& val = g.value(v);
    if (val.kind != ValueKind::kNodeOutput || val.producer == kNoNode || val.data) return {};
    if (OnlyReader(g, v) == kNoNode) return {};
    const NodeId pid = val.producer;
    const Node& p = g.node(pid);
    if (!IsDefault(p) || p.outputs.size() != 1) return {};
    if (p.op_type == "Slice") {
      const Value& x = g.value(p.inputs[0]);
      if (x.kind != ValueKind::kNodeOutput || x.producer == kNoNode || x.data) return {};
      const Node& tr = g.node(x.producer);
      if (!IsDefault(tr) || tr.op_type != "Transpose" || (*t != kNoNode && *t != x.producer))
        return {};
      if (!x.shape) return {};
      const int64_t rank = static_cast<int64_t>(x.shape->size());
      if (p.inputs.size() < 4 || g.OpsetFor("") < 10) return {};
      const TensorData* axes = ConstantData(g, p.inputs[3]);
      StatusOr<std::vector<int64_t>> a =
          axes ? axes->ToInt64s() : StatusOr<std::vector<int64_t>>(InvalidArgument(""));
      if (!a.ok() || a->size() != 1 || (*a)[0] < -rank || (*a)[0] >= rank) return {};
      if (((*a)[0] + rank) % rank != axis) return {};
      for (int k = 1; k < 5; ++k) {
        if (k < static_cast<int>(p.inputs.size()) && p.inputs[k] != kNoValue &&
            !ConstantData(g, p.inputs[k]))
          return {};
      }
      *t = x.producer;
      c.slice = pid;
      std::reverse(c.chain.begin(), c.chain.end());
      return c;
    }
    if (!CommutesWithPermutation(p.op_type) || p.inputs.empty()) return {};
    // The chain input: the first operand of the output's shape that a chain node or the Slice
    // makes for this node alone. The others are all-ones, constants, or full-rank run-time
    // values (YOLO's grid), each transposed back.
    ValueId next = kNoValue;
    for (ValueId in : p.inputs) {
      const Value& iv = g.value(in);
      if (!iv.shape) return {};
      bool ones = std::all_of(iv.shape->begin(), iv.shape->end(), [](const DimExpr& d) {
        return d.is_const() && d.const_value() == 1;
      });
      if (ones) continue;  // a scalar (of any rank up to the output's) broadcasts in any layout
      if (iv.shape->size() != val.shape->size()) return {};
      if (next != kNoValue || iv.data || *iv.shape != *val.shape) continue;
      if (iv.kind != ValueKind::kNodeOutput || iv.producer == kNoNode) continue;
      const std::string& op = g.node(iv.producer).op_type;
      if ((op == "Slice" || CommutesWithPermutation(op)) && OnlyReader(g, in) == pid) next = in;
    }
    if (next == kNoValue) return {};
    c.chain.push_back(pid);
    v = next;
  }
  return {};
}

// Adds a node `y` = Transpose(`x`, `perm`) named `name` (made unique).
Status AddTranspose(Graph& g, const std::string& name, const std::vector<int64_t>& perm, ValueId x,
                    ValueId y) {
  Node tr;
  tr.name = g.UniqueNodeName(name);
  tr.op_type = "Transpose";
  tr.attributes["perm"] = Attribute::Ints(perm);
  tr.inputs = {x};
  tr.outputs = {y};
  return g.AddNode(std::move(tr)).status();
}

// Concat(f_i(Slice(Transpose(x, perm), axis)), axis) = Transpose(Concat(f_i'(Slice(x, perm[axis])),
// perm[axis]), perm), where f_i' reads its other operands transposed back (constants permuted
// here, run-time ones through a new Transpose). YOLO's box decode: the head's [b, 3, 15, h, w]
// is transposed to [b, 3, h, w, 15] and sliced into rows of 2, 2 and 11 channels, each
// decoded by a short elementwise chain; rows that short do not vectorize (the kernels ran 4x
// slower than over contiguous data). Sliced before the Transpose, each row is h*w long.
// Returns whether it rewrote Concat node `n`.
StatusOr<bool> SinkTransposeBelowConcat(Graph& g, NodeId n) {
  const Node& concat = g.node(n);
  if (concat.outputs.size() != 1 || concat.inputs.size() < 2) return false;
  const ValueId out = concat.outputs[0];
  const Value& ov = g.value(out);
  if (!ov.shape || ov.shape->size() < 2) return false;
  const int64_t rank = static_cast<int64_t>(ov.shape->size());
  const Attribute* ax = concat.FindAttribute("axis");
  if (!ax || ax->type() != Attribute::Type::kInt || ax->i() < -rank || ax->i() >= rank)
    return false;
  const int64_t axis = ax->i() < 0 ? ax->i() + rank : ax->i();
  NodeId t = kNoNode;
  std::vector<SlicedChain> chains;
  for (ValueId in : concat.inputs) {
    if (in == kNoValue || std::count(concat.inputs.begin(), concat.inputs.end(), in) != 1)
      return false;
    std::optional<SlicedChain> c = ChainToSlice(g, in, axis, &t);
    if (!c) return false;
    chains.push_back(*c);
  }
  // Only when the Transpose of x dies: with another reader (LLaMA's rotary embedding reads
  // the transposed q twice, sliced and whole) the rewrite would add a Transpose, not move one.
  const ValueId transposed = g.node(t).outputs[0];
  if (NamedOutsideInputs(g, transposed)) return false;
  for (NodeId u : g.Users(transposed)) {
    if (std::none_of(chains.begin(), chains.end(),
                     [u](const SlicedChain& c) { return c.slice == u; }))
      return false;
  }
  const std::vector<int64_t> perm = PermOf(g, g.node(t));
  if (static_cast<int64_t>(perm.size()) != rank) return false;
  std::vector<int64_t> inverse(rank);
  for (int64_t k = 0; k < rank; ++k) inverse[perm[k]] = k;
  auto permuted = [&](const SymbolicShape& s) {
    SymbolicShape r = s;
    for (int64_t j = 0; j < rank; ++j) r[j] = s[inverse[j]];
    return r;
  };
  const ValueId source = g.node(t).inputs[0];
  const TensorDataRef new_axes = TensorData::FromInt64s({1}, {perm[axis]});
  // The other operands, each transposed once however many nodes read it.
  std::map<ValueId, ValueId> moved;
  auto move_operand = [&](ValueId v) -> StatusOr<ValueId> {
    const Value& val = g.value(v);
    bool ones = std::all_of(val.shape->begin(), val.shape->end(),
                            [](const DimExpr& d) { return d.is_const() && d.const_value() == 1; });
    if (ones) return v;
    if (moved.count(v)) return moved[v];
    ASSIGN_OR_RETURN(ValueId m,
                     g.AddValue(g.UniqueValueName(val.name + "_untransposed"),
                                val.data ? ValueKind::kConstant : ValueKind::kNodeOutput));
    g.mutable_value(m).dtype = g.value(v).dtype;
    g.mutable_value(m).shape = permuted(*g.value(v).shape);
    if (g.value(v).data) {
      ASSIGN_OR_RETURN(g.mutable_value(m).data, PermuteConstant(*g.value(v).data, inverse));
    } else {
      RETURN_IF_ERROR(AddTranspose(g, g.value(v).name + "_untranspose", inverse, v, m));
    }
    moved[v] = m;
    return m;
  };
  for (const SlicedChain& c : chains) {
    ASSIGN_OR_RETURN(ValueId axes, g.AddValue(g.UniqueValueName(g.node(c.slice).name + "_axes"),
                                              ValueKind::kConstant));
    g.mutable_value(axes).dtype = DType::kI64;
    g.mutable_value(axes).shape = SymbolicShape{DimExpr(1)};
    g.mutable_value(axes).data = new_axes;
    g.SetNodeInput(c.slice, 0, source);
    g.SetNodeInput(c.slice, 3, axes);
    ValueId prev = g.node(c.slice).outputs[0];
    g.mutable_value(prev).shape = permuted(*g.value(prev).shape);
    for (NodeId m : c.chain) {
      for (size_t k = 0; k < g.node(m).inputs.size(); ++k) {
        ValueId in = g.node(m).inputs[k];
        if (in == prev) continue;
        ASSIGN_OR_RETURN(ValueId moved_in, move_operand(in));
        g.SetNodeInput(m, static_cast<int>(k), moved_in);
      }
      prev = g.node(m).outputs[0];
      g.mutable_value(prev).shape = permuted(*g.value(prev).shape);
    }
  }
  ASSIGN_OR_RETURN(ValueId mid, g.AddValue(g.UniqueValueName(g.value(out).name + "_untransposed"),
                                           ValueKind::kNodeOutput));
  g.mutable_value(mid).dtype = g.value(out).dtype;
  g.mutable_value(mid).shape = permuted(*g.value(out).shape);
  Node& cn = g.mutable_node(n);
  cn.attributes["axis"] = Attribute::Int(perm[axis]);
  cn.outputs[0] = mid;
  g.mutable_value(mid).producer = n;
  g.mutable_value(out).producer = kNoNode;
  RETURN_IF_ERROR(AddTranspose(g, g.node(n).name + "_transpose", perm, mid, out));
  return true;
}

}  // namespace

Status Simplify(Graph& g, SimplifyStats* stats) {
  SimplifyStats local;
  SimplifyStats& st = stats ? *stats : local;
  ASSIGN_OR_RETURN(std::vector<NodeId> order, g.TopologicalOrder());
  static const std::set<std::string> kTranspose = {"Transpose"};
  // Views whose output depends only on the element order and the output shape.
  static const std::set<std::string> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  for (NodeId n : order) {
    ASSIGN_OR_RETURN(int copies, DedicateDequantize(g, n));
    st.dequantize_dedicated += copies;
    Node& node = g.mutable_node(n);
    if (!IsDefault(node) || node.inputs.empty() || node.inputs[0] == kNoValue) continue;
    if (node.op_type == "Transpose") {
      NodeId pid;
      const Node* p = ProducerOf(g, node.inputs[0], kTranspose, &pid);
      if (!p || p->inputs.empty() || p->inputs[0] == kNoValue) continue;
      std::vector<int64_t> outer = PermOf(g, node), inner = PermOf(g, *p);
      if (outer.empty() || outer.size() != inner.size()) continue;
      // out[k] = mid[outer[k]] = in[inner[outer[k]]].
      std::vector<int64_t> composed;
      for (int64_t k : outer) composed.push_back(inner[k]);
      ValueId source = p->inputs[0];
      node.attributes["perm"] = Attribute::Ints(composed);
      g.SetNodeInput(n, 0, source);
      ++st.transposes_merged;
    } else if (node.op_type == "CastLike" && node.inputs.size() == 2 &&
               node.inputs[1] != kNoValue) {
      // Only `like`'s dtype matters, and inference knows it: as a Cast the node no longer reads
      // `like`, so its kernel does not take it and a graph input used only there may have any
      // shape (the emitter declares such an input dtype-only).
      int to = DTypeToOnnx(g.value(node.inputs[1]).dtype);
      if (to == 0) continue;
      node.op_type = "Cast";
      node.attributes["to"] = Attribute::Int(to);
      g.SetNodeInput(n, 1, kNoValue);
      g.mutable_node(n).inputs.resize(1);
      ++st.castlikes_to_cast;
    } else if (kViews.count(node.op_type)) {
      // Reshape(Reshape(x)) reads x: the element order is the same, the node's own target
      // (its shape input or axes, and its inferred output shape) decides the result. Only the
      // first input is rewired; a Reshape whose shape input has 0 entries ("copy this dim")
      // refers to its input's dims, so it is left alone.
      NodeId pid;
      const Node* p = ProducerOf(g, node.inputs[0], kViews, &pid);
      if (!p || p->inputs.empty() || p->inputs[0] == kNoValue) continue;
      if (node.op_type != "Reshape" && node.op_type != "Flatten") continue;
      if (node.op_type == "Reshape") {
        if (node.inputs.size() < 2 || node.inputs[1] == kNoValue) continue;
        const Value& shape = g.value(node.inputs[1]);
        if (!shape.data) continue;
        StatusOr<std::vector<int64_t>> dims = shape.data->ToInt64s();
        if (!dims.ok()) continue;
        bool copies = false;
        for (int64_t d : *dims) copies |= d == 0;
        if (copies) continue;
      } else {
        continue;  // Flatten's axis refers to its input's rank
      }
      g.SetNodeInput(n, 0, p->inputs[0]);
      ++st.views_shortcut;
    } else if (node.op_type == "Pad" && BypassPad(g, node)) {
      ++st.pads_bypassed;
    } else if (node.op_type == "Pad" && FoldPadIntoWindow(g, node)) {
      ++st.pads_folded;
    } else if (node.op_type == "Concat") {
      // Last in the iteration: a new node may move `node`.
      ASSIGN_OR_RETURN(bool sunk, SinkTransposeBelowConcat(g, n));
      st.transposes_sunk += sunk;
    } else if (node.op_type == "Dropout" && BypassDropout(g, n)) {
      ++st.dropouts_bypassed;
    } else if (GlobalPoolFor(node.op_type)) {
      // Last in the iteration: a new node may move `node`.
      const bool max = node.op_type == "ReduceMax";
      ASSIGN_OR_RETURN(bool pooled, ReduceToGlobalPool(g, n));
      (max ? st.reduce_max_pooled : st.reduce_mean_pooled) += pooled;
    }
  }
  return Status::Ok();
}

}  // namespace kiln::compiler
