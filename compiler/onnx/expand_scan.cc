// Scan -> Loop (see expand_scan.h).
#include "compiler/onnx/expand_scan.h"

#include <string>
#include <vector>

#include "compiler/onnx/node_writer.h"

namespace kiln::compiler {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx_internal::GraphAttr;
using onnx_internal::IntAttr;
using onnx_internal::TensorAttr;
using Writer = onnx_internal::NodeWriter;

// One Scan node, parsed and checked.
struct Scan {
  std::string label;  // "Scan node 'scan_1'"
  const onnx::GraphProto* body = nullptr;
  bool batched = false;  // Scan 8
  int states = 0, scan_inputs = 0, scan_outputs = 0;
  std::vector<int64_t> in_axes, in_reverse, out_reverse;
  std::vector<std::string> inputs;   // states then scan inputs (outer names)
  std::vector<std::string> outputs;  // final states then scan outputs ("" when omitted)
};

// An ints attribute of `n` entries, zeros when absent.
StatusOr<std::vector<int64_t>> ListAttr(const NodeProto& n, const Scan& s, const std::string& name,
                                        int count) {
  for (const AttributeProto& a : n.attribute()) {
    if (a.name() != name) continue;
    if (a.ints_size() != count) {
      return InvalidFormat(s.label + ": " + name + " has " + std::to_string(a.ints_size()) +
                           " entries for " + std::to_string(count) + " values");
    }
    return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  }
  return std::vector<int64_t>(count, 0);
}

StatusOr<Scan> Parse(const NodeProto& n, const std::string& name, int64_t opset) {
  Scan s;
  s.label = "Scan node '" + name + "'";
  s.batched = opset < 9;
  int64_t m = -1;
  for (const AttributeProto& a : n.attribute()) {
    if (a.name() == "body" && a.has_g()) s.body = &a.g();
    if (a.name() == "num_scan_inputs") m = a.i();
  }
  if (!s.body) return InvalidFormat(s.label + " has no body");
  int first = s.batched ? 1 : 0;  // Scan 8's input 0 is sequence_lens
  if (s.batched && n.input_size() > 0 && !n.input(0).empty())
    return Unsupported(s.label + ": sequence_lens is not supported");
  int ins = n.input_size() - first;
  if (m < 1 || m > ins) return InvalidFormat(s.label + ": num_scan_inputs is missing or too large");
  s.scan_inputs = static_cast<int>(m);
  s.states = ins - s.scan_inputs;
  s.scan_outputs = s.body->output_size() - s.states;
  if (s.scan_outputs < 0 || s.body->input_size() != ins)
    return InvalidFormat(s.label + ": the body's inputs and outputs do not match the node's");
  s.inputs.assign(n.input().begin() + first, n.input().end());
  s.outputs.assign(n.output().begin(), n.output().end());
  s.outputs.resize(s.states + s.scan_outputs);
  if (s.batched) {
    ASSIGN_OR_RETURN(s.in_reverse, ListAttr(n, s, "directions", s.scan_inputs));
    s.in_axes.assign(s.scan_inputs, 0);
    s.out_reverse.assign(s.scan_outputs, 0);
    return s;
  }
  ASSIGN_OR_RETURN(s.in_axes, ListAttr(n, s, "scan_input_axes", s.scan_inputs));
  ASSIGN_OR_RETURN(s.in_reverse, ListAttr(n, s, "scan_input_directions", s.scan_inputs));
  ASSIGN_OR_RETURN(s.out_reverse, ListAttr(n, s, "scan_output_directions", s.scan_outputs));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_axes,
                   ListAttr(n, s, "scan_output_axes", s.scan_outputs));
  for (int64_t a : out_axes) {
    if (a != 0) return Unsupported(s.label + ": scan_output_axes other than 0 are not supported");
  }
  return s;
}

std::string True(Writer& w) {
  TensorProto yes;
  yes.set_data_type(TensorProto::BOOL);
  yes.add_int32_data(1);
  return w.Op("Constant", {}, {TensorAttr("value", std::move(yes))});
}

// The Scan 9 form over `inputs` (states then scan inputs, values of w's graph): a Loop whose
// body is s.body behind Gathers of the step's slices. Returns the final states then the scan
// outputs, in step order.
std::vector<std::string> ScanLoop(Writer& w, const Scan& s,
                                  const std::vector<std::string>& inputs) {
  const std::string& x0 = inputs[s.states];
  std::string seq =
      w.Op("Gather", {w.Op("Shape", {x0}), w.I64(s.in_axes[0])}, {IntAttr("axis", 0)});
  std::string last = w.Op("Sub", {seq, w.I64(1)});
  bool any_reverse_out = false;
  for (int64_t r : s.out_reverse) any_reverse_out = any_reverse_out || r != 0;

  Writer b = w.Sub();
  onnx::GraphProto body;
  body.set_name(w.Fresh("body"));
  std::string iter = b.Fresh("iter"), cond = b.Fresh("cond");
  body.add_input()->set_name(iter);
  body.add_input()->set_name(cond);
  for (int i = 0; i < s.states; ++i) *body.add_input() = s.body->input(i);
  std::string back = b.Op("Sub", {last, iter});
  for (int j = 0; j < s.scan_inputs; ++j) {
    std::string t = s.in_reverse[j] ? back : iter;
    std::string slice = b.Op("Gather", {inputs[s.states + j], t}, {IntAttr("axis", s.in_axes[j])});
    b.Rename(slice, s.body->input(s.states + j).name());
  }
  std::string cond_out = b.Op("Identity", {cond});
  for (NodeProto& n : b.nodes()) *body.add_node() = std::move(n);
  for (const NodeProto& n : s.body->node()) *body.add_node() = n;
  for (const onnx::TensorProto& t : s.body->initializer()) *body.add_initializer() = t;
  body.add_output()->set_name(cond_out);
  for (const onnx::ValueInfoProto& o : s.body->output()) *body.add_output() = o;
  if (any_reverse_out) body.add_output()->set_name(back);

  std::vector<std::string> ins = {seq, True(w)};
  for (int i = 0; i < s.states; ++i) ins.push_back(inputs[i]);
  int n_out = s.states + s.scan_outputs + (any_reverse_out ? 1 : 0);
  std::vector<std::string> res = w.OpN("Loop", ins, n_out, {GraphAttr("body", std::move(body))});
  // Reversed scan outputs: Gather by the stacked step indices (last - iter) puts them back.
  for (int k = 0; k < s.scan_outputs; ++k) {
    std::string& y = res[s.states + k];
    if (s.out_reverse[k]) y = w.Op("Gather", {y, res.back()}, {IntAttr("axis", 0)});
  }
  res.resize(s.states + s.scan_outputs);
  return res;
}

// Scan 8: an outer Loop over the batch dim, whose body slices batch entry `b` of every input and
// runs ScanLoop on the slices; its stacked outputs are the batched results.
std::vector<std::string> BatchLoop(Writer& w, const Scan& s) {
  std::string batch =
      w.Op("Gather", {w.Op("Shape", {s.inputs[0]}), w.I64(0)}, {IntAttr("axis", 0)});
  Writer b = w.Sub();
  onnx::GraphProto body;
  body.set_name(w.Fresh("batch_body"));
  std::string iter = b.Fresh("iter"), cond = b.Fresh("cond");
  body.add_input()->set_name(iter);
  body.add_input()->set_name(cond);
  std::vector<std::string> slices;
  for (const std::string& in : s.inputs)
    slices.push_back(b.Op("Gather", {in, iter}, {IntAttr("axis", 0)}));
  std::vector<std::string> outs = ScanLoop(b, s, slices);
  std::string cond_out = b.Op("Identity", {cond});
  for (NodeProto& n : b.nodes()) *body.add_node() = std::move(n);
  body.add_output()->set_name(cond_out);
  for (const std::string& o : outs) body.add_output()->set_name(o);
  std::vector<std::string> res = w.OpN("Loop", {batch, True(w)}, static_cast<int>(outs.size()),
                                       {GraphAttr("body", std::move(body))});
  return res;
}

bool IsScan(const NodeProto& n) {
  return (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "Scan";
}

}  // namespace

Status ExpandScanOps(onnx::GraphProto* graph, int64_t opset) {
  return onnx_internal::ExpandMatching(
      graph, IsScan,
      [opset](const NodeProto& n, const std::string& name,
              const onnx::GraphProto&) -> StatusOr<std::vector<NodeProto>> {
        ASSIGN_OR_RETURN(Scan s, Parse(n, name, opset));
        Writer w(name + "/scan/", opset, TensorProto::FLOAT, "");
        std::vector<std::string> res = s.batched ? BatchLoop(w, s) : ScanLoop(w, s, s.inputs);
        for (size_t k = 0; k < res.size(); ++k) {
          if (!s.outputs[k].empty()) w.Rename(res[k], s.outputs[k]);
        }
        return std::move(w.nodes());
      });
}

}  // namespace kiln::compiler
