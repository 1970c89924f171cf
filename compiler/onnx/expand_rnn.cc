// LSTM / GRU / RNN -> MatMul + Loop over the steps (see expand_rnn.h).
#include "compiler/onnx/expand_rnn.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/onnx/node_writer.h"

namespace kiln::compiler {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx_internal::DeclaredType;
using onnx_internal::FloatAttr;
using onnx_internal::GraphAttr;
using onnx_internal::IntAttr;
using onnx_internal::IntsAttr;
using onnx_internal::TensorAttr;
using Writer = onnx_internal::NodeWriter;

struct Activation {
  std::string name;  // lower case
  float alpha = 0, beta = 0;
};

enum class Kind { kLstm, kGru, kRnn };

// One recurrent node, parsed and checked.
struct Recurrent {
  Kind kind;
  std::string label;  // "LSTM node 'lstm_1'"
  int gates = 1;
  int64_t hidden = 0;
  int directions = 1;
  bool reverse_only = false;
  int64_t layout = 0;
  bool has_clip = false;
  float clip = 0;
  bool input_forget = false;
  bool linear_before_reset = false;
  std::vector<Activation> acts;  // per direction, `per_direction` each
  int per_direction = 1;
  std::string x, w, r, b, lens, h0, c0, p;
  std::string y, y_h, y_c;
};

std::string Input(const NodeProto& n, int i) { return i < n.input_size() ? n.input(i) : ""; }
std::string Output(const NodeProto& n, int i) { return i < n.output_size() ? n.output(i) : ""; }

// Takes alpha/beta from the attribute lists for the activations that use them (ONNX Runtime's
// reading of "consumed in the order of activation functions").
Status ReadActivations(const NodeProto& n, Recurrent& r) {
  std::vector<std::string> names;
  std::vector<float> alphas, betas;
  for (const AttributeProto& a : n.attribute()) {
    if (a.name() == "activations") names.assign(a.strings().begin(), a.strings().end());
    if (a.name() == "activation_alpha") alphas.assign(a.floats().begin(), a.floats().end());
    if (a.name() == "activation_beta") betas.assign(a.floats().begin(), a.floats().end());
  }
  static const std::vector<std::string> kDefaults[] = {
      {"sigmoid", "tanh", "tanh"}, {"sigmoid", "tanh"}, {"tanh"}};
  const std::vector<std::string>& defaults = kDefaults[static_cast<int>(r.kind)];
  r.per_direction = static_cast<int>(defaults.size());
  if (names.empty()) names = defaults;
  if (static_cast<int>(names.size()) == r.per_direction && r.directions == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (static_cast<int>(names.size()) != r.per_direction * r.directions) {
    return InvalidFormat(r.label + ": " + std::to_string(names.size()) + " activations for " +
                         std::to_string(r.directions) + " direction(s); expected " +
                         std::to_string(r.per_direction * r.directions));
  }
  static const std::map<std::string, std::pair<float, float>> kKnown = {
      {"sigmoid", {0, 0}},   {"tanh", {0, 0}},      {"relu", {0, 0}},
      {"softsign", {0, 0}},  {"softplus", {0, 0}},  {"leakyrelu", {0.01f, 0}},
      {"thresholdedrelu", {1, 0}}, {"elu", {1, 0}}, {"hardsigmoid", {0.2f, 0.5f}},
      {"affine", {1, 0}},    {"scaledtanh", {1, 1}}};
  size_t ai = 0, bi = 0;
  for (std::string name : names) {
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    auto known = kKnown.find(name);
    if (known == kKnown.end()) {
      return Unsupported(r.label + ": activation '" + name + "' is not supported");
    }
    Activation act{name, known->second.first, known->second.second};
    bool uses_alpha = name == "leakyrelu" || name == "thresholdedrelu" || name == "elu" ||
                      name == "hardsigmoid" || name == "affine" || name == "scaledtanh";
    bool uses_beta = name == "hardsigmoid" || name == "affine" || name == "scaledtanh";
    if (uses_alpha && ai < alphas.size()) act.alpha = alphas[ai++];
    if (uses_beta && bi < betas.size()) act.beta = betas[bi++];
    r.acts.push_back(act);
  }
  return Status::Ok();
}

StatusOr<Recurrent> Parse(const NodeProto& n, const std::string& name) {
  Recurrent r;
  r.kind = n.op_type() == "LSTM" ? Kind::kLstm : n.op_type() == "GRU" ? Kind::kGru : Kind::kRnn;
  r.gates = r.kind == Kind::kLstm ? 4 : r.kind == Kind::kGru ? 3 : 1;
  r.label = n.op_type() + " node '" + name + "'";
  std::string direction = "forward";
  for (const AttributeProto& a : n.attribute()) {
    if (a.name() == "hidden_size") r.hidden = a.i();
    if (a.name() == "direction") direction = a.s();
    if (a.name() == "layout") r.layout = a.i();
    if (a.name() == "clip") r.has_clip = true, r.clip = a.f();
    if (a.name() == "input_forget") r.input_forget = a.i() != 0;
    if (a.name() == "linear_before_reset") r.linear_before_reset = a.i() != 0;
  }
  if (r.hidden <= 0) return InvalidFormat(r.label + ": hidden_size must be set and positive");
  if (direction == "bidirectional") {
    r.directions = 2;
  } else if (direction == "reverse") {
    r.reverse_only = true;
  } else if (direction != "forward") {
    return InvalidFormat(r.label + ": direction '" + direction +
                         "' is not forward, reverse or bidirectional");
  }
  if (r.layout != 0 && r.layout != 1) {
    return InvalidFormat(r.label + ": layout " + std::to_string(r.layout) + " is not 0 or 1");
  }
  r.x = Input(n, 0), r.w = Input(n, 1), r.r = Input(n, 2), r.b = Input(n, 3);
  r.lens = Input(n, 4), r.h0 = Input(n, 5);
  if (r.kind == Kind::kLstm) r.c0 = Input(n, 6), r.p = Input(n, 7);
  if (r.x.empty() || r.w.empty() || r.r.empty()) {
    return InvalidFormat(r.label + ": inputs X, W and R are required");
  }
  r.y = Output(n, 0), r.y_h = Output(n, 1);
  if (r.kind == Kind::kLstm) r.y_c = Output(n, 2);
  RETURN_IF_ERROR(ReadActivations(n, r));
  return r;
}

std::string Apply(Writer& w, const Activation& a, const std::string& x) {
  const std::string& n = a.name;
  if (n == "sigmoid") return w.Op("Sigmoid", {x});
  if (n == "tanh") return w.Op("Tanh", {x});
  if (n == "relu") return w.Op("Relu", {x});
  if (n == "softsign") return w.Op("Softsign", {x});
  if (n == "softplus") return w.Op("Softplus", {x});
  if (n == "leakyrelu") return w.Op("LeakyRelu", {x}, {FloatAttr("alpha", a.alpha)});
  if (n == "thresholdedrelu") return w.Op("ThresholdedRelu", {x}, {FloatAttr("alpha", a.alpha)});
  if (n == "elu") return w.Op("Elu", {x}, {FloatAttr("alpha", a.alpha)});
  if (n == "hardsigmoid") {
    return w.Op("HardSigmoid", {x}, {FloatAttr("alpha", a.alpha), FloatAttr("beta", a.beta)});
  }
  if (n == "affine") return w.Op("Add", {w.Op("Mul", {x, w.Scalar(a.alpha)}), w.Scalar(a.beta)});
  // scaledtanh: alpha * tanh(beta * x)
  return w.Op("Mul", {w.Op("Tanh", {w.Op("Mul", {x, w.Scalar(a.beta)})}), w.Scalar(a.alpha)});
}

// Values shared by the directions of one node, in the outer graph.
struct Common {
  std::string xs;         // X as [seq, batch, input]
  std::string seq;        // int64 scalar
  std::string last_step;  // seq - 1
  std::string zeros;      // [batch, hidden] of the element type
  std::string lens;       // sequence_lens as float [batch], or ""
};

// Slice `d` of an input whose axis `axis` is the direction.
std::string Direction(Writer& w, const std::string& v, int d, int64_t axis = 0) {
  return w.Op("Gather", {v, w.I64(d)}, {IntAttr("axis", axis)});
}

// Block k of the 1-D `v` split in `count` equal parts.
std::string Block(Writer& w, const std::string& v, int count, int64_t k) {
  std::string shaped = w.Op("Reshape", {v, w.I64({count, -1}, {2})});
  return w.Op("Gather", {shaped, w.I64(k)}, {IntAttr("axis", 0)});
}

// Row block k of the matrix `v` [count * rows, cols].
std::string RowBlock(Writer& w, const std::string& v, int count, int64_t rows, int64_t k) {
  std::string shaped = w.Op("Reshape", {v, w.I64({count, rows, -1}, {3})});
  return w.Op("Gather", {shaped, w.I64(k)}, {IntAttr("axis", 0)});
}

// The `gates` equal blocks of `g` [batch, gates * hidden], each [batch, hidden]: one Split
// rather than a Reshape and a Gather per gate, so a loop body runs one kernel where it ran one
// per gate (the body's per-step instructions, not its arithmetic, dominate small hidden sizes).
std::vector<std::string> Gates(Writer& w, const std::string& g, int gates) {
  std::vector<AttributeProto> attrs = {IntAttr("axis", -1)};
  if (w.opset() >= 18) attrs.push_back(IntAttr("num_outputs", gates));  // required from 18
  return w.OpN("Split", {g}, gates, std::move(attrs));
}

// The first two of the three equal blocks of `v` along axis 0, reshaped to `shape` (Gather
// rather than Slice, whose form changes at opset 10).
std::string FirstTwoOfThree(Writer& w, const std::string& v, const std::vector<int64_t>& shape) {
  std::string blocks = w.Op("Reshape", {v, w.I64({3, -1}, {2})});
  std::string two = w.Op("Gather", {blocks, w.I64({0, 1}, {2})}, {IntAttr("axis", 0)});
  return w.Op("Reshape", {two, w.I64(shape, {static_cast<int64_t>(shape.size())})});
}

std::string Clip(Writer& w, const Recurrent& r, const std::string& x) {
  if (!r.has_clip) return x;
  return w.Op("Max", {w.Op("Min", {x, w.Scalar(r.clip)}), w.Scalar(-r.clip)});
}

// The outer values one direction's loop body reads.
struct DirectionValues {
  std::string xw;                  // [seq, batch, gates*hidden]: X W^T + input-side biases
  std::string rt;                  // [hidden, gates*hidden] (LSTM, RNN, GRU with
                                   // linear_before_reset; otherwise GRU's z and r blocks only)
  std::string rb;                  // GRU: recurrent bias matching rt's columns, or ""
  std::string rbh;                 // GRU: its h block [hidden], or ""
  std::string rh_t;                // GRU: R_h^T [hidden, hidden]
  std::string pi, po, pf;          // LSTM peepholes [hidden], or ""
  const Activation* act = nullptr;  // this direction's activations
  bool reverse = false;
};

// The step of iteration `iter`.
std::string Step(Writer& b, const Common& c, const DirectionValues& v, const std::string& iter) {
  return v.reverse ? b.Op("Sub", {c.last_step, iter}) : iter;
}

// The new state from the step's candidate `fresh`: where the step is past a batch entry's length
// the state stays `old` (and Y gets zeros).
std::string Masked(Writer& b, const std::string& mask, const std::string& fresh,
                   const std::string& old) {
  if (mask.empty()) return fresh;
  std::string keep = b.Op("Sub", {b.Scalar(1), mask});
  return b.Op("Add", {b.Op("Mul", {mask, fresh}), b.Op("Mul", {keep, old})});
}

// Loop body outputs for LSTM: (H', C', Y_t), from the body inputs H, C.
std::vector<std::string> LstmStep(Writer& b, const Recurrent& r, const DirectionValues& v,
                                  const std::string& xw_t, const std::string& h,
                                  const std::string& c, const std::string& mask) {
  std::vector<std::string> g = Gates(b, b.Op("Add", {xw_t, b.Op("MatMul", {h, v.rt})}), 4);
  auto peep = [&](const std::string& x, const std::string& p, const std::string& state) {
    return p.empty() ? x : b.Op("Add", {x, b.Op("Mul", {p, state})});
  };
  const Activation* f = v.act;
  std::string i = Apply(b, f[0], Clip(b, r, peep(g[0], v.pi, c)));
  std::string forget = r.input_forget
                           ? b.Op("Sub", {b.Scalar(1), i})
                           : Apply(b, f[0], Clip(b, r, peep(g[2], v.pf, c)));
  std::string cand = Apply(b, f[1], Clip(b, r, g[3]));
  std::string c_new = b.Op("Add", {b.Op("Mul", {forget, c}), b.Op("Mul", {i, cand})});
  std::string o = Apply(b, f[0], Clip(b, r, peep(g[1], v.po, c_new)));
  std::string h_new = b.Op("Mul", {o, Apply(b, f[2], c_new)});
  std::string y = mask.empty() ? h_new : b.Op("Mul", {mask, h_new});
  return {Masked(b, mask, h_new, h), Masked(b, mask, c_new, c), y};
}

// Loop body outputs for GRU: (H', Y_t).
std::vector<std::string> GruStep(Writer& b, const Recurrent& r, const DirectionValues& v,
                                 const std::string& xw_t, const std::string& h,
                                 const std::string& mask) {
  // [batch, 3*hidden] with linear_before_reset, else [batch, 2*hidden] (z and r only: the h
  // block is recomputed below from r * H).
  std::string hr = b.Op("MatMul", {h, v.rt});
  if (!v.rb.empty()) hr = b.Op("Add", {hr, v.rb});
  std::vector<std::string> x = Gates(b, xw_t, 3);
  std::vector<std::string> hg = Gates(b, hr, r.linear_before_reset ? 3 : 2);
  const Activation* f = v.act;
  std::string z = Apply(b, f[0], Clip(b, r, b.Op("Add", {x[0], hg[0]})));
  std::string rg = Apply(b, f[0], Clip(b, r, b.Op("Add", {x[1], hg[1]})));
  std::string recurrent;
  if (r.linear_before_reset) {
    recurrent = b.Op("Mul", {rg, hg[2]});
  } else {
    recurrent = b.Op("MatMul", {b.Op("Mul", {rg, h}), v.rh_t});
    if (!v.rbh.empty()) recurrent = b.Op("Add", {recurrent, v.rbh});
  }
  std::string cand = Apply(b, f[1], Clip(b, r, b.Op("Add", {x[2], recurrent})));
  // (1 - z) * cand + z * h = cand + z * (h - cand)
  std::string h_new = b.Op("Add", {cand, b.Op("Mul", {z, b.Op("Sub", {h, cand})})});
  std::string y = mask.empty() ? h_new : b.Op("Mul", {mask, h_new});
  return {Masked(b, mask, h_new, h), y};
}

// Loop body outputs for RNN: (H', Y_t).
std::vector<std::string> RnnStep(Writer& b, const Recurrent& r, const DirectionValues& v,
                                 const std::string& xw_t, const std::string& h,
                                 const std::string& mask) {
  std::string pre = b.Op("Add", {xw_t, b.Op("MatMul", {h, v.rt})});
  std::string h_new = Apply(b, v.act[0], Clip(b, r, pre));
  std::string y = mask.empty() ? h_new : b.Op("Mul", {mask, h_new});
  return {Masked(b, mask, h_new, h), y};
}

// Builds one direction's Loop; returns its final states (H, and C for LSTM) and Y in time
// order, [seq, batch, hidden].
std::vector<std::string> DirectionLoop(Writer& w, const Recurrent& r, const Common& c,
                                       const DirectionValues& v, const std::string& h0,
                                       const std::string& c0) {
  bool lstm = r.kind == Kind::kLstm;
  Writer b = w.Sub();
  onnx::GraphProto body;
  body.set_name(w.Fresh("body"));
  std::string iter = b.Fresh("iter"), cond = b.Fresh("cond"), h = b.Fresh("h"),
              cc = lstm ? b.Fresh("c") : "";
  for (const std::string& in : {iter, cond, h}) body.add_input()->set_name(in);
  if (lstm) body.add_input()->set_name(cc);

  std::string t = Step(b, c, v, iter);
  std::string xw_t = b.Op("Gather", {v.xw, t}, {IntAttr("axis", 0)});
  std::string mask;
  if (!c.lens.empty()) {
    std::string tf = b.Op("Cast", {t}, {IntAttr("to", TensorProto::FLOAT)});
    std::string live = b.Op("Less", {tf, c.lens});  // [batch]
    mask = b.Typed(b.Op("Cast", {live}, {IntAttr("to", TensorProto::FLOAT)}));
    mask = b.Op("Reshape", {mask, b.I64({-1, 1}, {2})});
  }
  std::vector<std::string> outs = lstm ? LstmStep(b, r, v, xw_t, h, cc, mask)
                                   : r.kind == Kind::kGru ? GruStep(b, r, v, xw_t, h, mask)
                                                          : RnnStep(b, r, v, xw_t, h, mask);
  outs.insert(outs.begin(), b.Op("Identity", {cond}));
  if (v.reverse) outs.push_back(b.Op("Identity", {t}));
  for (NodeProto& n : b.nodes()) *body.add_node() = std::move(n);
  for (const std::string& o : outs) body.add_output()->set_name(o);

  TensorProto yes;
  yes.set_data_type(TensorProto::BOOL);
  yes.add_int32_data(1);
  std::string go = w.Op("Constant", {}, {TensorAttr("value", std::move(yes))});
  std::vector<std::string> ins = {c.seq, go, h0};
  if (lstm) ins.push_back(c0);
  int n_out = (lstm ? 3 : 2) + (v.reverse ? 1 : 0);
  std::vector<std::string> res = w.OpN("Loop", ins, n_out, {GraphAttr("body", std::move(body))});
  std::string y = res[lstm ? 2 : 1];
  if (v.reverse) y = w.Op("Gather", {y, res.back()}, {IntAttr("axis", 0)});
  std::vector<std::string> result = {res[0]};
  if (lstm) result.push_back(res[1]);
  result.push_back(y);
  return result;
}

// The outer values of direction `d` of `r`.
DirectionValues Prepare(Writer& w, const Recurrent& r, const Common& c, int d) {
  DirectionValues v;
  v.act = &r.acts[d * r.per_direction];
  v.reverse = r.reverse_only || d == 1;
  std::string wt = w.Op("Transpose", {Direction(w, r.w, d)});  // [input, gates*hidden]
  v.xw = w.Op("MatMul", {c.xs, wt});
  std::string rd = Direction(w, r.r, d);
  bool gru_split = r.kind == Kind::kGru && !r.linear_before_reset;
  v.rt = w.Op("Transpose", {gru_split ? FirstTwoOfThree(w, rd, {2 * r.hidden, r.hidden}) : rd});
  if (r.kind == Kind::kGru) v.rh_t = w.Op("Transpose", {RowBlock(w, rd, 3, r.hidden, 2)});
  if (!r.b.empty()) {
    std::string bd = Direction(w, r.b, d);
    std::string wb = Block(w, bd, 2, 0), rb = Block(w, bd, 2, 1);
    if (r.kind == Kind::kGru) {
      v.xw = w.Op("Add", {v.xw, wb});
      v.rb = gru_split ? FirstTwoOfThree(w, rb, {2 * r.hidden}) : rb;
      v.rbh = Block(w, rb, 3, 2);
    } else {
      v.xw = w.Op("Add", {v.xw, w.Op("Add", {wb, rb})});
    }
  }
  if (!r.p.empty()) {
    std::string pd = Direction(w, r.p, d);
    v.pi = Block(w, pd, 3, 0), v.po = Block(w, pd, 3, 1), v.pf = Block(w, pd, 3, 2);
  }
  return v;
}

Common MakeCommon(Writer& w, const Recurrent& r) {
  Common c;
  c.xs = r.layout == 1 ? w.Op("Transpose", {r.x}, {IntsAttr("perm", {1, 0, 2})}) : r.x;
  std::string shape = w.Op("Shape", {c.xs});
  c.seq = w.Op("Gather", {shape, w.I64(0)}, {IntAttr("axis", 0)});
  c.last_step = w.Op("Sub", {c.seq, w.I64(1)});
  std::string batch = w.Op("Gather", {shape, w.I64({1}, {1})}, {IntAttr("axis", 0)});
  std::string dims = w.Op("Concat", {batch, w.I64({r.hidden}, {1})}, {IntAttr("axis", 0)});
  c.zeros = w.Typed(w.Op("ConstantOfShape", {dims}));  // float zeros by default
  if (!r.lens.empty()) c.lens = w.Op("Cast", {r.lens}, {IntAttr("to", TensorProto::FLOAT)});
  return c;
}

// State `s` ([directions, batch, hidden] input, [batch, directions, hidden] with layout 1, or
// absent) for direction d.
std::string Initial(Writer& w, const Recurrent& r, const std::string& s, const Common& c, int d) {
  return s.empty() ? c.zeros : Direction(w, s, d, r.layout == 1 ? 1 : 0);
}

// Writes the nodes that replace `r`.
void Expand(Writer& w, const Recurrent& r) {
  Common c = MakeCommon(w, r);
  bool lstm = r.kind == Kind::kLstm;
  std::vector<std::string> ys, hs, cs;
  for (int d = 0; d < r.directions; ++d) {
    DirectionValues v = Prepare(w, r, c, d);
    std::vector<std::string> res =
        DirectionLoop(w, r, c, v, Initial(w, r, r.h0, c, d), lstm ? Initial(w, r, r.c0, c, d) : "");
    hs.push_back(w.Op("Reshape", {res[0], w.I64({1, -1, r.hidden}, {3})}));
    if (lstm) cs.push_back(w.Op("Reshape", {res[1], w.I64({1, -1, r.hidden}, {3})}));
    ys.push_back(w.Op("Reshape", {res.back(), w.I64({0, 1, -1, r.hidden}, {4})}));
  }
  auto join = [&](const std::vector<std::string>& parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : w.Op("Concat", parts, {IntAttr("axis", axis)});
  };
  if (!r.y.empty()) {
    std::string y = join(ys, 1);  // [seq, directions, batch, hidden]
    if (r.layout == 1) y = w.Op("Transpose", {y}, {IntsAttr("perm", {2, 0, 1, 3})});
    w.Rename(y, r.y);
  }
  auto state = [&](const std::vector<std::string>& parts, const std::string& out) {
    if (out.empty()) return;
    std::string s = join(parts, 0);  // [directions, batch, hidden]
    if (r.layout == 1) s = w.Op("Transpose", {s}, {IntsAttr("perm", {1, 0, 2})});
    w.Rename(s, out);
  };
  state(hs, r.y_h);
  if (lstm) state(cs, r.y_c);
}

// Units per panel of kiln::RecurrentSequence's packed weights: two 8-lane f32 vectors a gate,
// so an LSTM panel keeps 8 independent FMA chains in flight (one 8-wide panel had 4, half the
// FMA throughput). Any width is correct on any host; an AVX-512 host runs it as one vector.
constexpr int64_t kPanelWidth = 16;

// The layers kiln::RecurrentSequence computes: the ONNX default activations, no sequence_lens,
// peepholes or input_forget, and GRU with linear_before_reset (PyTorch's export). The others
// take the Loop expansion.
bool Fusable(const Recurrent& r) {
  if (!r.lens.empty() || !r.p.empty() || r.input_forget) return false;
  if (r.kind == Kind::kGru && !r.linear_before_reset) return false;
  static const char* const kDefaults[][3] = {
      {"sigmoid", "tanh", "tanh"}, {"sigmoid", "tanh", ""}, {"tanh", "", ""}};
  for (size_t i = 0; i < r.acts.size(); ++i) {
    if (r.acts[i].name != kDefaults[static_cast<int>(r.kind)][i % r.per_direction]) return false;
  }
  return true;
}

// The whole layer as one kiln::RecurrentSequence node (its kernel runs every step of both
// directions): X W^T plus the input-side biases for all steps and directions as one MatMul, R
// packed [directions, panels, hidden, gates, kPanelWidth] (constant-folded from an initializer),
// and the outputs put into ONNX's layout.
void ExpandFused(Writer& w, const Recurrent& r) {
  const int64_t D = r.directions, G = r.gates, H = r.hidden;
  const bool lstm = r.kind == Kind::kLstm, gru = r.kind == Kind::kGru;
  std::string xs = r.layout == 1 ? w.Op("Transpose", {r.x}, {IntsAttr("perm", {1, 0, 2})}) : r.x;
  std::string wt = w.Op("Transpose", {w.Op("Reshape", {r.w, w.I64({D * G * H, -1}, {2})})});
  std::string xw = w.Op("MatMul", {xs, wt});  // [seq, batch, D * G * H]
  std::string rbh;
  if (!r.b.empty()) {
    std::string halves = w.Op("Reshape", {r.b, w.I64({D, 2, G * H}, {3})});
    std::string wb = w.Op("Gather", {halves, w.I64(0)}, {IntAttr("axis", 1)});  // [D, G * H]
    std::string rb = w.Op("Gather", {halves, w.I64(1)}, {IntAttr("axis", 1)});
    std::string bias;
    if (gru) {
      // R's h-gate bias is inside r * (h R_h^T + Rb_h): only z and r take theirs here.
      std::string wb3 = w.Op("Reshape", {wb, w.I64({D, 3, H}, {3})});
      std::string rb3 = w.Op("Reshape", {rb, w.I64({D, 3, H}, {3})});
      std::string zr = w.I64({0, 1}, {2});
      std::string both = w.Op("Add", {w.Op("Gather", {wb3, zr}, {IntAttr("axis", 1)}),
                                      w.Op("Gather", {rb3, zr}, {IntAttr("axis", 1)})});
      std::string h_in = w.Op("Gather", {wb3, w.I64({2}, {1})}, {IntAttr("axis", 1)});
      bias = w.Op("Concat", {both, h_in}, {IntAttr("axis", 1)});
      rbh = w.Op("Gather", {rb3, w.I64(2)}, {IntAttr("axis", 1)});  // [D, H]
    } else {
      bias = w.Op("Add", {wb, rb});
    }
    xw = w.Op("Add", {xw, w.Op("Reshape", {bias, w.I64({D * G * H}, {1})})});
  }
  const int64_t panels = (H + kPanelWidth - 1) / kPanelWidth, padded = panels * kPanelWidth;
  std::string r4 = w.Op("Reshape", {r.r, w.I64({D, G, H, H}, {4})});
  if (padded > H) {
    std::string zeros = w.Typed(w.Op("ConstantOfShape", {w.I64({D, G, padded - H, H}, {4})}));
    r4 = w.Op("Concat", {r4, zeros}, {IntAttr("axis", 2)});
  }
  std::string r5 = w.Op("Reshape", {r4, w.I64({D, G, panels, kPanelWidth, H}, {5})});
  std::string rp = w.Op("Transpose", {r5}, {IntsAttr("perm", {0, 2, 4, 1, 3})});
  auto state = [&](const std::string& s) {
    return s.empty() || r.layout == 0 ? s : w.Op("Transpose", {s}, {IntsAttr("perm", {1, 0, 2})});
  };
  std::vector<std::string> ins = {xw, rp, state(r.h0), lstm ? state(r.c0) : "", rbh};
  while (ins.back().empty()) ins.pop_back();
  std::vector<AttributeProto> attrs = {
      IntAttr("kind", static_cast<int64_t>(r.kind)), IntAttr("hidden_size", H),
      IntAttr("directions", D), IntAttr("reverse", r.reverse_only ? 1 : 0)};
  if (r.has_clip) attrs.push_back(FloatAttr("clip", r.clip));
  std::vector<std::string> outs = w.OpN("RecurrentSequence", ins, lstm ? 3 : 2, std::move(attrs));
  w.nodes().back().set_domain(kKilnDomain);
  if (!r.y.empty()) {
    std::string y = outs[0];  // [seq, D, batch, H]
    if (r.layout == 1) y = w.Op("Transpose", {y}, {IntsAttr("perm", {2, 0, 1, 3})});
    w.Rename(y, r.y);
  }
  auto final_state = [&](const std::string& s, const std::string& out) {
    if (out.empty()) return;
    w.Rename(r.layout == 1 ? w.Op("Transpose", {s}, {IntsAttr("perm", {1, 0, 2})}) : s, out);
  };
  final_state(outs[1], r.y_h);
  if (lstm) final_state(outs[2], r.y_c);
}

bool IsRecurrent(const NodeProto& n) {
  return (n.domain().empty() || n.domain() == "ai.onnx") &&
         (n.op_type() == "LSTM" || n.op_type() == "GRU" || n.op_type() == "RNN");
}

}  // namespace

Status ExpandRecurrentOps(onnx::GraphProto* graph, int64_t opset, bool* fused) {
  return onnx_internal::ExpandMatching(
      graph, IsRecurrent,
      [opset, fused](const NodeProto& n, const std::string& name,
              const onnx::GraphProto& g) -> StatusOr<std::vector<NodeProto>> {
        ASSIGN_OR_RETURN(Recurrent r, Parse(n, name));
        if (opset < 9) {
          return Unsupported(r.label + ": kiln runs recurrent ops from ai.onnx opset 9 (the model "
                             "imports " + std::to_string(opset) + ")");
        }
        int elem_type = DeclaredType(g, r.x);
        if (elem_type == 0 && opset < 15) elem_type = TensorProto::FLOAT;
        Writer w(name + "/rnn/", opset, elem_type, r.x);
        if (Fusable(r)) {
          ExpandFused(w, r);
          if (fused) *fused = true;
        } else {
          Expand(w, r);
        }
        return std::move(w.nodes());
      });
}

}  // namespace kiln::compiler
