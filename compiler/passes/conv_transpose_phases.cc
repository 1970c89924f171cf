#include "compiler/passes/conv_transpose_phases.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ops/attributes.h"

namespace kiln::compiler {
namespace {

constexpr int kSpatial = 2;

// One phase along one dim: the taps t (ascending in the input offset they read) and the
// convolution window they form: input offsets lo .. lo + taps - 1 around q.
struct PhaseDim {
  std::vector<int64_t> taps;  // taps[j] is the ConvTranspose tap at window position j
  int64_t lo = 0;
  int64_t pad_begin = 0, pad_end = 0;  // the phase convolution's
};

// Output o = s * q + r receives tap t from input (r + pad - t) / s + q when that is whole.
// nullopt when no tap lands (the phase is the bias alone) or the window needs negative pads.
std::optional<PhaseDim> MakePhase(int64_t r, int64_t s, int64_t kernel, int64_t pad,
                                  int64_t delta) {
  PhaseDim p;
  std::vector<int64_t> offsets;
  for (int64_t t = kernel - 1; t >= 0; --t) {  // descending t: ascending offsets
    const int64_t num = r + pad - t;
    if (((num % s) + s) % s != 0) continue;
    p.taps.push_back(t);
    offsets.push_back(num / s);
  }
  if (p.taps.empty()) return std::nullopt;
  p.lo = offsets.front();
  const int64_t window = static_cast<int64_t>(p.taps.size());
  // The grid has H + delta positions: H + pad_begin + pad_end - window + 1 = H + delta.
  p.pad_begin = -p.lo;
  p.pad_end = delta + p.lo + window - 1;
  if (p.pad_begin < 0 || p.pad_end < 0) return std::nullopt;
  return p;
}

struct Plan {
  int64_t stride = 1, group = 1, cin = 0, cout_g = 0;
  std::vector<int64_t> kernel;
  std::vector<int64_t> delta;                 // per dim: grid = input + delta
  std::vector<std::vector<PhaseDim>> phases;  // per dim, per residue
};

std::optional<Plan> PlanOf(const Graph& g, const Node& node) {
  if (node.op_type != "ConvTranspose" || !node.domain.empty() || node.inputs.size() < 2 ||
      node.outputs.size() != 1 || node.outputs[0] == kNoValue)
    return std::nullopt;
  const Value& x = g.value(node.inputs[0]);
  const Value& w = g.value(node.inputs[1]);
  if (x.dtype != DType::kF32 || !x.shape || x.shape->size() != kSpatial + 2) return std::nullopt;
  if (w.dtype != DType::kF32 || !w.data || w.data->dtype() != DType::kF32 ||
      w.data->dims().size() != kSpatial + 2)
    return std::nullopt;
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue &&
      g.value(node.inputs[2]).dtype != DType::kF32)
    return std::nullopt;
  const std::vector<int64_t>& wd = w.data->dims();
  StatusOr<ConvAttributes> a =
      ParseConvAttributes(node, kSpatial, std::vector<int64_t>(wd.begin() + 2, wd.end()));
  if (!a.ok() || !a->output_shape.empty()) return std::nullopt;
  if (a->auto_pad != AutoPad::kNotSet && a->auto_pad != AutoPad::kValid) return std::nullopt;
  Plan p;
  p.stride = a->strides[0];
  p.group = a->group;
  p.kernel = a->kernel;
  p.cin = wd[0];
  p.cout_g = wd[1];
  if (a->strides[1] != p.stride || p.cin % p.group != 0) return std::nullopt;
  const DimExpr& channels = (*x.shape)[1];
  if (!channels.is_const() || channels.const_value() != p.cin) return std::nullopt;
  for (int d = 0; d < kSpatial; ++d) {
    if (a->dilations[d] != 1) return std::nullopt;
    const bool valid = a->auto_pad == AutoPad::kValid;
    const int64_t pb = valid ? 0 : a->pads[d], pe = valid ? 0 : a->pads[d + kSpatial];
    const int64_t op = a->output_padding.empty() ? 0 : a->output_padding[d];
    // Output = s * (H - 1) + k - pb - pe + op = s * (H + delta).
    const int64_t num = p.kernel[d] - pb - pe + op;
    if (num % p.stride != 0) return std::nullopt;
    p.delta.push_back(num / p.stride - 1);
    std::vector<PhaseDim> per_residue;
    for (int64_t r = 0; r < p.stride; ++r) {
      std::optional<PhaseDim> ph = MakePhase(r, p.stride, p.kernel[d], pb, p.delta[d]);
      if (!ph) return std::nullopt;
      per_residue.push_back(std::move(*ph));
    }
    p.phases.push_back(std::move(per_residue));
  }
  return p;
}

// The phase convolution's weights [Cout, Cin / group, window_h, window_w]: tap (t_h, t_w) of
// W [Cin, Cout / group, kh, kw], input channel (group, local) for output channel co.
std::vector<float> PhaseWeights(const Plan& p, const float* w, const PhaseDim& ph,
                                const PhaseDim& pw) {
  const int64_t cin_g = p.cin / p.group, cout = p.cout_g * p.group;
  const int64_t kh = p.kernel[0], kw = p.kernel[1];
  const int64_t wh = static_cast<int64_t>(ph.taps.size()),
                ww = static_cast<int64_t>(pw.taps.size());
  std::vector<float> out(static_cast<size_t>(cout * cin_g * wh * ww));
  size_t at = 0;
  for (int64_t co = 0; co < cout; ++co) {
    const int64_t grp = co / p.cout_g, col = co % p.cout_g;
    for (int64_t cl = 0; cl < cin_g; ++cl) {
      const int64_t ci = grp * cin_g + cl;
      for (int64_t j = 0; j < wh; ++j) {
        for (int64_t i = 0; i < ww; ++i) {
          out[at++] = w[((ci * p.cout_g + col) * kh + ph.taps[j]) * kw + pw.taps[i]];
        }
      }
    }
  }
  return out;
}

StatusOr<ValueId> AddWeights(Graph& g, const std::string& base, std::vector<int64_t> dims,
                             const std::vector<float>& values) {
  ASSIGN_OR_RETURN(ValueId id, g.AddValue(g.UniqueValueName(base), ValueKind::kConstant));
  ASSIGN_OR_RETURN(TensorDataRef data, TensorData::Copy(DType::kF32, dims, values.data(),
                                                        values.size() * sizeof(float)));
  Value& v = g.mutable_value(id);
  v.dtype = DType::kF32;
  v.shape = SymbolicShape();
  for (int64_t d : dims) v.shape->push_back(DimExpr(d));
  v.data = std::move(data);
  return id;
}

// The Conv attributes of one phase.
std::map<std::string, Attribute> ConvAttrs(const Plan& p, const PhaseDim& ph, const PhaseDim& pw) {
  std::map<std::string, Attribute> attrs;
  attrs["kernel_shape"] =
      Attribute::Ints({static_cast<int64_t>(ph.taps.size()), static_cast<int64_t>(pw.taps.size())});
  attrs["pads"] = Attribute::Ints({ph.pad_begin, pw.pad_begin, ph.pad_end, pw.pad_end});
  attrs["group"] = Attribute::Int(p.group);
  return attrs;
}

Status Rewrite(Graph& g, NodeId n, const Plan& p) {
  const Node& node = g.node(n);
  const std::string name = node.name;
  const ValueId x = node.inputs[0], w = node.inputs[1];
  const ValueId bias = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  const ValueId out = node.outputs[0];
  const float* wdata = static_cast<const float*>(g.value(w).data->data());
  const SymbolicShape xs = *g.value(x).shape;
  const int64_t cout = p.cout_g * p.group, cin_g = p.cin / p.group;
  const SymbolicShape grid = {xs[0], DimExpr(cout), xs[2] + DimExpr(p.delta[0]),
                              xs[3] + DimExpr(p.delta[1])};
  std::vector<ValueId> phase_outputs;
  for (int64_t rh = 0; rh < p.stride; ++rh) {
    for (int64_t rw = 0; rw < p.stride; ++rw) {
      const PhaseDim &ph = p.phases[0][rh], &pw = p.phases[1][rw];
      const std::string tag = "_phase" + std::to_string(rh) + std::to_string(rw);
      ASSIGN_OR_RETURN(ValueId wp, AddWeights(g, name + tag + "_w",
                                              {cout, cin_g, static_cast<int64_t>(ph.taps.size()),
                                               static_cast<int64_t>(pw.taps.size())},
                                              PhaseWeights(p, wdata, ph, pw)));
      if (p.stride == 1) {  // the node itself becomes the one Conv
        g.SetNodeInput(n, 1, wp);
        Node& conv = g.mutable_node(n);
        conv.op_type = "Conv";
        conv.attributes = ConvAttrs(p, ph, pw);
        conv.dim_facts.clear();
        return Status::Ok();
      }
      ASSIGN_OR_RETURN(ValueId y, g.AddValue(g.UniqueValueName(g.value(out).name + tag),
                                             ValueKind::kNodeOutput));
      g.mutable_value(y).dtype = DType::kF32;
      g.mutable_value(y).shape = grid;
      Node conv;
      conv.name = g.UniqueNodeName(name + tag);
      conv.op_type = "Conv";
      conv.inputs = {x, wp};
      if (bias != kNoValue) conv.inputs.push_back(bias);
      conv.outputs = {y};
      conv.attributes = ConvAttrs(p, ph, pw);
      RETURN_IF_ERROR(g.AddNode(std::move(conv)).status());
      phase_outputs.push_back(y);
    }
  }
  ASSIGN_OR_RETURN(ValueId cat, g.AddValue(g.UniqueValueName(g.value(out).name + "_phases"),
                                           ValueKind::kNodeOutput));
  g.mutable_value(cat).dtype = DType::kF32;
  SymbolicShape cat_shape = grid;
  cat_shape[1] = DimExpr(cout * p.stride * p.stride);
  g.mutable_value(cat).shape = cat_shape;
  Node concat;
  concat.name = g.UniqueNodeName(name + "_phases");
  concat.op_type = "Concat";
  concat.attributes["axis"] = Attribute::Int(1);
  concat.inputs = phase_outputs;
  concat.outputs = {cat};
  RETURN_IF_ERROR(g.AddNode(std::move(concat)).status());
  // The ConvTranspose node becomes the DepthToSpace: its output value keeps its producer.
  if (bias != kNoValue) g.SetNodeInput(n, 2, kNoValue);
  g.SetNodeInput(n, 1, kNoValue);
  g.SetNodeInput(n, 0, cat);
  Node& d2s = g.mutable_node(n);
  d2s.inputs.resize(1);
  d2s.op_type = "DepthToSpace";
  d2s.attributes.clear();
  d2s.attributes["blocksize"] = Attribute::Int(p.stride);
  d2s.attributes["mode"] = Attribute::String("DCR");
  d2s.dim_facts.clear();
  return Status::Ok();
}

}  // namespace

StatusOr<int> ConvTransposeToPhaseConvs(Graph& graph) {
  int rewritten = 0;
  const int nodes = graph.num_nodes();
  for (NodeId n = 0; n < nodes; ++n) {
    std::optional<Plan> plan = PlanOf(graph, graph.node(n));
    if (!plan) continue;
    RETURN_IF_ERROR(Rewrite(graph, n, *plan));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln::compiler
