"""The int8 path of the QDQ form (issue 18): DequantizeLinear -> Conv / MatMul / Gemm (-> Relu) ->
QuantizeLinear, run as one oneDNN integer op (external="onednn"), against the same graph
simulated in float by kiln's JIT (external="none") and an exact reference.

Why the outputs may differ at all: ONNX defines the graph in float. The integer path accumulates
sum((x - zx) * w) + bias exactly and multiplies once by x_scale * w_scale / y_scale; the float
simulation rounds every dequantized operand, product and partial sum to f32. Both then round half
to even, so they can only disagree by one step, and only where the exact value v (in output
steps, before rounding) lies so close to a tie (k + 0.5) that the float error crosses it. The
test checks exactly that against v computed in float64 from the integers: every element of
either path is the correctly rounded v, or one step off with |frac(v) - 0.5| below the f32
error bound of the float simulation (a dot product of K terms: (K + 4) * 2^-23 * sum |terms|).
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln


def _qdq_model(kind, x_shape, w, w_scale, bias, x_scale, x_zero, y_scale, y_zero, relu,
               conv_attrs=None, trans_b=False):
    """u8 x -> DQ -> Conv / MatMul / Gemm(DQ(w s8), DQ(bias s32)) -> Relu? -> Q -> u8 y."""
    inits = [
        numpy_helper.from_array(np.array(x_scale, np.float32), "xs"),
        numpy_helper.from_array(np.array(x_zero, np.uint8), "xz"),
        numpy_helper.from_array(w, "wq"),
        numpy_helper.from_array(w_scale.astype(np.float32), "ws"),
        numpy_helper.from_array(np.zeros(w_scale.shape, np.int8), "wz"),  # () for per tensor
        numpy_helper.from_array(np.array(y_scale, np.float32), "ys"),
        numpy_helper.from_array(np.array(y_zero, np.uint8), "yz"),
    ]
    axis = 0 if kind == "Conv" or trans_b else 1
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], axis=axis),
    ]
    ins = ["xf", "wf"]
    if bias is not None:
        bscale = (np.float32(x_scale) * w_scale.astype(np.float32)).astype(np.float32)
        if bscale.size == 1:
            bscale = np.full(bias.shape, bscale.reshape(()), np.float32)
        inits += [numpy_helper.from_array(bias, "bq"), numpy_helper.from_array(bscale, "bs")]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs"], ["bf"], axis=0))
        ins.append("bf")
    attrs = dict(conv_attrs or {})
    if kind == "Gemm":
        attrs["transB"] = int(trans_b)
    nodes.append(helper.make_node(kind, ins, ["acc"], **attrs))
    last = "acc"
    if relu:
        nodes.append(helper.make_node("Relu", ["acc"], ["r"]))
        last = "r"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model.SerializeToString()


def _conv_terms(x, w, group, stride, pad):
    """Per output element: the integer accumulator and the sum of |terms| (both as float64),
    for x [N, C, H, W] (zero point already subtracted) and w [O, C / group, kh, kw]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]  # [N, C, OH, OW, kh, kw]
    og = o // group
    acc, mag = [], []
    for g in range(group):
        xs = win[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        acc.append(np.einsum("ncyxij,ocij->noyx", xs, ws))
        mag.append(np.einsum("ncyxij,ocij->noyx", np.abs(xs), np.abs(ws)))
    return np.concatenate(acc, 1), np.concatenate(mag, 1)


def _expected(acc, mag, k, scale, y_zero, relu):
    """(exactly rounded u8 result, v in output steps, tie tolerance) from the integer terms;
    `scale` broadcasts the per-channel x_scale * w_scale / y_scale over acc."""
    v = acc * scale
    tol = (k + 4) * 2.0 ** -23 * mag * np.abs(scale) + 2.0 ** -20 * np.abs(v)
    if relu:
        v = np.maximum(v, 0.0)
    want = np.clip(np.round(v) + y_zero, 0, 255)  # np.round: half to even, as ONNX
    return want, v, tol


def _check(got, want, v, tol, what):
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max(initial=0) <= 1, "%s: off by %d" % (what, diff.max())
    off = diff == 1
    tie_distance = np.abs(np.abs(v - np.floor(v)) - 0.5)
    bad = off & (tie_distance > tol)
    assert not bad.any(), "%s: %d elements one step off away from a rounding tie (v = %s)" % (
        what, bad.sum(), v[bad][:4])
    return int(off.sum())


def _run(model, x, external):
    s = kiln.InferenceSession(model, external=external, jit_cache="off")
    return s.run(None, {"x": x})[0]


def _scales(rng, channels):
    return rng.uniform(0.002, 0.02, channels).astype(np.float32)


def _y_params(v_float, relu):
    lo, hi = (0.0 if relu else np.percentile(v_float, 2)), np.percentile(v_float, 98)
    y_scale = np.float32(max(hi - lo, 1e-3) / 255.0)
    return y_scale, int(np.clip(np.round(-lo / y_scale), 0, 255))


CONV_CASES = [
    # (x shape, out channels, kernel, group, stride, pad, bias, relu, weight range)
    ((1, 8, 10, 10), 16, 3, 1, 1, 1, True, True, 64),
    ((1, 8, 10, 10), 16, 3, 1, 1, 1, True, False, -64),  # one weight scale (per tensor)
    ((2, 16, 9, 9), 24, 1, 1, 2, 0, False, False, 64),
    ((1, 8, 7, 7), 8, 3, 2, 1, 1, True, False, 64),
    ((1, 8, 7, 7), 8, 3, 8, 1, 1, True, True, 64),  # depthwise
    # Full 8-bit weights: on a CPU without VNNI oneDNN's u8 x s8 products would saturate, so
    # the region declines and its fallback (the float simulation) runs; exact either way.
    ((1, 8, 10, 10), 16, 3, 1, 1, 1, True, True, 127),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_qconv_matches_onnx_qdq(case):
    shape, o, k, group, stride, pad, has_bias, relu, wmax = case
    per_tensor, wmax = wmax < 0, abs(wmax)
    rng = np.random.default_rng(sum(shape) + o + k + group + wmax + per_tensor)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    w = rng.integers(-wmax, wmax + 1, (o, shape[1] // group, k, k)).astype(np.int8)
    x_scale, x_zero = np.float32(0.02), 117
    w_scale = _scales(rng, 1).reshape(()) if per_tensor else _scales(rng, o)
    bias = rng.integers(-3000, 3000, o).astype(np.int32) if has_bias else None
    acc, mag = _conv_terms(x.astype(np.int64) - x_zero, w.astype(np.int64), group, stride, pad)
    if bias is not None:
        acc = acc + bias.reshape(1, o, 1, 1)
        mag = mag + np.abs(bias).reshape(1, o, 1, 1)
    ws = np.broadcast_to(w_scale.astype(np.float64), (o,)).reshape(1, o, 1, 1)
    real = acc * (np.float64(x_scale) * ws)
    y_scale, y_zero = _y_params(real, relu)
    scale = np.float64(x_scale) * ws / np.float64(y_scale)
    want, v, tol = _expected(acc, mag, w.shape[1] * k * k, scale, y_zero, relu)
    model = _qdq_model("Conv", shape, w, w_scale, bias, x_scale, x_zero, y_scale, y_zero, relu,
                       {"kernel_shape": [k, k], "strides": [stride, stride],
                        "pads": [pad] * 4, "group": group})
    for external in ("none", "onednn"):
        got = _run(model, x, external)
        assert got.dtype == np.uint8 and got.shape == want.shape
        _check(got, want, v, tol, "Conv %s external=%s" % (case, external))


MATMUL_CASES = [
    # (kind, A shape, N, bias, relu, trans_b, weight range)
    ("MatMul", (2, 5, 32), 24, False, False, False, 64),
    ("MatMul", (7, 48), 16, False, True, False, 64),
    ("Gemm", (6, 32), 24, True, False, True, 64),
    ("Gemm", (6, 40), 8, True, True, False, 64),
    ("Gemm", (6, 32), 24, True, False, True, 127),
]


@pytest.mark.parametrize("case", MATMUL_CASES)
def test_qmatmul_matches_onnx_qdq(case):
    kind, shape, n, has_bias, relu, trans_b, wmax = case
    rng = np.random.default_rng(sum(shape) + n + wmax)
    k = shape[-1]
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    wk = rng.integers(-wmax, wmax + 1, (k, n)).astype(np.int8)
    w = np.ascontiguousarray(wk.T) if trans_b else wk
    x_scale, x_zero = np.float32(0.03), 131
    w_scale = _scales(rng, n)
    bias = rng.integers(-3000, 3000, n).astype(np.int32) if has_bias else None
    xi = x.astype(np.int64) - x_zero
    acc = xi @ wk.astype(np.int64)
    mag = np.abs(xi) @ np.abs(wk.astype(np.int64))
    if bias is not None:
        acc, mag = acc + bias, mag + np.abs(bias)
    real = acc * (np.float64(x_scale) * w_scale.astype(np.float64))
    y_scale, y_zero = _y_params(real, relu)
    scale = np.float64(x_scale) * w_scale.astype(np.float64) / np.float64(y_scale)
    want, v, tol = _expected(acc, mag, k, scale, y_zero, relu)
    model = _qdq_model(kind, shape, w, w_scale, bias, x_scale, x_zero, y_scale, y_zero, relu,
                       trans_b=trans_b)
    for external in ("none", "onednn"):
        got = _run(model, x, external)
        assert got.dtype == np.uint8 and got.shape == want.shape
        _check(got, want, v, tol, "%s %s external=%s" % (kind, case, external))


def _shared_dq_model(rng):
    """One DequantizeLinear read by two Convs (ONNX Runtime's quantizer shares DQs by default):
    kiln gives each reader its own copy, so both run as integer convolutions."""
    w = rng.integers(-64, 65, (16, 8, 3, 3)).astype(np.int8)
    model = onnx.load_from_string(_qdq_model(
        "Conv", (1, 8, 10, 10), w, _scales(rng, 16), None, 0.02, 120, 0.05, 100, True,
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}))
    g = model.graph
    g.node.extend([
        helper.make_node("Conv", ["xf", "wf"], ["acc2"], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["acc2", "ys", "yz"], ["y2"]),
    ])
    g.output.append(helper.make_tensor_value_info("y2", TensorProto.UINT8, None))
    return model.SerializeToString()


def test_shared_dequantize_feeds_two_integer_ops(tmp_path):
    rng = np.random.default_rng(11)
    model = _shared_dq_model(rng)
    x = rng.integers(0, 256, (1, 8, 10, 10), dtype=np.uint8)
    for ref, got in zip(kiln.InferenceSession(model, external="none", jit_cache="off").run(
            None, {"x": x}), kiln.InferenceSession(model, jit_cache="off").run(None, {"x": x})):
        assert np.abs(ref.astype(int) - got.astype(int)).max() <= 1
    lines = _verbose_exec(model, x, tmp_path, "convolution")
    assert len(lines) == 2, lines


_VERBOSE_RUN = """
import sys, numpy as np, kiln
model = open(sys.argv[1], "rb").read()
x = np.load(sys.argv[2])
kiln.InferenceSession(model, external="onednn", jit_cache="off").run(None, {"x": x})
"""


@pytest.mark.parametrize("kind", ["Conv", "MatMul"])
def test_int8_ops_run_on_onednn_integer_primitives(kind, tmp_path):
    """With 7-bit weights the region is not declined on any CPU: oneDNN runs a u8 primitive
    that is not a reference implementation (ONEDNN_VERBOSE, in a child process)."""
    rng = np.random.default_rng(7)
    if kind == "Conv":
        shape, w = (1, 8, 10, 10), rng.integers(-64, 65, (16, 8, 3, 3)).astype(np.int8)
        model = _qdq_model("Conv", shape, w, _scales(rng, 16), None, 0.02, 120, 0.05, 100, True,
                           {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    else:
        shape, w = (4, 32), rng.integers(-64, 65, (32, 16)).astype(np.int8)
        model = _qdq_model("MatMul", shape, w, _scales(rng, 16), None, 0.02, 120, 0.05, 100, False)
    lines = _verbose_exec(model, rng.integers(0, 256, shape, dtype=np.uint8), tmp_path,
                          "convolution" if kind == "Conv" else "matmul")
    assert len(lines) == 1, lines


def _verbose_exec(model, x, tmp_path, prim):
    """The ONEDNN_VERBOSE exec lines of primitive kind `prim` when a child process runs `model`
    on x with oneDNN; each must be a u8 -> u8 primitive that is not a reference one."""
    (tmp_path / "m.onnx").write_bytes(model)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run(
        [sys.executable, "-c", _VERBOSE_RUN, str(tmp_path / "m.onnx"), str(tmp_path / "x.npy")],
        env=dict(os.environ, ONEDNN_VERBOSE="1"), capture_output=True, text=True, check=True)
    lines = [l for l in out.stdout.splitlines() if l.startswith("onednn_verbose,exec") and
             ",%s," % prim in l]
    for line in lines:
        impl = line.split(",")[4]
        assert "ref" not in impl, line
        assert "src_u8" in line and "dst_u8" in line, line
    return lines
