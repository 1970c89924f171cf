// Graph IR: tensor data, attributes, building, use-def lists, topological order, verifier.
#include "compiler/ir/graph.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <deque>
#include <set>
#include <sstream>

namespace kiln::compiler {

std::string ShapeToString(const SymbolicShape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].ToString();
  }
  return s + "]";
}

// ---- ONNX dtype codes ----------------------------------------------------------------------

namespace {

// TensorProto.DataType, in code order (0 = UNDEFINED).
constexpr const char* kOnnxTypeNames[] = {
    "UNDEFINED",      "FLOAT",      "UINT8",         "INT8",       "UINT16",   "INT16",
    "INT32",          "INT64",      "STRING",        "BOOL",       "FLOAT16",  "DOUBLE",
    "UINT32",         "UINT64",     "COMPLEX64",     "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"};
constexpr int kNumOnnxTypes = sizeof(kOnnxTypeNames) / sizeof(kOnnxTypeNames[0]);

}  // namespace

std::string OnnxTypeName(int64_t onnx_type) {
  if (onnx_type >= 0 && onnx_type < kNumOnnxTypes) return kOnnxTypeNames[onnx_type];
  return "TYPE(" + std::to_string(onnx_type) + ")";
}

StatusOr<DType> DTypeFromOnnx(int64_t onnx_type) {
  switch (onnx_type) {
    case 1:
      return DType::kF32;
    case 2:
      return DType::kU8;
    case 3:
      return DType::kI8;
    case 4:
      return DType::kU16;
    case 5:
      return DType::kI16;
    case 6:
      return DType::kI32;
    case 7:
      return DType::kI64;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kF16;
    case 11:
      return DType::kF64;
    case 12:
      return DType::kU32;
    case 13:
      return DType::kU64;
    case 16:
      return DType::kBF16;
    default:
      break;
  }
  if (onnx_type > 0 && onnx_type < kNumOnnxTypes)
    return Unsupported("element type " + OnnxTypeName(onnx_type) + " is not supported by kiln");
  return InvalidFormat("unknown ONNX element type " + std::to_string(onnx_type));
}

int DTypeToOnnx(DType dtype) {
  for (int code = 1; code < kNumOnnxTypes; ++code) {
    StatusOr<DType> d = DTypeFromOnnx(code);
    if (d.ok() && *d == dtype) return code;
  }
  return 0;
}

// ---- TensorData ----------------------------------------------------------------------------

StatusOr<TensorDataRef> TensorData::Make(DType dtype, std::vector<int64_t> dims,
                                         std::shared_ptr<const void> owner, const void* bytes,
                                         size_t size) {
  if (DTypeSize(dtype) == 0) return InvalidFormat("tensor data has no valid dtype");
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidFormat("tensor dim " + std::to_string(d) + " is negative");
    if (__builtin_mul_overflow(n, d, &n))
      return InvalidFormat("tensor element count overflows int64");
  }
  uint64_t expect;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n), DTypeSize(dtype), &expect))
    return InvalidFormat("tensor byte size overflows");
  if (expect != size) {
    return InvalidFormat("tensor of " + std::to_string(n) + " " + DTypeName(dtype) +
                         " elements needs " + std::to_string(expect) + " bytes, has " +
                         std::to_string(size));
  }
  auto t = std::shared_ptr<TensorData>(new TensorData());
  t->dtype_ = dtype;
  t->dims_ = std::move(dims);
  t->num_elements_ = n;
  t->owner_ = std::move(owner);
  t->data_ = bytes;
  t->size_ = size;
  return TensorDataRef(std::move(t));
}

StatusOr<TensorDataRef> TensorData::Copy(DType dtype, std::vector<int64_t> dims, const void* bytes,
                                         size_t size) {
  auto buf = std::make_shared<std::vector<uint8_t>>(size);
  if (size) std::memcpy(buf->data(), bytes, size);
  const void* p = buf->data();
  return Make(dtype, std::move(dims), std::move(buf), p, size);
}

TensorDataRef TensorData::FromInt64s(std::vector<int64_t> dims,
                                     const std::vector<int64_t>& values) {
  StatusOr<TensorDataRef> t =
      Copy(DType::kI64, std::move(dims), values.data(), values.size() * sizeof(int64_t));
  assert(t.ok());
  return *t;
}

namespace {

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

template <typename T>
T Load(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

double ElementAsDouble(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::kF32:
      return Load<float>(p, i);
    case DType::kF16:
      return HalfToFloat(Load<uint16_t>(p, i));
    case DType::kBF16:
      return BFloat16ToFloat(Load<uint16_t>(p, i));
    case DType::kF64:
      return Load<double>(p, i);
    case DType::kI8:
      return Load<int8_t>(p, i);
    case DType::kU8:
      return Load<uint8_t>(p, i);
    case DType::kI16:
      return Load<int16_t>(p, i);
    case DType::kU16:
      return Load<uint16_t>(p, i);
    case DType::kI32:
      return Load<int32_t>(p, i);
    case DType::kU32:
      return Load<uint32_t>(p, i);
    case DType::kI64:
      return static_cast<double>(Load<int64_t>(p, i));
    case DType::kU64:
      return static_cast<double>(Load<uint64_t>(p, i));
    case DType::kBool:
      return Load<uint8_t>(p, i) ? 1.0 : 0.0;
    default:
      return 0;
  }
}

}  // namespace

StatusOr<std::vector<int64_t>> TensorData::ToInt64s() const {
  std::vector<int64_t> out(num_elements_);
  for (int64_t i = 0; i < num_elements_; ++i) {
    switch (dtype_) {
      case DType::kI64:
        out[i] = Load<int64_t>(data_, i);
        break;
      case DType::kI32:
        out[i] = Load<int32_t>(data_, i);
        break;
      case DType::kI16:
        out[i] = Load<int16_t>(data_, i);
        break;
      case DType::kI8:
        out[i] = Load<int8_t>(data_, i);
        break;
      case DType::kU8:
        out[i] = Load<uint8_t>(data_, i);
        break;
      case DType::kU16:
        out[i] = Load<uint16_t>(data_, i);
        break;
      case DType::kU32:
        out[i] = Load<uint32_t>(data_, i);
        break;
      case DType::kU64: {
        uint64_t v = Load<uint64_t>(data_, i);
        if (v > static_cast<uint64_t>(INT64_MAX))
          return InvalidArgument("element " + std::to_string(i) + " (" + std::to_string(v) +
                                 ") does not fit in int64");
        out[i] = static_cast<int64_t>(v);
        break;
      }
      case DType::kBool:
        out[i] = Load<uint8_t>(data_, i) != 0;
        break;
      default: {
        double d = ElementAsDouble(dtype_, data_, i);
        if (!(d == std::floor(d)) || std::fabs(d) > 9.2e18)
          return InvalidArgument("element " + std::to_string(i) + " (" + std::to_string(d) +
                                 ") is not an integer");
        out[i] = static_cast<int64_t>(d);
      }
    }
  }
  return out;
}

std::vector<double> TensorData::ToDoubles() const {
  std::vector<double> out(num_elements_);
  for (int64_t i = 0; i < num_elements_; ++i) out[i] = ElementAsDouble(dtype_, data_, i);
  return out;
}

// ---- Attribute, Value, Node ------------------------------------------------------------------

const char* Attribute::TypeName(Type t) {
  static const char* kNames[] = {"int",    "float",   "string", "ints",
                                 "floats", "strings", "tensor", "graph"};
  return kNames[static_cast<int>(t)];
}

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kGraphInput:
      return "graph input";
    case ValueKind::kConstant:
      return "constant";
    case ValueKind::kNodeOutput:
      return "node output";
    case ValueKind::kCapture:
      return "capture";
  }
  return "?";
}

const Attribute* Node::FindAttribute(std::string_view attr_name) const {
  auto it = attributes.find(std::string(attr_name));
  return it == attributes.end() ? nullptr : &it->second;
}

// ---- Graph: building and queries ------------------------------------------------------------

Graph::Graph() : symbols_(std::make_shared<SymbolGenerator>()) {}

Graph Graph::Clone() const {
  Graph g;
  g.name_ = name_;
  g.values_ = values_;
  g.nodes_ = nodes_;
  g.users_ = users_;
  g.inputs_ = inputs_;
  g.outputs_ = outputs_;
  g.value_by_name_ = value_by_name_;
  g.node_by_name_ = node_by_name_;
  g.opset_imports_ = opset_imports_;
  g.symbols_ = symbols_;
  for (Node& n : g.nodes_) {
    for (auto& [attr_name, attr] : n.attributes) {
      if (attr.type() == Attribute::Type::kGraph)
        attr = Attribute::SubGraph(std::make_shared<Graph>(attr.graph()->Clone()));
    }
  }
  return g;
}

StatusOr<ValueId> Graph::AddValue(std::string name, ValueKind kind) {
  if (name.empty()) return InvalidFormat("a value has an empty name");
  if (value_by_name_.count(name)) return InvalidFormat("value name '" + name + "' is used twice");
  auto id = static_cast<ValueId>(values_.size());
  value_by_name_.emplace(name, id);
  Value v;
  v.name = std::move(name);
  v.kind = kind;
  values_.push_back(std::move(v));
  users_.emplace_back();
  return id;
}

std::string Graph::UniqueNodeName(const std::string& base) const {
  if (!base.empty() && !node_by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!node_by_name_.count(n)) return n;
  }
}

std::string Graph::UniqueValueName(const std::string& base) const {
  if (!base.empty() && !FindValue(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!FindValue(n)) return n;
  }
}

StatusOr<NodeId> Graph::AddNode(Node node) {
  auto desc = "node '" + node.name + "' (" + node.op_type + ")";
  if (node.name.empty()) return InvalidFormat("a " + node.op_type + " node has an empty name");
  if (node_by_name_.count(node.name))
    return InvalidFormat("node name '" + node.name + "' is used twice");
  auto valid = [this](ValueId v) { return v == kNoValue || (v >= 0 && v < num_values()); };
  for (ValueId v : node.inputs)
    if (!valid(v))
      return InvalidFormat(desc + ": input id " + std::to_string(v) + " is not a value");
  for (ValueId v : node.implicit_inputs)
    if (!valid(v) || v == kNoValue) return InvalidFormat(desc + ": bad implicit input id");
  for (ValueId v : node.outputs) {
    if (!valid(v))
      return InvalidFormat(desc + ": output id " + std::to_string(v) + " is not a value");
    if (v == kNoValue) continue;
    const Value& out = values_[v];
    if (out.kind != ValueKind::kNodeOutput)
      return InvalidFormat(desc + ": output '" + out.name + "' is a " + ValueKindName(out.kind));
    if (out.producer != kNoNode)
      return InvalidFormat(desc + ": output '" + out.name + "' is already produced by " +
                           DescribeNode(out.producer));
  }
  auto id = static_cast<NodeId>(nodes_.size());
  for (ValueId v : node.outputs)
    if (v != kNoValue) values_[v].producer = id;
  for (ValueId v : node.inputs)
    if (v != kNoValue) AddUse(v, id);
  for (ValueId v : node.implicit_inputs) AddUse(v, id);
  node_by_name_.emplace(node.name, id);
  nodes_.push_back(std::move(node));
  return id;
}

void Graph::AddUse(ValueId value, NodeId node) {
  std::vector<NodeId>& u = users_[value];
  if (std::find(u.begin(), u.end(), node) == u.end()) u.push_back(node);
}

void Graph::RemoveUse(ValueId value, NodeId node) {
  const Node& n = nodes_[node];
  bool still = std::count(n.inputs.begin(), n.inputs.end(), value) > 0 ||
               std::count(n.implicit_inputs.begin(), n.implicit_inputs.end(), value) > 0;
  if (still) return;
  std::vector<NodeId>& u = users_[value];
  u.erase(std::remove(u.begin(), u.end(), node), u.end());
}

void Graph::SetNodeInput(NodeId node, int slot, ValueId value) {
  Node& n = nodes_[node];
  if (static_cast<int>(n.inputs.size()) <= slot) n.inputs.resize(slot + 1, kNoValue);
  ValueId old = n.inputs[slot];
  n.inputs[slot] = value;
  if (old != kNoValue) RemoveUse(old, node);
  if (value != kNoValue) AddUse(value, node);
}

Status Graph::RemoveNodes(const std::vector<bool>& keep) {
  if (keep.size() != nodes_.size())
    return InvalidArgument("RemoveNodes: " + std::to_string(keep.size()) + " flags for " +
                           std::to_string(nodes_.size()) + " nodes");
  // A folded output of a dropped node stays, as a constant: live nodes may still read it.
  auto orphaned = [&](ValueId v) {
    return v != kNoValue && values_[v].producer != kNoNode && !keep[values_[v].producer];
  };
  auto dropped = [&](ValueId v) { return orphaned(v) && values_[v].data == nullptr; };
  for (NodeId n = 0; n < num_nodes(); ++n) {
    if (!keep[n]) continue;
    for (const std::vector<ValueId>* list : {&nodes_[n].inputs, &nodes_[n].implicit_inputs}) {
      for (ValueId v : *list) {
        if (dropped(v))
          return InvalidArgument("RemoveNodes: " + DescribeNode(n) + " reads '" +
                                 values_[v].name + "' of dropped " +
                                 DescribeNode(values_[v].producer));
      }
    }
  }
  for (ValueId v : outputs_) {
    if (dropped(v))
      return InvalidArgument("RemoveNodes: graph output '" + values_[v].name + "' is dropped");
  }
  // New ids: kept entries in their old order.
  std::vector<NodeId> node_id(nodes_.size(), kNoNode);
  std::vector<ValueId> value_id(values_.size(), kNoValue);
  NodeId next_node = 0;
  for (NodeId n = 0; n < num_nodes(); ++n) node_id[n] = keep[n] ? next_node++ : kNoNode;
  ValueId next_value = 0;
  for (ValueId v = 0; v < num_values(); ++v) value_id[v] = dropped(v) ? kNoValue : next_value++;
  auto remap = [&](std::vector<ValueId>& list) {
    for (ValueId& v : list) v = v == kNoValue ? kNoValue : value_id[v];
  };
  std::vector<Value> values;
  std::vector<std::vector<NodeId>> users;
  value_by_name_.clear();
  for (ValueId v = 0; v < num_values(); ++v) {
    if (value_id[v] == kNoValue) continue;
    bool now_constant = orphaned(v);
    Value& val = values.emplace_back(std::move(values_[v]));
    if (now_constant) {
      val.kind = ValueKind::kConstant;
      val.producer = kNoNode;
    } else if (val.producer != kNoNode) {
      val.producer = node_id[val.producer];
    }
    value_by_name_.emplace(val.name, value_id[v]);
    std::vector<NodeId>& u = users.emplace_back();
    for (NodeId r : users_[v]) {
      if (keep[r]) u.push_back(node_id[r]);  // a dropped node may read a kept value
    }
  }
  std::vector<Node> nodes;
  node_by_name_.clear();
  for (NodeId n = 0; n < num_nodes(); ++n) {
    if (!keep[n]) continue;
    Node& node = nodes.emplace_back(std::move(nodes_[n]));
    remap(node.inputs);
    remap(node.outputs);
    remap(node.implicit_inputs);
    node_by_name_.emplace(node.name, node_id[n]);
  }
  values_ = std::move(values);
  users_ = std::move(users);
  nodes_ = std::move(nodes);
  remap(inputs_);
  remap(outputs_);
  return Status::Ok();
}

std::optional<ValueId> Graph::FindValue(std::string_view name) const {
  auto it = value_by_name_.find(name);
  if (it == value_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<NodeId> Graph::FindNode(std::string_view name) const {
  auto it = node_by_name_.find(name);
  if (it == node_by_name_.end()) return std::nullopt;
  return it->second;
}

std::string Node::Describe() const {
  std::string op = domain.empty() ? op_type : domain + "." + op_type;
  return "node '" + name + "' (" + op + ")";
}

std::string Graph::DescribeNode(NodeId id) const { return nodes_[id].Describe(); }

bool Graph::ReadsOnlyConstants(NodeId id, ConstantReads rule) const {
  const Node& n = nodes_[id];
  bool foldable = rule == ConstantReads::kFoldable;
  if (foldable && (n.inputs.empty() || !n.implicit_inputs.empty())) return false;
  for (const std::vector<ValueId>* in : {&n.inputs, &n.implicit_inputs}) {
    for (ValueId v : *in) {
      if (v == kNoValue) continue;
      const Value& val = values_[v];
      if (!val.data || (foldable && val.kind == ValueKind::kGraphInput)) return false;
    }
  }
  return true;
}

int64_t Graph::OpsetFor(std::string_view domain) const {
  std::string d(domain == "ai.onnx" ? "" : domain);
  auto it = opset_imports_.find(d);
  return it == opset_imports_.end() ? 0 : it->second;
}

// ---- Topological order and verification -------------------------------------------------------

StatusOr<std::vector<NodeId>> Graph::TopologicalOrder() const {
  // Kahn's algorithm over node -> node edges; a min-ordered ready set keeps insertion order.
  std::vector<int> pending(nodes_.size(), 0);
  auto for_each_dep = [this](NodeId n, auto&& fn) {
    const Node& node = nodes_[n];
    for (const auto* list : {&node.inputs, &node.implicit_inputs})
      for (ValueId v : *list)
        if (v != kNoValue && values_[v].producer != kNoNode) fn(values_[v].producer);
  };
  std::vector<std::vector<NodeId>> dependents(nodes_.size());
  for (NodeId n = 0; n < num_nodes(); ++n) {
    std::set<NodeId> deps;
    for_each_dep(n, [&](NodeId p) { deps.insert(p); });
    pending[n] = static_cast<int>(deps.size());
    for (NodeId p : deps) dependents[p].push_back(n);
  }
  std::set<NodeId> ready;
  for (NodeId n = 0; n < num_nodes(); ++n)
    if (pending[n] == 0) ready.insert(n);
  std::vector<NodeId> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    NodeId n = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(n);
    for (NodeId d : dependents[n])
      if (--pending[d] == 0) ready.insert(d);
  }
  if (order.size() == nodes_.size()) return order;

  // Walk dependencies among the unscheduled nodes until one repeats: that is a cycle.
  NodeId start = kNoNode;
  for (NodeId n = 0; n < num_nodes() && start == kNoNode; ++n)
    if (pending[n] > 0) start = n;
  std::vector<NodeId> path;
  std::map<NodeId, size_t> seen;
  NodeId cur = start;
  while (!seen.count(cur)) {
    seen[cur] = path.size();
    path.push_back(cur);
    NodeId next = kNoNode;
    for_each_dep(cur, [&](NodeId p) {
      if (next == kNoNode && pending[p] > 0) next = p;
    });
    cur = next;
  }
  // path[seen[cur]..] is the cycle in "depends on" order; print it in data-flow order.
  std::string msg = "cycle: ";
  std::vector<NodeId> cycle(path.begin() + seen[cur], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()),
              cycle.end());  // start at the first node
  for (NodeId n : cycle) msg += DescribeNode(n) + " -> ";
  msg += DescribeNode(cycle.front());
  return InvalidFormat(msg);
}

Status Graph::Verify() const { return VerifyInScope({}); }

Status Graph::VerifyInScope(const std::vector<const Graph*>& enclosing) const {
  if (value_by_name_.size() != values_.size()) return Internal("value name index out of date");
  for (ValueId v = 0; v < num_values(); ++v) {
    const Value& val = values_[v];
    if (val.kind == ValueKind::kConstant && !val.data)
      return InvalidFormat("constant '" + val.name + "' has no data");
    if (val.kind == ValueKind::kCapture) {
      bool found = false;
      for (const Graph* g : enclosing) found = found || g->FindValue(val.name).has_value();
      if (!found)
        return InvalidFormat("captured value '" + val.name +
                             "' is not defined in an enclosing graph");
    }
  }
  std::set<std::string> node_names;
  for (NodeId n = 0; n < num_nodes(); ++n) {
    const Node& node = nodes_[n];
    if (node.name.empty()) return InvalidFormat("a " + node.op_type + " node has no name");
    if (!node_names.insert(node.name).second)
      return InvalidFormat("node name '" + node.name + "' is used twice");
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ValueId v = node.inputs[i];
      if (v == kNoValue) continue;
      const Value& val = values_[v];
      if (val.kind == ValueKind::kNodeOutput && val.producer == kNoNode) {
        return InvalidFormat(
            DescribeNode(n) + ": input " + std::to_string(i) + " '" + val.name +
            "' is not defined (not a graph input, an initializer or a node output)");
      }
    }
    for (ValueId v : node.outputs) {
      if (v != kNoValue && values_[v].producer != n)
        return InvalidFormat(DescribeNode(n) + ": output '" + values_[v].name +
                             "' names another producer");
    }
    // Subgraphs: verify in the scope of this graph, and check this node declares their captures.
    std::vector<const Graph*> scope = enclosing;
    scope.insert(scope.begin(), this);
    for (const auto& [attr_name, attr] : node.attributes) {
      if (attr.type() != Attribute::Type::kGraph) continue;
      const Graph& sub = *attr.graph();
      Status s = sub.VerifyInScope(scope);
      if (!s.ok()) return s.WithContext(DescribeNode(n) + " attribute '" + attr_name + "'");
      for (ValueId c = 0; c < sub.num_values(); ++c) {
        const Value& cv = sub.value(c);
        if (cv.kind != ValueKind::kCapture) continue;
        std::optional<ValueId> outer = FindValue(cv.name);
        if (!outer) continue;  // captured from further out; checked by an enclosing graph
        if (std::find(node.implicit_inputs.begin(), node.implicit_inputs.end(), *outer) ==
            node.implicit_inputs.end()) {
          return InvalidFormat(DescribeNode(n) + ": subgraph '" + attr_name + "' reads '" +
                               cv.name + "' but the node does not list it as an implicit input");
        }
      }
    }
  }
  for (ValueId v : inputs_) {
    if (v < 0 || v >= num_values()) return InvalidFormat("graph input id out of range");
  }
  for (ValueId v : outputs_) {
    if (v < 0 || v >= num_values()) return InvalidFormat("graph output id out of range");
    const Value& val = values_[v];
    if (val.kind == ValueKind::kNodeOutput && val.producer == kNoNode)
      return InvalidFormat("graph output '" + val.name + "' is not produced by any node");
  }
  ASSIGN_OR_RETURN(std::vector<NodeId> order, TopologicalOrder());
  (void)order;
  return Status::Ok();
}

const Graph* ConstantIfBranch(const Graph& g, const Node& node) {
  if (node.op_type != "If" || node.inputs.empty() || node.inputs[0] == kNoValue) return nullptr;
  const Value& cond = g.value(node.inputs[0]);
  if (!cond.data || cond.kind == ValueKind::kGraphInput || cond.data->num_elements() != 1 ||
      cond.data->dtype() != DType::kBool)
    return nullptr;
  bool take_then = *static_cast<const uint8_t*>(cond.data->data()) != 0;
  const Attribute* a = node.FindAttribute(take_then ? "then_branch" : "else_branch");
  return a && a->type() == Attribute::Type::kGraph ? a->graph().get() : nullptr;
}

}  // namespace kiln::compiler
