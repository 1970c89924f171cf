// ONNX function expansion (see function_expand.h): schema function bodies inlined into the graph.
#include "compiler/onnx/function_expand.h"

#include <onnx/defs/function.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <deque>
#include <exception>
#include <set>
#include <utility>
#include <vector>

#include "compiler/onnx/kiln_functions.h"

namespace kiln::compiler::onnx_import {
namespace {

// Bounds on expansion, so a body that (directly or not) contains its own op ends in an error.
constexpr int kMaxDepth = 16;
constexpr int kMaxExpansions = 100000;
// Rounds of (expand, infer types): one per level of nested context-dependent bodies.
constexpr int kMaxRounds = 8;

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// Input types for a context-dependent body builder. Remembers whether the builder asked for a
// type nobody knows, which is a reason to infer types and retry rather than an error.
class BuildContext : public onnx::FunctionBodyBuildContext {
 public:
  BuildContext(const onnx::NodeProto& node, std::vector<const onnx::TypeProto*> types)
      : node_(node), types_(std::move(types)) {}

  const onnx::AttributeProto* getAttribute(const std::string& name) const override {
    for (const onnx::AttributeProto& a : node_.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  bool hasInput(int i) const override {
    return i >= 0 && i < node_.input_size() && !node_.input(i).empty();
  }
  bool hasOutput(int i) const override {
    return i >= 0 && i < node_.output_size() && !node_.output(i).empty();
  }
  const onnx::TypeProto* getInputType(int i) const override {
    if (!hasInput(i)) return nullptr;
    if (types_[i] == nullptr) missing_type_ = true;
    return types_[i];
  }
  bool missing_type() const { return missing_type_; }

 private:
  const onnx::NodeProto& node_;
  std::vector<const onnx::TypeProto*> types_;  // one per node input; nullptr: unknown
  mutable bool missing_type_ = false;
};

class Expander {
 public:
  Expander(onnx::ModelProto& model, const OpDefinitionFn& definition)
      : model_(model), definition_(definition) {
    for (const onnx::OperatorSetIdProto& o : model.opset_import())
      if (IsDefaultDomain(o.domain())) opset_ = o.version();
  }

  Status Run() {
    if (opset_ == 0 || !AnyExpandable(model_.graph())) return Status::Ok();
    CollectNames(model_.graph());
    HarvestTypes(model_.graph());
    for (int round = 0; round < kMaxRounds; ++round) {
      pending_.clear();
      progress_ = false;
      RETURN_IF_ERROR(ExpandGraph(*model_.mutable_graph()));
      if (pending_.empty()) return Status::Ok();
      // Bodies that need input types nobody declared: infer them on the model as it now is.
      if (round > 0 && !progress_) break;
      RETURN_IF_ERROR(InferTypes());
    }
    // What still waits for input types (of a value no tensor type can be found for) stays
    // unexpanded, and the importer lists it with the other unsupported ops.
    return Status::Ok();
  }

 private:
  // Where the body that replaces a node comes from: an ONNX schema or kiln's own.
  struct Source {
    const onnx::OpSchema* schema = nullptr;
    const KilnFunction* own = nullptr;
    explicit operator bool() const { return schema != nullptr || own != nullptr; }
  };

  // The body source for `n`; empty when `n` stays. libonnx 1.12 knows opsets up to 17; past
  // that its newest schema is used (no op with a schema body there changed through 21), and
  // a body op that kiln defines differently at the model's opset is refused (BuildBody).
  Source FindSource(const onnx::NodeProto& n) const {
    Source src;
    if (!IsDefaultDomain(n.domain()) || definition_("", n.op_type(), opset_)) return src;
    if ((src.own = FindKilnFunction(n.op_type(), opset_))) return src;
    const onnx::OpSchema* s =
        onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset_), "");
    if (s && !s->deprecated() && (s->HasFunction() || s->HasContextDependentFunction()))
      src.schema = s;
    return src;
  }

  bool AnyExpandable(const onnx::GraphProto& g) const {
    for (const onnx::NodeProto& n : g.node()) {
      if (FindSource(n)) return true;
      for (const onnx::AttributeProto& a : n.attribute())
        if (a.has_g() && AnyExpandable(a.g())) return true;
    }
    return false;
  }

  void CollectNames(const onnx::GraphProto& g) {
    for (const auto& vi : g.input()) taken_.insert(vi.name());
    for (const auto& t : g.initializer()) taken_.insert(t.name());
    for (const onnx::NodeProto& n : g.node()) {
      taken_.insert(n.name());
      for (const std::string& s : n.input()) taken_.insert(s);
      for (const std::string& s : n.output()) taken_.insert(s);
      for (const onnx::AttributeProto& a : n.attribute())
        if (a.has_g()) CollectNames(a.g());
    }
  }

  void HarvestTypes(const onnx::GraphProto& g) {
    auto take = [this](const onnx::ValueInfoProto& vi) {
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
        types_[vi.name()] = vi.type();
    };
    for (const auto& vi : g.input()) take(vi);
    for (const auto& vi : g.value_info()) take(vi);
    for (const auto& vi : g.output()) take(vi);
    for (const onnx::TensorProto& t : g.initializer()) {
      onnx::TypeProto type;
      type.mutable_tensor_type()->set_elem_type(t.data_type());
      for (int64_t d : t.dims()) type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
      types_.emplace(t.name(), type);
    }
    for (const onnx::NodeProto& n : g.node())
      for (const onnx::AttributeProto& a : n.attribute())
        if (a.has_g()) HarvestTypes(a.g());
  }

  // ONNX shape inference on a copy (the model itself keeps only what it declared).
  Status InferTypes() {
    onnx::ModelProto copy = model_;
    try {
      onnx::shape_inference::InferShapes(copy);
    } catch (const std::exception& e) {
      return Unsupported(std::string("ONNX shape inference, needed to expand function ops, "
                                     "failed: ") + e.what());
    }
    HarvestTypes(copy.graph());
    return Status::Ok();
  }

  // A name no value, node or other expansion in the model uses.
  std::string UniqueName(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

  Status ExpandGraph(onnx::GraphProto& g) {
    // Unnamed nodes get the names the importer would give them ("<OpType>_<index>"), so that
    // what expansion inserts does not shift the names in later errors, and bodies have a prefix.
    bool expands = false;
    for (const onnx::NodeProto& n : g.node()) expands = expands || static_cast<bool>(FindSource(n));
    for (int i = 0; expands && i < g.node_size(); ++i) {
      onnx::NodeProto* n = g.mutable_node(i);
      if (n->name().empty()) n->set_name(UniqueName(n->op_type() + "_" + std::to_string(i)));
    }
    std::deque<std::pair<onnx::NodeProto, int>> work;  // (node, expansion depth)
    for (onnx::NodeProto& n : *g.mutable_node()) work.emplace_back(std::move(n), 0);
    std::vector<onnx::NodeProto> out;
    while (!work.empty()) {
      auto [node, depth] = std::move(work.front());
      work.pop_front();
      Source source = FindSource(node);
      if (!source) {
        out.push_back(std::move(node));
        continue;
      }
      if (depth >= kMaxDepth || ++expansions_ > kMaxExpansions) {
        return InvalidFormat("node '" + node.name() + "' (" + node.op_type() +
                             "): function expansion does not end (a body that uses itself?)");
      }
      onnx::FunctionProto body;
      ASSIGN_OR_RETURN(bool built, BuildBody(node, source, &body));
      if (!built) {
        pending_.push_back(node.name());
        out.push_back(std::move(node));
        continue;
      }
      std::vector<onnx::NodeProto> nodes;
      RETURN_IF_ERROR(Inline(node, source.schema, body, &nodes));
      progress_ = true;
      for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
        work.emplace_front(std::move(*it), depth + 1);
    }
    g.clear_node();
    for (onnx::NodeProto& n : out) {
      for (onnx::AttributeProto& a : *n.mutable_attribute())
        if (a.has_g()) RETURN_IF_ERROR(ExpandGraph(*a.mutable_g()));
      *g.add_node() = std::move(n);
    }
    return Status::Ok();
  }

  // The body for `node`: false when it needs input types not known yet.
  StatusOr<bool> BuildBody(const onnx::NodeProto& node, const Source& source,
                           onnx::FunctionProto* body) {
    std::string desc = "node '" + node.name() + "' (" + node.op_type() + ")";
    std::vector<const onnx::TypeProto*> types;
    for (const std::string& in : node.input()) {
      auto it = types_.find(in);
      types.push_back(it == types_.end() ? nullptr : &it->second);
    }
    BuildContext ctx(node, std::move(types));
    if (source.own != nullptr) {
      ASSIGN_OR_RETURN(std::string text, source.own->build(ctx, desc));
      if (text.empty()) return false;  // needs input types
      ASSIGN_OR_RETURN(*body, ParseKilnFunction(text, desc));
    } else if (source.schema->HasFunction()) {
      *body = *source.schema->GetFunction();
    } else {
      // Some builders (SequenceMap's) read input types without checking for null.
      for (int i = 0; i < node.input_size(); ++i)
        if (ctx.hasInput(i) && ctx.getInputType(i) == nullptr) return false;
      bool ok = false;
      try {
        ok = source.schema->BuildContextDependentFunction(ctx, *body);
      } catch (const std::exception& e) {
        return Unsupported(desc + ": building its ONNX function body failed: " + e.what());
      }
      if (!ok && ctx.missing_type()) return false;
      if (!ok) return Unsupported(desc + ": ONNX cannot build a function body for this node");
    }
    if (node.input_size() > body->input_size() || node.output_size() > body->output_size()) {
      return InvalidFormat(desc + " has " + std::to_string(node.input_size()) + " inputs and " +
                           std::to_string(node.output_size()) + " outputs; its function body " +
                           "takes at most " + std::to_string(body->input_size()) + " and " +
                           std::to_string(body->output_size()));
    }
    std::string mismatch = FirstOpsetMismatch(*body);
    if (!mismatch.empty()) {
      return Unsupported(desc + ": its ONNX function body uses " + mismatch +
                         ", which means something else at the model's opset " +
                         std::to_string(opset_));
    }
    return true;
  }

  // The body is written against its own opset but is read at the model's. That is only right
  // where every body op has the same definition at both; the first op that does not, or "".
  std::string FirstOpsetMismatch(const onnx::FunctionProto& body) const {
    int64_t body_opset = opset_;
    for (const onnx::OperatorSetIdProto& o : body.opset_import())
      if (IsDefaultDomain(o.domain())) body_opset = o.version();
    if (body_opset == opset_) return "";
    for (const onnx::NodeProto& n : body.node()) {
      if (!IsDefaultDomain(n.domain())) continue;
      // Kiln's registry splits an op's opsets where its meaning changes (not where ONNX only
      // adds types); ops kiln does not define are compared by their ONNX schema.
      const int m = static_cast<int>(opset_), b = static_cast<int>(body_opset);
      const void* def = definition_("", n.op_type(), m);
      bool same = def == definition_("", n.op_type(), b) &&
                  (def != nullptr || onnx::OpSchemaRegistry::Schema(n.op_type(), m, "") ==
                                         onnx::OpSchemaRegistry::Schema(n.op_type(), b, "")) &&
                  FindKilnFunction(n.op_type(), m) == FindKilnFunction(n.op_type(), b);
      if (!same) return n.op_type() + " (body opset " + std::to_string(body_opset) + ")";
    }
    return "";
  }

  // The body's nodes with names bound to `node`'s values and attributes.
  Status Inline(const onnx::NodeProto& node, const onnx::OpSchema* schema,
                const onnx::FunctionProto& body, std::vector<onnx::NodeProto>* nodes) {
    std::map<std::string, std::string> names;  // body name -> graph name
    for (int i = 0; i < body.input_size(); ++i)
      names[body.input(i)] = i < node.input_size() ? node.input(i) : "";
    for (int i = 0; i < node.output_size(); ++i)
      if (!node.output(i).empty()) names[body.output(i)] = node.output(i);
    std::map<std::string, const onnx::AttributeProto*> attrs;
    for (const onnx::AttributeProto& a : node.attribute()) attrs[a.name()] = &a;
    if (schema != nullptr) {
      for (const auto& [name, attr] : schema->attributes())
        if (attr.default_value.type() != onnx::AttributeProto::UNDEFINED)
          attrs.emplace(name, &attr.default_value);
    }
    for (int i = 0; i < body.node_size(); ++i) {
      onnx::NodeProto n = body.node(i);
      std::string label = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
      n.set_name(UniqueName(node.name() + "/" + label));
      RETURN_IF_ERROR(Rename(node.name(), &names, &n));
      RETURN_IF_ERROR(BindAttributes(attrs, &n));
      nodes->push_back(std::move(n));
    }
    return Status::Ok();
  }

  // Renames every value `n` (and its subgraphs) uses: formals to actuals, the rest to new names.
  Status Rename(const std::string& prefix, std::map<std::string, std::string>* names,
                onnx::NodeProto* n) {
    auto map = [&](std::string* s) {
      if (s->empty()) return;
      auto it = names->find(*s);
      if (it == names->end()) it = names->emplace(*s, UniqueName(prefix + "/" + *s)).first;
      *s = it->second;
    };
    for (std::string& s : *n->mutable_input()) map(&s);
    for (std::string& s : *n->mutable_output()) map(&s);
    for (onnx::AttributeProto& a : *n->mutable_attribute()) {
      if (!a.has_g()) continue;
      onnx::GraphProto* g = a.mutable_g();
      for (auto& vi : *g->mutable_input()) map(vi.mutable_name());
      for (auto& vi : *g->mutable_output()) map(vi.mutable_name());
      for (auto& vi : *g->mutable_value_info()) map(vi.mutable_name());
      for (auto& t : *g->mutable_initializer()) map(t.mutable_name());
      for (onnx::NodeProto& inner : *g->mutable_node()) RETURN_IF_ERROR(Rename(prefix, names, &inner));
    }
    return Status::Ok();
  }

  // Attributes that refer to the function node's take their values (ONNX: absent ones vanish).
  static Status BindAttributes(const std::map<std::string, const onnx::AttributeProto*>& attrs,
                               onnx::NodeProto* n) {
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> bound;
    for (onnx::AttributeProto& a : *n->mutable_attribute()) {
      if (a.ref_attr_name().empty()) {
        *bound.Add() = std::move(a);
        continue;
      }
      auto it = attrs.find(a.ref_attr_name());
      if (it == attrs.end()) continue;
      onnx::AttributeProto value = *it->second;
      value.set_name(a.name());
      *bound.Add() = std::move(value);
    }
    n->mutable_attribute()->Swap(&bound);
    return Status::Ok();
  }

  onnx::ModelProto& model_;
  const OpDefinitionFn& definition_;
  int64_t opset_ = 0;
  std::set<std::string> taken_;
  std::map<std::string, onnx::TypeProto> types_;
  std::vector<std::string> pending_;  // nodes waiting for input types, this round
  bool progress_ = false;
  int expansions_ = 0;
};

}  // namespace

Status ExpandFunctions(onnx::ModelProto& model, const OpDefinitionFn& definition) {
  if (!model.has_graph()) return Status::Ok();
  return Expander(model, definition).Run();
}

}  // namespace kiln::compiler::onnx_import
