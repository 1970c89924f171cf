// Fusion: elementwise chains -> one kernel; a chain reading a private kernel output -> that
// kernel's epilogue.
#include "compiler/lower/fusion.h"

#include <algorithm>
#include <functional>
#include <map>

#include "compiler/lower/loops.h"
#include "jit/compute.h"
#include "jit/dispatch.h"
#include "jit/kernel_ir_rewrite.h"

namespace kiln::compiler {
namespace {

using jit::BroadcastDim;
using jit::Expr;
using jit::Stmt;

struct Group {
  std::vector<ValueId> external;  // in first-use order
  ValueId output = kNoValue;
};

Group Analyze(const Graph& g, const std::vector<ElementwiseMember>& members) {
  Group group;
  std::vector<ValueId> produced;
  for (const ElementwiseMember& m : members) {
    const Node& node = g.node(m.node);
    for (int slot : m.slots) {
      ValueId v = node.inputs[slot];
      if (std::find(produced.begin(), produced.end(), v) != produced.end()) continue;
      if (std::find(group.external.begin(), group.external.end(), v) == group.external.end()) {
        group.external.push_back(v);
      }
    }
    produced.push_back(node.outputs[0]);
  }
  group.output = produced.back();
  return group;
}

// The group's math at one element: `values` holds every external input's (widened) value.
Expr Evaluate(const Graph& g, const std::vector<ElementwiseMember>& members,
              std::map<ValueId, Expr>& values, Lets& lets) {
  Expr last;
  for (size_t i = 0; i < members.size(); ++i) {
    const ElementwiseMember& m = members[i];
    const Node& node = g.node(m.node);
    std::vector<Expr> args;
    for (int slot : m.slots) args.push_back(values.at(node.inputs[slot]));
    DType dtype = g.value(node.outputs[0]).dtype;
    Expr r = jit::Cast(dtype, m.fn(lets, args));
    if (i + 1 == members.size()) {
      last = r;
    } else {
      values[node.outputs[0]] = lets.Bind(jit::Widen(r));
    }
  }
  return last;
}

// Whether the JIT can load `k`: its kernel provider takes at most kMaxDispatchBuffers buffers,
// kMaxDispatchDims dims and kMaxShapeKey buffer dims (jit/kernel_provider.h). A wider fused
// kernel compiled but failed to load (a chain of 40 Adds of constants).
bool Dispatchable(const jit::Kernel& k) {
  int key = 0;
  for (const jit::Buffer& b : k.buffers) key += b->rank;
  return k.buffers.size() <= static_cast<size_t>(jit::kMaxDispatchBuffers) &&
         k.dims.size() <= static_cast<size_t>(jit::kMaxDispatchDims) && key <= jit::kMaxShapeKey;
}

}  // namespace

StatusOr<FusedKernel> FuseElementwise(const Graph& g, const std::vector<ElementwiseMember>& members) {
  if (members.empty()) return InvalidArgument("empty fusion group");
  Group group = Analyze(g, members);
  const Value& out_value = g.value(group.output);
  const SymbolicShape& shape = *out_value.shape;
  FusedKernel fk;
  fk.output = group.output;
  fk.inputs = group.external;
  for (const ElementwiseMember& m : members) fk.nodes.push_back(m.node);
  jit::Buffer out = jit::Buffer::Param("out", out_value.dtype, static_cast<int>(shape.size()));
  std::vector<jit::Buffer> in;
  std::vector<std::vector<BroadcastDim>> hints;
  for (size_t k = 0; k < group.external.size(); ++k) {
    const Value& v = g.value(group.external[k]);
    in.push_back(jit::Buffer::Param("in" + std::to_string(k), v.dtype,
                                    static_cast<int>(v.shape->size())));
    hints.push_back(BroadcastHints(*v.shape, shape));
  }
  std::vector<Expr> dims;
  for (size_t a = 0; a < shape.size(); ++a) {
    dims.push_back(shape[a].is_const() ? jit::IntImm(shape[a].const_value())
                                       : jit::DimOf(out, static_cast<int>(a)));
  }
  // Inputs whose innermost dim may or may not repeat get a loop nest per case (BroadcastNest),
  // so each nest's inner loop vectorizes.
  Stmt body = BroadcastNest(
      dims, in, std::move(hints),
      [&](const std::vector<Expr>& index, const std::vector<std::vector<BroadcastDim>>& h) {
        Lets lets;
        std::map<ValueId, Expr> values;
        for (size_t k = 0; k < in.size(); ++k)
          values[group.external[k]] = lets.Bind(jit::Widen(jit::BroadcastLoad(in[k], index, h[k])));
        Expr r = Evaluate(g, members, values, lets);
        return lets.Wrap(jit::Store(out, index, jit::Cast(out_value.dtype, r)));
      });
  fk.kernel.name = "fused_" + g.node(members.back().node).op_type + "_" +
                   std::to_string(members.size());
  fk.kernel.buffers = in;
  fk.kernel.buffers.push_back(out);
  fk.kernel.body = body;
  Status valid = jit::ValidateKernel(fk.kernel);
  if (!valid.ok()) return Internal("fused kernel: " + valid.message());
  if (!Dispatchable(fk.kernel)) {
    return Unsupported("fused kernel '" + fk.kernel.name + "': " +
                       std::to_string(fk.kernel.buffers.size()) + " buffers, over the JIT's limit");
  }
  return fk;
}

std::optional<FusedKernel> FuseEpilogue(const Graph& g, const jit::Kernel& anchor,
                                        const std::vector<ValueId>& anchor_inputs,
                                        ValueId anchor_value,
                                        const std::vector<ElementwiseMember>& members) {
  if (members.empty() || anchor.buffers.size() != anchor_inputs.size() + 1) return std::nullopt;
  const jit::Buffer& anchor_out = anchor.buffers.back();
  if (jit::LoadsFrom(anchor.body, anchor_out)) return std::nullopt;
  Group group = Analyze(g, members);
  const Value& out_value = g.value(group.output);
  const SymbolicShape& shape = *out_value.shape;
  if (*g.value(anchor_value).shape != shape) return std::nullopt;
  FusedKernel fk;
  fk.output = group.output;
  fk.inputs = anchor_inputs;
  for (const ElementwiseMember& m : members) fk.nodes.push_back(m.node);
  fk.nodes.push_back(g.value(anchor_value).producer);
  jit::Buffer out = jit::Buffer::Param("out", out_value.dtype, static_cast<int>(shape.size()));
  std::vector<std::pair<ValueId, jit::Buffer>> extra;
  std::vector<std::vector<BroadcastDim>> hints;
  for (ValueId v : group.external) {
    if (v == anchor_value) continue;
    const Value& val = g.value(v);
    extra.emplace_back(v, jit::Buffer::Param("epi" + std::to_string(extra.size()), val.dtype,
                                             static_cast<int>(val.shape->size())));
    hints.push_back(BroadcastHints(*val.shape, shape));
    fk.inputs.push_back(v);
  }
  Stmt body = jit::RewriteStores(anchor.body, anchor_out,
                                 [&](const std::vector<Expr>& index, const Expr& stored) {
                                   Lets lets;
                                   std::map<ValueId, Expr> values;
                                   values[anchor_value] = lets.Bind(jit::Widen(stored));
                                   for (size_t k = 0; k < extra.size(); ++k) {
                                     values[extra[k].first] = lets.Bind(jit::Widen(
                                         jit::BroadcastLoad(extra[k].second, index, hints[k])));
                                   }
                                   Expr r = Evaluate(g, members, values, lets);
                                   return lets.Wrap(
                                       jit::Store(out, index, jit::Cast(out_value.dtype, r)));
                                 });
  body = jit::ReplaceBuffer(body, anchor_out, out);
  fk.kernel.name = anchor.name + "_epilogue" + std::to_string(members.size());
  fk.kernel.buffers.assign(anchor.buffers.begin(), anchor.buffers.end() - 1);
  for (const auto& [v, b] : extra) fk.kernel.buffers.push_back(b);
  fk.kernel.buffers.push_back(out);
  fk.kernel.dims = anchor.dims;
  fk.kernel.body = body;
  if (!jit::ValidateKernel(fk.kernel).ok() || !Dispatchable(fk.kernel)) return std::nullopt;
  return fk;
}

}  // namespace kiln::compiler
