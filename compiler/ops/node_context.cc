// NodeAttributes and NodeContextBase: attribute reads, input lookups and errors naming a node.
#include "compiler/ops/node_context.h"

namespace kiln::compiler {

// ---- NodeAttributes ---------------------------------------------------------------------------

StatusOr<const Attribute*> NodeAttributes::FindTyped(std::string_view name,
                                                     Attribute::Type type) const {
  const Attribute* a = node().FindAttribute(name);
  if (a && a->type() != type) {
    return Error("attribute '" + std::string(name) + "' is " + Attribute::TypeName(a->type()) +
                 ", expected " + Attribute::TypeName(type));
  }
  return a;
}

StatusOr<int64_t> NodeAttributes::GetInt(std::string_view name, int64_t default_value) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kInt));
  return a ? a->i() : default_value;
}

StatusOr<int64_t> NodeAttributes::GetRequiredInt(std::string_view name) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kInt));
  if (!a) return Error("required attribute '" + std::string(name) + "' is missing");
  return a->i();
}

StatusOr<float> NodeAttributes::GetFloat(std::string_view name, float default_value) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kFloat));
  return a ? a->f() : default_value;
}

StatusOr<std::string> NodeAttributes::GetString(std::string_view name,
                                                std::string default_value) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kString));
  return a ? a->s() : default_value;
}

StatusOr<std::optional<std::vector<int64_t>>> NodeAttributes::GetInts(std::string_view name) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kInts));
  if (!a) return std::optional<std::vector<int64_t>>();
  return std::optional<std::vector<int64_t>>(a->ints());
}

StatusOr<std::optional<std::vector<float>>> NodeAttributes::GetFloats(std::string_view name) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kFloats));
  if (!a) return std::optional<std::vector<float>>();
  return std::optional<std::vector<float>>(a->floats());
}

StatusOr<TensorDataRef> NodeAttributes::GetTensor(std::string_view name) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kTensor));
  return a ? a->tensor() : TensorDataRef();
}

Status NodeAttributes::Error(std::string_view message) const {
  return InvalidFormat(node().Describe() + ": " + std::string(message));
}

Status NodeAttributes::AttrError(std::string_view attr, std::string_view message) const {
  return Error("attribute '" + std::string(attr) + "': " + std::string(message));
}

Status NodeAttributes::UnsupportedError(std::string_view message) const {
  return Unsupported(node().Describe() + ": " + std::string(message));
}

// ---- NodeContextBase --------------------------------------------------------------------------

NodeContextBase::NodeContextBase(const Graph& graph, NodeId node, int64_t opset)
    : NodeAttributes(graph.node(node)), graph_(graph), node_(node), opset_(opset) {}

const TensorData* NodeContextBase::input_data(int i) const {
  if (!has_input(i)) return nullptr;
  const Value& v = input(i);
  if (v.kind == ValueKind::kGraphInput) return nullptr;
  return v.data.get();
}

StatusOr<int> NodeContextBase::NormalizeAxis(int64_t axis, int rank, std::string_view what) const {
  if (axis < -rank || axis >= rank) {
    return Error(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace kiln::compiler
