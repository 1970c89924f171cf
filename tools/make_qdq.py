#!/usr/bin/python3
"""Static int8 quantization of an f32 ONNX model into the QDQ form (issue 18).

    PYTHONPATH=bazel-bin/python /usr/bin/python3 tools/make_qdq.py MODEL.onnx OUT.onnx \
        [--samples 8] [--dim batch=1 --dim seq=32] [--check INPUT.npy] [--ort DIR]

What it writes, following ONNX Runtime's default QDQ format (quantize_static, QuantFormat.QDQ):
  - weights of Conv, MatMul and Gemm (initializers) as int8, symmetric, per output channel, read
    through DequantizeLinear (axis = the output channel: 0 for Conv and Gemm with transB, 1 for
    MatMul and Gemm without);
  - their biases as int32 in units of input_scale * weight_scale[c] (zero point 0), also through
    DequantizeLinear, so an integer kernel adds them to its accumulator exactly;
  - every activation such an op reads, and its result (after a Relu that is its only reader),
    as uint8 with a scale and zero point from its min / max over calibration runs on random
    inputs (QuantizeLinear -> DequantizeLinear), one DequantizeLinear per reader (ORT's
    DedicatedQDQPair) so a runtime can fuse each reader with its own DequantizeLinear. Graph
    outputs stay f32.
Weights use 7 bits (-63..63, ORT's reduce_range) by default: CPUs without VNNI multiply
u8 x s8 with vpmaddubsw, whose int16 pair sums saturate at full 8-bit range (255 * 127 * 2 >
32767); ORT's MLAS and oneDNN both recommend it there. --full-range uses -127..127.

Calibration runs the f32 model with kiln (`import kiln`, bazel build //python:kiln): every
tensor to quantize becomes an extra output. Float inputs are standard normal, integer inputs
(token ids) uniform in [0, --int-high). --check runs the f32 and the QDQ model on a real input
with kiln and prints the largest difference of the first output; --ort also runs the QDQ model
in ONNX Runtime (onnxruntime-node, through tests/zoo/ort_run.js) and compares it.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QUANT_OPS = ("Conv", "MatMul", "Gemm")


def weight_axis(node):
    """The output-channel axis of node's weight (input 1), or None if it is not quantizable."""
    if node.op_type == "Conv":
        return 0
    if node.op_type == "MatMul":
        return 1
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("transA", 0) != 0:
        return None
    return 0 if attrs.get("transB", 0) else 1


def plan(model):
    """(quantized nodes, activation tensors to quantize) for model's main graph."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    outputs = {o.name for o in g.output}
    users = {}
    for n in g.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    nodes, acts = [], []
    for n in g.node:
        if n.op_type not in QUANT_OPS or len(n.input) < 2 or n.input[1] not in inits:
            continue
        if weight_axis(n) is None or n.input[0] in inits or len(inits[n.input[1]].dims) < 2:
            continue
        nodes.append(n)
        end = n.output[0]
        readers = users.get(end, [])
        if len(readers) == 1 and readers[0].op_type == "Relu" and end not in outputs:
            end = readers[0].output[0]
        for t in (n.input[0], end):
            if t not in outputs and t not in acts:
                acts.append(t)
    return nodes, acts


def random_feed(model, dims, int_high, rng):
    inits = {i.name for i in model.graph.initializer}
    feed = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        shape = [d.dim_value if d.dim_value else dims[d.dim_param] for d in tt.shape.dim]
        if tt.elem_type == TensorProto.FLOAT:
            feed[i.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[tt.elem_type]
            feed[i.name] = rng.integers(0, int_high, size=shape).astype(dtype)
    return feed


def calibrate(model, acts, args):
    """{tensor: (min, max)} over args.samples runs of the f32 model in kiln."""
    import kiln  # the repo's package: PYTHONPATH=bazel-bin/python

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    for t in acts:
        if t not in have:
            probe.graph.output.append(helper.make_empty_tensor_value_info(t))
    session = kiln.InferenceSession(probe.SerializeToString(), external="none", dims=args.dims)
    names = [o.name for o in probe.graph.output]
    rng = np.random.default_rng(args.seed)
    ranges = {}
    for _ in range(args.samples):
        values = session.run(names, random_feed(model, args.dims, args.int_high, rng))
        for name, v in zip(names, values):
            lo, hi = float(v.min()), float(v.max())
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(lo, old[0]), max(hi, old[1]))
    return {t: ranges[t] for t in acts}


def u8_params(lo, hi):
    """uint8 scale and zero point covering [min(lo, 0), max(hi, 0)] (0 exactly representable)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zero = int(np.clip(np.round(-lo / scale), 0, 255))
    return scale, zero


class Writer:
    """Adds initializers and Q / DQ nodes to `graph` under unique names."""

    def __init__(self, graph):
        self.graph = graph
        self.new_nodes = []

    def init(self, name, array):
        self.graph.initializer.append(numpy_helper.from_array(array, name))
        return name

    def dq(self, x, scale, zero, out, axis=None):
        ins = [x, scale] + ([zero] if zero else [])
        kw = {} if axis is None else {"axis": axis}
        self.new_nodes.append(helper.make_node("DequantizeLinear", ins, [out], name=out, **kw))


def quantize_weights(w, node, model, x_scale, reduce_range):
    """Replaces node's weight (and bias) initializers with int8 (int32) ones read through DQ."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    axis = weight_axis(node)
    wf = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
    qmax = 63 if reduce_range else 127
    other = tuple(i for i in range(wf.ndim) if i != axis)
    amax = np.abs(wf).max(axis=other)
    scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
    shape = [1] * wf.ndim
    shape[axis] = -1
    wq = np.clip(np.round(wf / scale.reshape(shape)), -qmax, qmax).astype(np.int8)
    base = node.input[1]
    w.init(base + "_quantized", wq)
    w.init(base + "_scale", scale)
    w.init(base + "_zero_point", np.zeros(scale.shape, np.int8))
    w.dq(base + "_quantized", base + "_scale", base + "_zero_point", base + "_dq", axis)
    node.input[1] = base + "_dq"
    if len(node.input) > 2 and node.input[2] in inits:
        b = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32)
        if b.ndim == 1 and b.shape[0] == scale.shape[0]:
            bscale = (np.float32(x_scale) * scale).astype(np.float32)
            bq = np.round(b / bscale).astype(np.int32)
            bname = node.input[2]
            w.init(bname + "_quantized", bq)
            w.init(bname + "_scale", bscale)
            w.dq(bname + "_quantized", bname + "_scale", None, bname + "_dq", 0)
            node.input[2] = bname + "_dq"


def inline_identities(graph):
    """Identity(initializer) -> an initializer of its own (torch's exporter shares equal weights
    through Identity nodes), so each weight can be quantized where it is read."""
    inits = {i.name: i for i in graph.initializer}
    kept = []
    for n in graph.node:
        if n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in {
                o.name for o in graph.output}:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[n.input[0]])
            copy.name = n.output[0]
            graph.initializer.append(copy)
            inits[copy.name] = copy
        else:
            kept.append(n)
    del graph.node[:]
    graph.node.extend(kept)


def quantize(model, args):
    inline_identities(model.graph)
    nodes, acts = plan(model)
    ranges = calibrate(model, acts, args)
    g = model.graph
    w = Writer(g)
    params = {t: u8_params(*ranges[t]) for t in acts}
    for node in nodes:
        quantize_weights(w, node, model, params[node.input[0]][0], not args.full_range)
    for t in acts:
        scale, zero = params[t]
        s = w.init(t + "_scale", np.array(scale, np.float32))
        z = w.init(t + "_zero_point", np.array(zero, np.uint8))
        w.new_nodes.append(helper.make_node("QuantizeLinear", [t, s, z], [t + "_q"], name=t + "_q"))
        k = 0
        for n in list(g.node):
            for i, name in enumerate(n.input):
                if name == t:
                    out = "%s_dq%d" % (t, k)
                    k += 1
                    w.dq(t + "_q", s, z, out)
                    n.input[i] = out
    read = {i for n in list(g.node) + w.new_nodes for i in n.input}
    keep = [i for i in g.initializer if i.name in read or i.name in {x.name for x in g.input}]
    del g.initializer[:]
    g.initializer.extend(keep)
    ordered = topo_sort(list(g.node) + w.new_nodes, g)
    del g.node[:]
    g.node.extend(ordered)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 13 for o in model.opset_import):
        sys.exit("make_qdq: per-channel DequantizeLinear needs ai.onnx opset >= 13")
    onnx.checker.check_model(model)
    return len(nodes), len(acts)


def topo_sort(nodes, graph):
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    out, pending = [], list(nodes)
    while pending:
        rest = []
        for n in pending:
            if all(i in ready for i in n.input):
                out.append(n)
                ready.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            sys.exit("make_qdq: graph has a cycle or a missing input: " + rest[0].name)
        pending = rest
    return out


def check(f32_path, qdq_path, args):
    import kiln

    x = np.load(args.check)
    f32 = kiln.InferenceSession(f32_path, external="none")
    name = f32.get_inputs()[0].name
    ref = f32.run(None, {name: x})[0]
    for external in ("none", "onednn"):
        got = kiln.InferenceSession(qdq_path, external=external).run(None, {name: x})[0]
        print("qdq (kiln, external=%s) vs f32: max |diff| %.4g (max |f32| %.4g), argmax agree %s"
              % (external, np.abs(got - ref).max(), np.abs(ref).max(),
                 np.array_equal(got.reshape(-1, got.shape[-1]).argmax(-1),
                                ref.reshape(-1, ref.shape[-1]).argmax(-1))))
    if args.ort:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ort.npy")
            js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/zoo/ort_run.js")
            env = dict(os.environ, ORT_NODE=os.path.join(args.ort, "onnxruntime-node"))
            subprocess.run(["node", js, qdq_path, name, args.check, out], check=True, env=env)
            ort = np.load(out)
            print("qdq (ORT) vs f32: max |diff| %.4g; qdq kiln vs ORT: max |diff| %.4g"
                  % (np.abs(ort - ref).max(), np.abs(ort - got).max()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--samples", type=int, default=8, help="calibration runs")
    p.add_argument("--dim", action="append", default=[], help="symbol=size for calibration")
    p.add_argument("--int-high", type=int, default=1000, help="integer inputs in [0, this)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--full-range", action="store_true", help="8-bit weights (VNNI hosts)")
    p.add_argument("--check", help="an input .npy to compare f32 and QDQ outputs on")
    p.add_argument("--ort", help="node_modules dir holding onnxruntime-node (with --check)")
    args = p.parse_args()
    args.dims = {k: int(v) for k, v in (d.split("=") for d in args.dim)}
    for i in onnx.load(args.model).graph.input:
        for d in i.type.tensor_type.shape.dim:
            if d.dim_param and d.dim_param not in args.dims:
                args.dims[d.dim_param] = 1 if d.dim_param == "batch" else 32
    model = onnx.load(args.model)
    nodes, acts = quantize(model, args)
    onnx.save(model, args.out)
    print("%s: %d ops with int8 weights, %d activations quantized -> %s"
          % (args.model, nodes, acts, args.out))
    if args.check:
        check(args.model, args.out, args)


if __name__ == "__main__":
    main()
