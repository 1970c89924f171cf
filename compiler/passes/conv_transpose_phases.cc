#include "compiler/passes/conv_transpose_phases.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ops/attributes.h"
#include "compiler/passes/graph_match.h"

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
  bool no_pads = true;                        // pads and output_padding all 0
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
    if (pb != 0 || pe != 0 || op != 0) p.no_pads = false;
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


// Node `reader`, which reads `producer`'s output, is absorbed into `producer`: `producer` now
// writes the reader's output value (same dtype and shape: a per-channel affine or an
// elementwise function of it), and the reader, left writing the old value nobody else reads,
// is marked for removal.
void Absorb(Graph& g, NodeId producer, NodeId reader, std::vector<bool>* keep) {
  const ValueId mid = g.node(producer).outputs[0], out = g.node(reader).outputs[0];
  g.mutable_node(producer).outputs[0] = out;
  g.mutable_value(out).producer = producer;
  g.mutable_node(reader).outputs[0] = mid;
  g.mutable_value(mid).producer = reader;
  (*keep)[reader] = false;
}

// Inference BatchNormalization of `bn` (constant statistics of `channels` elements, one
// output) as y = x * scale[c] + shift[c]; false if it is not one.
bool BatchNormAffine(const Graph& g, const Node& bn, int64_t channels, std::vector<double>* scale,
                     std::vector<double>* shift) {
  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5 ||
      bn.outputs.size() != 1)
    return false;
  if (const Attribute* t = bn.FindAttribute("training_mode");
      t != nullptr && (t->type() != Attribute::Type::kInt || t->i() != 0))
    return false;
  std::vector<std::vector<double>> p;
  for (int i = 1; i < 5; ++i) {
    const TensorData* d = ConstantOf(g, bn.inputs[i]);
    if (d == nullptr || d->num_elements() != channels) return false;
    p.push_back(d->ToDoubles());
  }
  double eps = 1e-5;
  if (const Attribute* e = bn.FindAttribute("epsilon")) {
    if (e->type() != Attribute::Type::kFloat) return false;
    eps = e->f();
  }
  scale->resize(channels);
  shift->resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    (*scale)[c] = p[0][c] / std::sqrt(p[3][c] + eps);
    (*shift)[c] = p[1][c] - p[2][c] * (*scale)[c];
  }
  return true;
}

// Folds the BatchNormalization reading ConvTranspose `n`'s output (its sole reader) into the
// node's weights and bias: W'[ci, col] = W[ci, col] * scale[co], B' = B * scale + shift.
// Returns whether it did.
StatusOr<bool> FoldBatchNorm(Graph& g, NodeId n, const Plan& p, std::vector<bool>* keep) {
  const NodeId bn = SoleDataReader(g, g.node(n).outputs[0]);
  if (bn == kNoNode) return false;
  const int64_t cout = p.cout_g * p.group;
  std::vector<double> scale, shift;
  if (!BatchNormAffine(g, g.node(bn), cout, &scale, &shift)) return false;
  const Node& node = g.node(n);
  const TensorData& w = *g.value(node.inputs[1]).data;
  const float* wd = static_cast<const float*>(w.data());
  const int64_t cin_g = p.cin / p.group, taps = p.kernel[0] * p.kernel[1];
  std::vector<float> wf(static_cast<size_t>(w.num_elements()));
  for (int64_t ci = 0; ci < p.cin; ++ci) {
    const int64_t grp = ci / cin_g;
    for (int64_t col = 0; col < p.cout_g; ++col) {
      const double s = scale[grp * p.cout_g + col];
      const int64_t at = (ci * p.cout_g + col) * taps;
      for (int64_t t = 0; t < taps; ++t) wf[at + t] = static_cast<float>(wd[at + t] * s);
    }
  }
  std::vector<double> b(static_cast<size_t>(cout), 0.0);
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const TensorData* bd = ConstantOf(g, node.inputs[2]);
    if (bd == nullptr || bd->num_elements() != cout) return false;
    b = bd->ToDoubles();
  }
  std::vector<float> bf(static_cast<size_t>(cout));
  for (int64_t c = 0; c < cout; ++c) bf[c] = static_cast<float>(b[c] * scale[c] + shift[c]);
  ASSIGN_OR_RETURN(ValueId wv, AddWeights(g, node.name + "_bn_w", w.dims(), wf));
  ASSIGN_OR_RETURN(ValueId bv, AddWeights(g, node.name + "_bn_b", {cout}, bf));
  g.SetNodeInput(n, 1, wv);
  g.SetNodeInput(n, 2, bv);
  Absorb(g, n, bn, keep);
  return true;
}

// The elementwise activation reading ConvTranspose `n`'s output (its sole reader), any other
// inputs constant: it commutes with Concat and DepthToSpace, so each phase convolution applies
// it (where both back ends fuse it into the convolution). kNoNode if there is none.
NodeId ActivationReader(const Graph& g, NodeId n) {
  static const std::set<std::string> kUnary = {
      "Relu", "LeakyRelu", "Clip",        "Sigmoid",   "Tanh",     "Elu",
      "Selu", "Celu",      "HardSigmoid", "HardSwish", "Softplus", "Softsign"};
  const ValueId out = g.node(n).outputs[0];
  const NodeId a = SoleDataReader(g, out);
  if (a == kNoNode) return kNoNode;
  const Node& act = g.node(a);
  if (!act.domain.empty() || !kUnary.count(act.op_type) || act.outputs.size() != 1 ||
      g.value(act.outputs[0]).dtype != DType::kF32)
    return kNoNode;
  for (size_t k = 1; k < act.inputs.size(); ++k) {
    if (act.inputs[k] != kNoValue && ConstantOf(g, act.inputs[k]) == nullptr) return kNoNode;
  }
  return a;
}

// Adds a copy of activation node `act` reading `x` (of shape `shape`); returns its output.
StatusOr<ValueId> AddActivation(Graph& g, const Node& act, ValueId x, const SymbolicShape& shape) {
  ASSIGN_OR_RETURN(ValueId y, g.AddValue(g.UniqueValueName(g.value(x).name + "_" + act.op_type),
                                         ValueKind::kNodeOutput));
  g.mutable_value(y).dtype = DType::kF32;
  g.mutable_value(y).shape = shape;
  Node copy;
  copy.name = g.UniqueNodeName(act.name + "_" + g.value(x).name);
  copy.op_type = act.op_type;
  copy.attributes = act.attributes;
  copy.inputs = act.inputs;
  copy.inputs[0] = x;
  copy.outputs = {y};
  RETURN_IF_ERROR(g.AddNode(std::move(copy)).status());
  return y;
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

// Node `n` (the ConvTranspose) turned into an `op` node reading `inputs` (its other input
// slots dropped), without attributes or dim facts; it keeps writing its output value.
Node& Retype(Graph& g, NodeId n, const char* op, const std::vector<ValueId>& inputs) {
  const size_t slots = g.node(n).inputs.size();
  for (size_t k = inputs.size(); k < slots; ++k) g.SetNodeInput(n, static_cast<int>(k), kNoValue);
  for (size_t k = 0; k < inputs.size(); ++k) g.SetNodeInput(n, static_cast<int>(k), inputs[k]);
  Node& node = g.mutable_node(n);
  node.inputs.resize(inputs.size());
  node.op_type = op;
  node.attributes.clear();
  node.dim_facts.clear();
  return node;
}

// Whether ConvTranspose `n` reads a 1 x 1 image without pads (a generator's first layer,
// latent -> k x k): then out[:, co, i, j] = sum_ci x[:, ci] W[ci, co, i, j], one GEMM with
// W's own bytes as [Cin, Cout * kh * kw]; as phase convolutions it would mostly multiply pads.
bool IsOnePixel(const Graph& g, const Node& node, const Plan& p) {
  const SymbolicShape& xs = *g.value(node.inputs[0]).shape;
  return p.group == 1 && p.no_pads && xs[2].is_const() && xs[2].const_value() == 1 &&
         xs[3].is_const() && xs[3].const_value() == 1;
}

StatusOr<ValueId> AddShape(Graph& g, const std::string& base, const std::vector<int64_t>& dims) {
  ASSIGN_OR_RETURN(ValueId id, g.AddValue(g.UniqueValueName(base), ValueKind::kConstant));
  const int64_t rank = static_cast<int64_t>(dims.size());
  ASSIGN_OR_RETURN(TensorDataRef data, TensorData::Copy(DType::kI64, {rank}, dims.data(),
                                                        dims.size() * sizeof(int64_t)));
  Value& v = g.mutable_value(id);
  v.dtype = DType::kI64;
  v.shape = SymbolicShape{DimExpr(rank)};
  v.data = std::move(data);
  return id;
}

StatusOr<ValueId> AddOutput(Graph& g, const std::string& base, SymbolicShape shape) {
  ASSIGN_OR_RETURN(ValueId y, g.AddValue(g.UniqueValueName(base), ValueKind::kNodeOutput));
  g.mutable_value(y).dtype = DType::kF32;
  g.mutable_value(y).shape = std::move(shape);
  return y;
}

// The one-pixel form: Reshape(x, [-1, Cin]) -> Gemm(W as [Cin, Cout * kh * kw], bias repeated
// per tap) -> activation -> Reshape to [-1, Cout, kh, kw] (node `n` becomes the last Reshape).
Status RewriteOnePixel(Graph& g, NodeId n, const Plan& p, const std::optional<Node>& act) {
  const Node& node = g.node(n);
  const std::string name = node.name;
  const ValueId x = node.inputs[0], w = node.inputs[1];
  const ValueId bias = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  const DimExpr batch = (*g.value(x).shape)[0];
  const int64_t taps = p.kernel[0] * p.kernel[1], m = p.cout_g * taps;
  ASSIGN_OR_RETURN(ValueId flat_shape, AddShape(g, name + "_rows", {-1, p.cin}));
  ASSIGN_OR_RETURN(ValueId rows, AddOutput(g, name + "_rows", {batch, DimExpr(p.cin)}));
  Node reshape;
  reshape.name = g.UniqueNodeName(name + "_rows");
  reshape.op_type = "Reshape";
  reshape.inputs = {x, flat_shape};
  reshape.outputs = {rows};
  RETURN_IF_ERROR(g.AddNode(std::move(reshape)).status());
  const TensorData& wd = *g.value(w).data;
  const float* wp = static_cast<const float*>(wd.data());
  ASSIGN_OR_RETURN(ValueId wm, AddWeights(g, name + "_gemm_w", {p.cin, m},
                                          std::vector<float>(wp, wp + p.cin * m)));
  ASSIGN_OR_RETURN(ValueId y, AddOutput(g, name + "_gemm", {batch, DimExpr(m)}));
  Node gemm;
  gemm.name = g.UniqueNodeName(name + "_gemm");
  gemm.op_type = "Gemm";
  gemm.inputs = {rows, wm};
  if (bias != kNoValue) {
    const TensorData* bd = ConstantOf(g, bias);
    if (bd == nullptr) return InvalidArgument(g.DescribeNode(n) + ": bias is not a constant");
    std::vector<double> b = bd->ToDoubles();
    std::vector<float> rep(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) rep[i] = static_cast<float>(b[i / taps]);
    ASSIGN_OR_RETURN(ValueId bv, AddWeights(g, name + "_gemm_b", {m}, rep));
    gemm.inputs.push_back(bv);
  }
  gemm.outputs = {y};
  RETURN_IF_ERROR(g.AddNode(std::move(gemm)).status());
  if (act) {
    ASSIGN_OR_RETURN(y, AddActivation(g, *act, y, {batch, DimExpr(m)}));
  }
  ASSIGN_OR_RETURN(ValueId out_shape,
                   AddShape(g, name + "_image", {-1, p.cout_g, p.kernel[0], p.kernel[1]}));
  Retype(g, n, "Reshape", {y, out_shape});
  return Status::Ok();
}

// `act`: an activation the rewrite applies to each phase convolution's output (Absorb has made
// node `n` write the activation's output).
Status Rewrite(Graph& g, NodeId n, const Plan& p, const std::optional<Node>& act) {
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
      if (act) {
        ASSIGN_OR_RETURN(y, AddActivation(g, *act, y, grid));
      }
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
  Node& d2s = Retype(g, n, "DepthToSpace", {cat});
  d2s.attributes["blocksize"] = Attribute::Int(p.stride);
  d2s.attributes["mode"] = Attribute::String("DCR");
  return Status::Ok();
}

}  // namespace

StatusOr<int> ConvTransposeToPhaseConvs(Graph& graph) {
  int rewritten = 0;
  const int nodes = graph.num_nodes();
  std::vector<bool> keep(nodes, true);
  for (NodeId n = 0; n < nodes; ++n) {
    std::optional<Plan> plan = PlanOf(graph, graph.node(n));
    if (!plan) continue;
    RETURN_IF_ERROR(FoldBatchNorm(graph, n, *plan, &keep).status());
    const bool one_pixel = IsOnePixel(graph, graph.node(n), *plan);
    // A stride-1 layer stays one Conv, which the back ends fuse with what follows anyway.
    std::optional<Node> act;
    if (plan->stride > 1 || one_pixel) {
      if (NodeId a = ActivationReader(graph, n); a != kNoNode) {
        act = graph.node(a);
        Absorb(graph, n, a, &keep);
      }
    }
    if (one_pixel) {
      RETURN_IF_ERROR(RewriteOnePixel(graph, n, *plan, act));
    } else {
      RETURN_IF_ERROR(Rewrite(graph, n, *plan, act));
    }
    ++rewritten;
  }
  keep.resize(graph.num_nodes(), true);
  if (std::find(keep.begin(), keep.end(), false) != keep.end())
    RETURN_IF_ERROR(graph.RemoveNodes(keep));
  return rewritten;
}

}  // namespace kiln::compiler
