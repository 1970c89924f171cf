// ONNX ModelProto -> Graph: values, initializers, nodes, attributes, subgraphs, symbolic dims.
#include "compiler/onnx/importer.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <set>
#include <vector>

#include "compiler/onnx/expand_quant.h"
#include "compiler/onnx/expand_rnn.h"
#include "compiler/onnx/expand_scan.h"
#include "compiler/onnx/function_expand.h"
#include "compiler/onnx/tensor_import.h"
#include "compiler/ops/registry.h"

namespace kiln::compiler {
namespace {

using onnx_import::ConvertTensor;
using onnx_import::ExternalData;

std::string OpLabel(const onnx::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type()
                                                       : n.domain() + "." + n.op_type();
}

template <typename Fn>
void ForEachGraph(const onnx::GraphProto& g, Fn&& fn) {
  fn(g);
  for (const onnx::NodeProto& n : g.node())
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.has_g()) ForEachGraph(a.g(), fn);
}

// Lexical scope while building nested graphs: names not found in `graph` are captured from
// `outer`, and the owning node (in `outer`) lists them as implicit inputs.
struct Scope {
  Graph* graph;
  Scope* outer;
  std::vector<ValueId>* owner_implicit_inputs;
};

class Importer {
 public:
  Importer(const ImportOptions& options, std::string base_dir)
      : options_(options),
        external_(std::move(base_dir)),
        symbols_(std::make_shared<SymbolGenerator>()) {}

  StatusOr<Graph> ImportModel(onnx::ModelProto& model) {
    // IR version 10 is what ONNX 1.16+ writes for opsets up to 21; anything newer may change
    // what fields mean, so it is refused rather than misread.
    if (model.ir_version() > kMaxIrVersion) {
      return Unsupported("the model's ir_version is " + std::to_string(model.ir_version()) +
                         "; kiln reads ONNX IR versions up to " + std::to_string(kMaxIrVersion));
    }
    RETURN_IF_ERROR(ReadOpsets(model));
    if (!model.has_graph()) return InvalidFormat("the model has no graph");
    if (model.graph().output_size() == 0) {
      return InvalidFormat("the model's graph '" + model.graph().name() +
                           "' has no outputs: there is nothing to compute");
    }
    const OpRegistry& registry = OpRegistry::Global();
    RETURN_IF_ERROR(onnx_import::ExpandFunctions(
        model, [&registry](std::string_view domain, std::string_view op_type,
                           int64_t opset) -> const void* {
          return registry.Find(domain, op_type, opset);
        }));
    ForEachGraph(model.graph(), [this](const onnx::GraphProto& g) { ReserveDimParams(g); });
    if (auto it = opsets_.find(""); it != opsets_.end()) {
      RETURN_IF_ERROR(ExpandScanOps(model.mutable_graph(), it->second));
      bool fused = false;
      RETURN_IF_ERROR(ExpandRecurrentOps(model.mutable_graph(), it->second, &fused));
      if (fused) opsets_.emplace(kKilnDomain, 1);
      RETURN_IF_ERROR(ExpandQuantizedOps(model.mutable_graph(), it->second));
    }
    RETURN_IF_ERROR(CheckOpsSupported(model.graph()));
    ASSIGN_OR_RETURN(Graph graph, ImportGraph(*model.mutable_graph(), nullptr, true));
    RETURN_IF_ERROR(CheckPinsUsed());
    RETURN_IF_ERROR(graph.Verify());
    return graph;
  }

 private:
  Status ReadOpsets(const onnx::ModelProto& model) {
    for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
      std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
      opsets_[domain] = o.version();
    }
    // A model may import only other domains; its nodes then fail the op check by domain.
    auto it = opsets_.find("");
    if (it != opsets_.end() && (it->second < kMinOnnxOpset || it->second > kMaxOnnxOpset)) {
      std::string msg = "the model imports ai.onnx opset " + std::to_string(it->second) +
                        "; kiln supports " + std::to_string(kMinOnnxOpset) + " to " +
                        std::to_string(kMaxOnnxOpset);
      if (it->second > kMaxOnnxOpset) {
        msg += " (convert the model with onnx.version_converter.convert_version(model, " +
               std::to_string(kMaxOnnxOpset) + "))";
      }
      return Unsupported(msg);
    }
    return Status::Ok();
  }

  void ReserveDimParams(const onnx::GraphProto& g) {
    auto reserve = [this](const onnx::ValueInfoProto& vi) {
      if (!vi.type().has_tensor_type()) return;
      for (const auto& d : vi.type().tensor_type().shape().dim())
        if (d.has_dim_param()) symbols_->Reserve(d.dim_param());
    };
    for (const auto& vi : g.input()) reserve(vi);
    for (const auto& vi : g.output()) reserve(vi);
    for (const auto& vi : g.value_info()) reserve(vi);
  }

  // One error listing every unsupported op type with the names of its nodes.
  Status CheckOpsSupported(const onnx::GraphProto& g) {
    const OpRegistry& registry = OpRegistry::Global();
    std::map<std::string, std::pair<std::string, std::vector<std::string>>>
        bad;  // label -> (why, nodes)
    CollectUnsupported(g, registry, &bad);
    if (bad.empty()) return Status::Ok();
    std::string msg = "the model uses " + std::to_string(bad.size()) + " unsupported op type" +
                      (bad.size() == 1 ? "" : "s") + ": ";
    bool first = true;
    for (const auto& [label, entry] : bad) {
      if (!first) msg += "; ";
      first = false;
      const std::vector<std::string>& nodes = entry.second;
      msg += label + " " + entry.first + " (node" + (nodes.size() == 1 ? " " : "s ");
      for (size_t i = 0; i < nodes.size() && i < 5; ++i) msg += (i ? ", '" : "'") + nodes[i] + "'";
      if (nodes.size() > 5) msg += " and " + std::to_string(nodes.size() - 5) + " more";
      msg += ")";
    }
    return Unsupported(msg);
  }

  void CollectUnsupported(
      const onnx::GraphProto& g, const OpRegistry& registry,
      std::map<std::string, std::pair<std::string, std::vector<std::string>>>* bad) {
    std::vector<std::string> names = UniqueNodeNames(g);
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      for (const onnx::AttributeProto& a : n.attribute())
        if (a.has_g()) CollectUnsupported(a.g(), registry, bad);
      auto it = opsets_.find(n.domain() == "ai.onnx" ? "" : n.domain());
      int64_t opset = it == opsets_.end() ? 0 : it->second;
      std::string why;
      if (opset == 0) {
        why = "is in domain '" + n.domain() + "', which the model does not import";
      } else {
        why = registry.WhyUnsupported(n.domain(), n.op_type(), opset);
      }
      if (why.empty()) continue;
      auto& entry = (*bad)[OpLabel(n)];
      entry.first = why;
      entry.second.push_back(names[i]);
    }
  }

  Status CheckPinsUsed() {
    for (const auto& [name, value] : options_.dim_pins) {
      if (pins_used_.count(name)) continue;
      std::string known;
      for (const std::string& s : dim_params_seen_) known += (known.empty() ? "" : ", ") + s;
      return InvalidArgument("dim pin '" + name + "' matches no dim_param in the model (it has: " +
                             (known.empty() ? "none" : known) + ")");
    }
    return Status::Ok();
  }

  // ---- Types ----

  StatusOr<DimExpr> ImportDim(const onnx::TensorShapeProto_Dimension& d, const std::string& what) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        return InvalidFormat(what + " has a negative dim " + std::to_string(d.dim_value()));
      return DimExpr(d.dim_value());
    }
    if (d.has_dim_param() && !d.dim_param().empty()) {
      dim_params_seen_.insert(d.dim_param());
      auto pin = options_.dim_pins.find(d.dim_param());
      if (pin != options_.dim_pins.end()) {
        pins_used_.insert(d.dim_param());
        return DimExpr(pin->second);
      }
      return DimExpr::Symbol(d.dim_param());
    }
    return symbols_->Fresh();
  }

  // The dtype and (if declared) shape of a ValueInfo. Non-tensor types are unsupported.
  Status ImportType(const onnx::ValueInfoProto& vi, const std::string& what, DType* dtype,
                    std::optional<SymbolicShape>* shape) {
    const onnx::TypeProto& t = vi.type();
    if (t.value_case() == onnx::TypeProto::VALUE_NOT_SET) return Status::Ok();
    if (!t.has_tensor_type())
      return Unsupported(
          what + " is not a tensor (sequence, map, optional or sparse types are not supported)");
    const onnx::TypeProto_Tensor& tt = t.tensor_type();
    if (tt.has_elem_type() && tt.elem_type() != 0) {
      StatusOr<DType> d = DTypeFromOnnx(tt.elem_type());
      if (!d.ok()) return d.status().WithContext(what);
      *dtype = *d;
    }
    if (tt.has_shape()) {
      SymbolicShape s;
      for (const auto& dim : tt.shape().dim()) {
        ASSIGN_OR_RETURN(DimExpr e, ImportDim(dim, what));
        s.push_back(std::move(e));
      }
      *shape = std::move(s);
    }
    return Status::Ok();
  }

  // ---- Graphs ----

  StatusOr<Graph> ImportGraph(onnx::GraphProto& gp, Scope* outer, bool top_level,
                              std::vector<ValueId>* owner_implicit = nullptr) {
    Graph g;
    g.set_name(gp.name());
    g.set_opset_imports(opsets_);
    g.set_shared_symbols(symbols_);
    Scope scope{&g, outer, owner_implicit};
    std::string kind = top_level ? "graph input" : "subgraph '" + gp.name() + "' input";

    std::map<std::string, onnx::TensorProto*> initializers;
    for (onnx::TensorProto& t : *gp.mutable_initializer()) {
      if (t.name().empty()) return InvalidFormat("an initializer has no name");
      if (!initializers.emplace(t.name(), &t).second)
        return InvalidFormat("initializer '" + t.name() + "' is defined twice");
    }
    if (gp.sparse_initializer_size() > 0)
      return Unsupported("sparse initializers are not supported");

    // Inputs (an input with an initializer is an overridable default).
    for (const onnx::ValueInfoProto& vi : gp.input()) {
      ASSIGN_OR_RETURN(ValueId id, g.AddValue(vi.name(), ValueKind::kGraphInput));
      g.AddInput(id);
      RETURN_IF_ERROR(ImportInput(g, id, vi, kind, top_level, initializers));
    }
    // Remaining initializers are constants.
    for (onnx::TensorProto& t : *gp.mutable_initializer()) {
      if (g.FindValue(t.name())) continue;
      ASSIGN_OR_RETURN(ValueId id, g.AddValue(t.name(), ValueKind::kConstant));
      ASSIGN_OR_RETURN(TensorDataRef data,
                       ConvertTensor(t, "initializer '" + t.name() + "'", &external_));
      SetConstant(g.mutable_value(id), std::move(data));
    }
    // Node outputs, so that nodes may come in any order.
    std::vector<std::string> node_names = UniqueNodeNames(gp);
    for (int i = 0; i < gp.node_size(); ++i) {
      for (const std::string& out : gp.node(i).output()) {
        if (out.empty()) continue;
        if (std::optional<ValueId> prev = g.FindValue(out)) {
          const Value& v = g.value(*prev);
          std::string by = v.kind == ValueKind::kNodeOutput
                               ? "an output of an earlier node"
                               : "a " + std::string(ValueKindName(v.kind));
          return InvalidFormat("node '" + node_names[i] + "' (" + OpLabel(gp.node(i)) +
                               "): output '" + out + "' is already " + by);
        }
        RETURN_IF_ERROR(g.AddValue(out, ValueKind::kNodeOutput).status());
      }
    }
    for (int i = 0; i < gp.node_size(); ++i)
      RETURN_IF_ERROR(ImportNode(g, scope, *gp.mutable_node(i), node_names[i]));
    for (const onnx::ValueInfoProto& vi : gp.output()) RETURN_IF_ERROR(ImportOutput(g, scope, vi));
    return g;
  }

  Status ImportInput(Graph& g, ValueId id, const onnx::ValueInfoProto& vi, const std::string& kind,
                     bool top_level, std::map<std::string, onnx::TensorProto*>& initializers) {
    std::string what = kind + " '" + vi.name() + "'";
    Value& v = g.mutable_value(id);
    DType dtype = DType::kInvalid;
    std::optional<SymbolicShape> shape;
    RETURN_IF_ERROR(ImportType(vi, what, &dtype, &shape));
    auto init = initializers.find(vi.name());
    if (init != initializers.end()) {
      ASSIGN_OR_RETURN(TensorDataRef data,
                       ConvertTensor(*init->second, "initializer '" + vi.name() + "'", &external_));
      if (dtype != DType::kInvalid && dtype != data->dtype()) {
        return InvalidFormat(what + " is declared " + DTypeName(dtype) +
                             " but its initializer is " + DTypeName(data->dtype()));
      }
      SymbolicShape init_shape(data->dims().begin(), data->dims().end());
      if (shape) {
        bool ok = shape->size() == init_shape.size();
        for (size_t i = 0; ok && i < init_shape.size(); ++i)
          ok = !(*shape)[i].is_const() || (*shape)[i] == init_shape[i];
        if (!ok)
          return InvalidFormat(what + " is declared " + ShapeToString(*shape) +
                               " but its initializer has shape " + ShapeToString(init_shape));
      } else {
        shape = init_shape;
      }
      dtype = data->dtype();
      v.data = std::move(data);
    }
    if (top_level) {
      if (dtype == DType::kInvalid) return InvalidFormat(what + " has no element type");
      if (!shape)
        return Unsupported(
            what + " has no shape (its rank is unknown); kiln needs the rank of every input");
      v.dtype = dtype;
      v.shape = std::move(shape);
    } else {
      // Subgraph inputs get their types from the node (Loop); the declaration is checked then.
      v.declared_dtype = dtype;
      v.declared_shape = std::move(shape);
    }
    return Status::Ok();
  }

  static void SetConstant(Value& v, TensorDataRef data) {
    v.dtype = data->dtype();
    v.shape = SymbolicShape(data->dims().begin(), data->dims().end());
    v.data = std::move(data);
  }

  // Node names: the model's when non-empty and unique, else "<OpType>_<index>" (made unique).
  static std::vector<std::string> UniqueNodeNames(const onnx::GraphProto& gp) {
    std::set<std::string> taken;
    for (const onnx::NodeProto& n : gp.node())
      if (!n.name().empty()) taken.insert(n.name());
    std::set<std::string> used;
    std::vector<std::string> names;
    for (int i = 0; i < gp.node_size(); ++i) {
      const onnx::NodeProto& n = gp.node(i);
      std::string name = n.name();
      if (name.empty() || used.count(name)) {
        std::string base = name.empty() ? n.op_type() + "_" + std::to_string(i) : name;
        name = base;
        for (int k = 1; used.count(name) || (name != n.name() && taken.count(name)); ++k)
          name = base + "_" + std::to_string(k);
      }
      used.insert(name);
      names.push_back(name);
    }
    return names;
  }

  // A value visible from `scope` by name, capturing it from enclosing graphs when needed.
  std::optional<ValueId> Resolve(Scope& scope, const std::string& name) {
    if (std::optional<ValueId> id = scope.graph->FindValue(name)) return id;
    if (!scope.outer) return std::nullopt;
    std::optional<ValueId> outer_id = Resolve(*scope.outer, name);
    if (!outer_id) return std::nullopt;
    std::vector<ValueId>& implicit = *scope.owner_implicit_inputs;
    if (std::find(implicit.begin(), implicit.end(), *outer_id) == implicit.end())
      implicit.push_back(*outer_id);
    StatusOr<ValueId> id = scope.graph->AddValue(name, ValueKind::kCapture);
    return id.ok() ? std::optional<ValueId>(*id) : std::nullopt;
  }

  Status ImportNode(Graph& g, Scope& scope, onnx::NodeProto& np, const std::string& name) {
    Node node;
    node.name = name;
    node.op_type = np.op_type();
    node.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    std::string desc = "node '" + name + "' (" + OpLabel(np) + ")";
    for (onnx::AttributeProto& a : *np.mutable_attribute()) {
      StatusOr<Attribute> attr = ImportAttribute(a, scope, &node.implicit_inputs, desc);
      if (!attr.ok()) return attr.status();
      if (!node.attributes.emplace(a.name(), std::move(*attr)).second)
        return InvalidFormat(desc + ": attribute '" + a.name() + "' is given twice");
    }
    for (const std::string& in : np.input()) {
      if (in.empty()) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      std::optional<ValueId> id = Resolve(scope, in);
      if (!id) {
        return InvalidFormat(
            desc + ": input '" + in +
            "' is not defined: no graph input, initializer or node output has that name "
            "(a missing initializer?)");
      }
      node.inputs.push_back(*id);
    }
    for (const std::string& out : np.output())
      node.outputs.push_back(out.empty() ? kNoValue : *g.FindValue(out));
    return g.AddNode(std::move(node)).status();
  }

  StatusOr<Attribute> ImportAttribute(onnx::AttributeProto& a, Scope& scope,
                                      std::vector<ValueId>* implicit, const std::string& desc) {
    std::string what = desc + ": attribute '" + a.name() + "'";
    if (!a.ref_attr_name().empty()) return Unsupported(what + " refers to a function attribute");
    switch (a.type()) {
      case onnx::AttributeProto::INT:
        return Attribute::Int(a.i());
      case onnx::AttributeProto::FLOAT:
        return Attribute::Float(a.f());
      case onnx::AttributeProto::STRING:
        return Attribute::String(a.s());
      case onnx::AttributeProto::INTS:
        return Attribute::Ints({a.ints().begin(), a.ints().end()});
      case onnx::AttributeProto::FLOATS:
        return Attribute::Floats({a.floats().begin(), a.floats().end()});
      case onnx::AttributeProto::STRINGS:
        return Attribute::Strings({a.strings().begin(), a.strings().end()});
      case onnx::AttributeProto::TENSOR: {
        ASSIGN_OR_RETURN(TensorDataRef t, ConvertTensor(*a.mutable_t(), what, &external_));
        return Attribute::Tensor(std::move(t));
      }
      case onnx::AttributeProto::GRAPH: {
        ASSIGN_OR_RETURN(Graph sub, ImportGraph(*a.mutable_g(), &scope, false, implicit));
        return Attribute::SubGraph(std::make_shared<Graph>(std::move(sub)));
      }
      case onnx::AttributeProto::UNDEFINED:
        return InvalidFormat(what + " has no type");
      default:
        return Unsupported(what + " has type " +
                           onnx::AttributeProto::AttributeType_Name(a.type()) +
                           ", which kiln does not support");
    }
  }

  Status ImportOutput(Graph& g, Scope& scope, const onnx::ValueInfoProto& vi) {
    std::optional<ValueId> id = Resolve(scope, vi.name());
    if (!id)
      return InvalidFormat("graph output '" + vi.name() +
                           "' is not defined by any node, input or initializer");
    g.AddOutput(*id);
    Value& v = g.mutable_value(*id);
    return ImportType(vi, "graph output '" + vi.name() + "'", &v.declared_dtype, &v.declared_shape);
  }

  const ImportOptions& options_;
  ExternalData external_;
  std::shared_ptr<SymbolGenerator> symbols_;
  std::map<std::string, int64_t> opsets_;
  std::set<std::string> dim_params_seen_;
  std::set<std::string> pins_used_;
};

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

StatusOr<Graph> ImportFromBytes(std::string_view bytes, const ImportOptions& options,
                                std::string base_dir) {
  // A compiled executable (size prefix, root offset, then the 'KILN' identifier) is a common
  // mix-up; protobuf would only say it cannot parse it.
  if (bytes.size() >= 12 && bytes.substr(8, 4) == "KILN") {
    return InvalidFormat("this is a compiled .kiln executable, not an ONNX model: run it with "
                         "`kiln run`, or compile the .onnx it came from");
  }
  for (const auto& [name, value] : options.dim_pins)
    if (value < 0) return InvalidArgument("dim pin '" + name + "' is negative");
  auto model = std::make_unique<onnx::ModelProto>();
  RETURN_IF_ERROR(onnx_import::ParseBounded(bytes, model.get(), "the model"));
  Importer importer(options, std::move(base_dir));
  return importer.ImportModel(*model);
}

}  // namespace

Status ParseDimPin(std::string_view text, ImportOptions* options) {
  size_t eq = text.find('=');
  std::string quoted = "dim pin '" + std::string(text) + "'";
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return InvalidArgument(quoted + " is not NAME=VALUE");
  std::string name(text.substr(0, eq));
  std::string value(text.substr(eq + 1));
  if (value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument(quoted + ": '" + value + "' is not a non-negative integer");
  if (!options->dim_pins.emplace(name, std::stoll(value)).second)
    return InvalidArgument(quoted + ": '" + name + "' is pinned twice");
  return Status::Ok();
}

StatusOr<Graph> ImportOnnxFile(const std::string& path, const ImportOptions& options) {
  StatusOr<std::shared_ptr<const onnx_import::MappedFile>> file =
      onnx_import::MappedFile::Open(path);
  if (!file.ok()) return file.status().WithContext("model file");
  std::string_view bytes(reinterpret_cast<const char*>((*file)->data()), (*file)->size());
  return ImportFromBytes(bytes, options, DirName(path));
}

StatusOr<Graph> ImportOnnxBytes(std::string_view bytes, const ImportOptions& options) {
  return ImportFromBytes(bytes, options, options.external_data_dir);
}

StatusOr<TensorDataRef> ImportOnnxTensorBytes(std::string_view bytes, std::string* name) {
  onnx::TensorProto tensor;
  RETURN_IF_ERROR(onnx_import::ParseBounded(bytes, &tensor, "the tensor"));
  if (name != nullptr) *name = tensor.name();
  return ConvertTensor(tensor, "tensor '" + tensor.name() + "'", nullptr);
}

}  // namespace kiln::compiler
