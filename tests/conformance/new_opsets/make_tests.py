#!/usr/bin/python3
"""Builds kiln's ONNX opset 18-21 conformance tests with reference outputs from ONNX Runtime.

libonnx-testdata 1.12 stops at opset 17, so these tests are written here: each is a folder
like the ONNX backend node tests (model.onnx, test_data_set_0/input_N.pb, output_N.pb) under
data/, and //tests/conformance:onnx_node_tests runs them all through kiln. The models are made
by hand with onnx.helper (onnx 1.12 cannot check opsets past 17, so the checker is not run);
the expected outputs are what ONNX Runtime (for Node, 1.30, which implements opset 21)
computes for the same model and inputs.

usage: /usr/bin/python3 tests/conformance/new_opsets/make_tests.py [--ort /tmp/ort]
(needs numpy, onnx and node with onnxruntime-node; rewrites data/ completely).
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
IR_VERSION = {18: 8, 19: 9, 20: 9, 21: 10}
rng = np.random.default_rng(18)

TESTS = []


def test(name, opset, nodes, inputs, outputs, initializers=(), exact=None):
    """Registers one test: nodes, {name: array} inputs, [(name, elem_type)] outputs.

    `exact`, when given, computes the outputs in float64 from the inputs (a list of arrays): they
    become the reference after a check that ONNX Runtime agrees with them to its float32
    round-off. The DFTs use it, because ORT's float32 FFT leaves up to 1e-6 on bins that are
    exactly 0 (the imaginary parts of DC and Nyquist), above the runner's atol of 1e-7."""
    TESTS.append((name, opset, nodes, inputs, outputs, list(initializers), exact))


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*values):
    return np.array(values, dtype=np.int64)


def make_model(opset, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION[opset]
    return model


def run_ort(ort_dir, model_path, inputs):
    io = {"inputs": {n: {"type": str(a.dtype), "dims": list(a.shape),
                         "data": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()}
                     for n, a in inputs.items()}}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(io, f)
    subprocess.run(["node", os.path.join(HERE, "ort_reference.js"), ort_dir, model_path, f.name],
                   check=True)
    with open(f.name) as f2:
        out = json.load(f2)["outputs"]
    os.unlink(f.name)
    return [(o["name"], np.frombuffer(base64.b64decode(o["data"]),
                                      dtype=np.bool_ if o["type"] == "bool" else o["type"])
             .reshape(o["dims"])) for o in out]


def define_tests():
    x = f32(2, 3, 4)
    for op in ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSumExp", "ReduceSumSquare"]:
        test(f"test_{op.lower()}_axes_input_18", 18,
             [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)],
             {"x": x, "axes": i64(-1, 0)}, [("y", TensorProto.FLOAT)])
    test("test_reducelogsum_axes_constant_18", 18,
         [helper.make_node("ReduceLogSum", ["x", "axes"], ["y"])],
         {"x": np.abs(x) + 0.5}, [("y", TensorProto.FLOAT)],
         [numpy_helper.from_array(i64(1), "axes")])
    test("test_reducemean_no_axes_18", 18, [helper.make_node("ReduceMean", ["x"], ["y"])],
         {"x": x}, [("y", TensorProto.FLOAT)])
    test("test_split_num_outputs_uneven_18", 18,
         [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)],
         {"x": f32(2, 7)}, [("a", TensorProto.FLOAT), ("b", TensorProto.FLOAT),
                            ("c", TensorProto.FLOAT)])
    test("test_split_num_outputs_even_18", 18,
         [helper.make_node("Split", ["x"], ["a", "b"], num_outputs=2)],
         {"x": f32(6, 2)}, [("a", TensorProto.FLOAT), ("b", TensorProto.FLOAT)])
    test("test_pad_axes_18", 18,
         [helper.make_node("Pad", ["x", "pads", "v", "axes"], ["y"])],
         {"x": x}, [("y", TensorProto.FLOAT)],
         [numpy_helper.from_array(i64(1, 2, 0, 1), "pads"),
          numpy_helper.from_array(np.array(1.5, np.float32), "v"),
          numpy_helper.from_array(i64(-1, 1), "axes")])
    test("test_pad_wrap_19", 19,
         [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
         {"x": x}, [("y", TensorProto.FLOAT)],
         [numpy_helper.from_array(i64(0, 2, 3, 1, 1, 2), "pads")])
    data = f32(4, 5)
    idx = np.array([[0, 1, 2, 3, 0], [2, 2, 0, 1, 3]], np.int64)
    for red in ["max", "min"]:
        test(f"test_scatterelements_{red}_18", 18,
             [helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0, reduction=red)],
             {"d": data, "i": idx, "u": f32(2, 5)}, [("y", TensorProto.FLOAT)])
        test(f"test_scatternd_{red}_18", 18,
             [helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=red)],
             {"d": data, "i": np.array([[1], [3], [1]], np.int64), "u": f32(3, 5)},
             [("y", TensorProto.FLOAT)])
    for dt, tp in [(np.int32, TensorProto.INT32), (np.uint8, TensorProto.UINT8),
                   (np.int64, TensorProto.INT64), (np.int8, TensorProto.INT8)]:
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, (3, 4), dtype=dt, endpoint=True)
        b = rng.integers(info.min, info.max, (4,), dtype=dt, endpoint=True)
        for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
            test(f"test_{op.lower()}_{np.dtype(dt).name}_18", 18,
                 [helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, [("y", tp)])
        test(f"test_bitwisenot_{np.dtype(dt).name}_18", 18,
             [helper.make_node("BitwiseNot", ["a"], ["y"])], {"a": a}, [("y", tp)])
    xg = f32(2, 4, 3, 3)
    test("test_groupnormalization_18", 18,
         [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                           epsilon=1e-3)],
         {"x": xg, "s": f32(2), "b": f32(2)}, [("y", TensorProto.FLOAT)])
    test("test_groupnormalization_21", 21,
         [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
         {"x": xg, "s": f32(4), "b": f32(4)}, [("y", TensorProto.FLOAT)])
    test("test_mish_18", 18, [helper.make_node("Mish", ["x"], ["y"])], {"x": x * 3},
         [("y", TensorProto.FLOAT)])
    test("test_gelu_20", 20, [helper.make_node("Gelu", ["x"], ["y"])], {"x": x * 3},
         [("y", TensorProto.FLOAT)])
    test("test_gelu_tanh_20", 20, [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
         {"x": (x * 3).astype(np.float64)}, [("y", TensorProto.DOUBLE)])
    test("test_centercroppad_crop_and_pad_18", 18,
         [helper.make_node("CenterCropPad", ["x", "s"], ["y"])],
         {"x": f32(5, 4, 3), "s": i64(2, 7, 3)}, [("y", TensorProto.FLOAT)])
    test("test_centercroppad_axes_18", 18,
         [helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[-1, 0])],
         {"x": f32(5, 4, 6), "s": i64(3, 8)}, [("y", TensorProto.FLOAT)])
    test("test_resize_half_pixel_symmetric_19", 19,
         [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                           coordinate_transformation_mode="half_pixel_symmetric")],
         {"x": f32(1, 1, 4, 4)}, [("y", TensorProto.FLOAT)],
         [numpy_helper.from_array(np.array([1, 1, 1.5, 0.75], np.float32), "scales")])
    test("test_averagepool_dilations_19", 19,
         [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 1],
                           pads=[1, 0, 1, 1])],
         {"x": f32(1, 2, 5, 5)}, [("y", TensorProto.FLOAT)])
    test("test_lppool_ceil_mode_18", 18,
         [helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2], strides=[2], ceil_mode=1)],
         {"x": f32(1, 2, 5)}, [("y", TensorProto.FLOAT)])
    test("test_ordinary_ops_21", 21,
         [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
          helper.make_node("Relu", ["t"], ["r"]),
          helper.make_node("Reshape", ["r", "shape"], ["y"]),
          helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT16)],
         {"x": x}, [("y", TensorProto.FLOAT), ("z", TensorProto.FLOAT16)],
         [numpy_helper.from_array(i64(4, -1), "shape")])
    test("test_nllloss_function_21", 21,
         [helper.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"],
                           reduction="mean", ignore_index=1)],
         {"x": f32(3, 5, 2), "t": np.array([[0, 1], [4, 2], [1, 3]], np.int64), "w": f32(5)},
         [("y", TensorProto.FLOAT)])
    define_sampling_and_signal_tests()
    define_resize_and_col2im_tests()


def complex_pairs(c):
    """A complex array as ONNX's [..., 2] (real, imaginary) layout."""
    return np.stack([c.real, c.imag], axis=-1)


def define_sampling_and_signal_tests():
    """GridSample, RoiAlign, MaxUnpool, Det, DFT/STFT, MelWeightMatrix, TfIdfVectorizer, Scan
    and Reduce* with noop_with_empty_axes and no axes: the attribute combinations the ONNX
    node tests of libonnx 1.12 leave out, at the opsets that define them last."""
    img = f32(2, 3, 4, 5)
    grid = (rng.uniform(-1.3, 1.3, (2, 3, 6, 2))).astype(np.float32)
    for mode in ["linear", "nearest", "cubic"]:
        for pad in ["zeros", "border", "reflection"]:
            for align in [0, 1]:
                test(f"test_gridsample_{mode}_{pad}_align{align}_20", 20,
                     [helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode,
                                       padding_mode=pad, align_corners=align)],
                     {"x": img, "g": grid}, [("y", TensorProto.FLOAT)])
    feat = f32(2, 2, 9, 11)
    rois = np.array([[0.5, 1.0, 7.3, 6.2], [2.2, 0.1, 9.9, 8.7], [-1.5, -0.5, 3.0, 12.0]],
                    np.float32)
    for mode, coord, ratio in [("max", "half_pixel", 0), ("avg", "half_pixel", 0),
                               ("avg", "output_half_pixel", 3)]:
        test(f"test_roialign_{mode}_{coord}_ratio{ratio}_18", 18,
             [helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode=mode,
                               coordinate_transformation_mode=coord, output_height=3,
                               output_width=4, sampling_ratio=ratio, spatial_scale=0.8)],
             {"x": feat, "rois": rois, "b": i64(1, 0, 1)}, [("y", TensorProto.FLOAT)])
    pool = dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])
    test("test_maxunpool_pads_from_maxpool_18", 18,
         [helper.make_node("MaxPool", ["x"], ["p", "i"], **pool),
          helper.make_node("MaxUnpool", ["p", "i"], ["y"], **pool)],
         {"x": f32(2, 3, 7, 5)}, [("y", TensorProto.FLOAT)])
    test("test_maxunpool_output_shape_from_maxpool_18", 18,
         [helper.make_node("MaxPool", ["x"], ["p", "i"], **pool),
          helper.make_node("Shape", ["x"], ["s"]),
          helper.make_node("MaxUnpool", ["p", "i", "s"], ["y"], **pool)],
         {"x": f32(2, 3, 7, 6)}, [("y", TensorProto.FLOAT)])
    mats = f32(3, 4, 4)
    mats[1, 2] = mats[1, 0] * 2  # singular
    test("test_det_batch_18", 18, [helper.make_node("Det", ["x"], ["y"])], {"x": mats},
         [("y", TensorProto.FLOAT)])
    sig = f32(2, 12, 3, 1)
    test("test_dft_onesided_length_axis_20", 20,
         [helper.make_node("DFT", ["x", "n", "a"], ["y"], onesided=1)],
         {"x": sig}, [("y", TensorProto.FLOAT)],
         [numpy_helper.from_array(np.array(9, np.int64), "n"),
          numpy_helper.from_array(np.array(-3, np.int64), "a")],
         exact=lambda ins: [complex_pairs(np.fft.rfft(ins[0][..., 0].astype(np.float64), 9,
                                                      axis=1))])
    test("test_dft_inverse_padded_18", 18,
         [helper.make_node("DFT", ["x", "n"], ["y"], axis=2, inverse=1)],
         {"x": f32(2, 3, 5, 2)}, [("y", TensorProto.FLOAT)],
         [numpy_helper.from_array(np.array(7, np.int64), "n")])
    test("test_stft_twosided_window_and_length_18", 18,
         [helper.make_node("STFT", ["x", "step", "w", "n"], ["y"], onesided=0)],
         {"x": f32(2, 40, 1), "w": f32(10)}, [("y", TensorProto.FLOAT)],
         [numpy_helper.from_array(np.array(6, np.int64), "step"),
          numpy_helper.from_array(np.array(10, np.int64), "n")],
         exact=lambda ins: [complex_pairs(np.stack(
             [np.fft.fft(ins[0][:, f * 6:f * 6 + 10, 0].astype(np.float64) * ins[1], axis=-1)
              for f in range(6)], axis=1))])
    test("test_melweightmatrix_18", 18,
         [helper.make_node("MelWeightMatrix", ["m", "n", "r", "lo", "hi"], ["y"])],
         {"m": np.array(10, np.int64), "n": np.array(64, np.int64),
          "r": np.array(16000, np.int64), "lo": np.array(20, np.float32),
          "hi": np.array(7000, np.float32)}, [("y", TensorProto.FLOAT)])
    words = rng.integers(0, 6, (3, 14)).astype(np.int64)
    for mode in ["TF", "IDF", "TFIDF"]:
        test(f"test_tfidfvectorizer_{mode.lower()}_weights_18", 18,
             [helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=1,
                               max_gram_length=3, max_skip_count=2, ngram_counts=[0, 3, 11],
                               ngram_indexes=[5, 0, 2, 1, 3, 6, 4, 8, 7],
                               pool_int64s=[1, 3, 5, 1, 2, 3, 3, 0, 4, 2, 2, 1, 3, 4, 2, 5, 0],
                               weights=[0.5, 1.5, 2.0, 0.25, 1.0, 3.0, 0.75, 1.25, 2.5])],
             {"x": words}, [("y", TensorProto.FLOAT)])
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "v"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "v"], ["o"])], "scan_body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("o", TensorProto.FLOAT, [3])])
    test("test_scan_reverse_axis1_18", 18,
         [helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                           scan_input_axes=[1], scan_input_directions=[1],
                           scan_output_directions=[1])],
         {"s0": f32(3), "x": f32(3, 5)}, [("s", TensorProto.FLOAT), ("ys", TensorProto.FLOAT)])
    for op in ["ReduceSum", "ReduceMax", "ReduceL1", "ReduceL2", "ReduceSumSquare",
               "ReduceLogSumExp"]:
        test(f"test_{op.lower()}_noop_no_axes_18", 18,
             [helper.make_node(op, ["x"], ["y"], noop_with_empty_axes=1, keepdims=0)],
             {"x": img}, [("y", TensorProto.FLOAT)])


def resize(name, opset, x, attrs, scales=None, sizes=None, roi=None, runtime=False):
    """One Resize test: scales or sizes (and roi) as initializers, or as graph inputs."""
    ins = ["x", "roi" if roi is not None else "", "scales" if scales is not None else "",
           "sizes" if sizes is not None else ""]
    while ins[-1] == "":
        ins.pop()
    given = {"roi": roi, "scales": None if scales is None else np.array(scales, np.float32),
             "sizes": None if sizes is None else i64(*sizes)}
    inputs, inits = {"x": x}, []
    for n, v in given.items():
        if v is None:
            continue
        if runtime:
            inputs[n] = v
        else:
            inits.append(numpy_helper.from_array(v, n))
    test(name, opset, [helper.make_node("Resize", ins, ["y"], **attrs)], inputs,
         [("y", TensorProto.FLOAT)], inits)


def define_resize_and_col2im_tests():
    """Resize's opset 18/19 attributes (antialias when downscaling, axes,
    keep_aspect_ratio_policy) over modes, down and up scaling and odd sizes; Col2Im in 2-D and
    3-D with strides, pads and dilations, and with image_shape known only at run time."""
    lin_aa = dict(mode="linear", antialias=1)
    cub_aa = dict(mode="cubic", antialias=1)
    resize("test_resize_antialias_linear_down_18", 18, f32(1, 2, 9, 11), lin_aa,
           scales=[1, 1, 0.5, 0.6])
    resize("test_resize_antialias_cubic_down_18", 18, f32(1, 1, 10, 7), cub_aa,
           scales=[1, 1, 0.3, 0.75])
    resize("test_resize_antialias_linear_down_up_sizes_18", 18, f32(2, 3, 7, 8),
           dict(lin_aa, coordinate_transformation_mode="pytorch_half_pixel"),
           sizes=[2, 3, 3, 13])
    resize("test_resize_antialias_cubic_exclude_outside_18", 18, f32(1, 1, 8, 8),
           dict(cub_aa, exclude_outside=1, cubic_coeff_a=-0.5), scales=[1, 1, 0.4, 0.55])
    resize("test_resize_antialias_linear_exclude_outside_asymmetric_18", 18, f32(1, 2, 9, 7),
           dict(lin_aa, exclude_outside=1, coordinate_transformation_mode="asymmetric"),
           scales=[1, 1, 0.35, 0.7])
    resize("test_resize_antialias_linear_3d_18", 18, f32(3, 12, 10), lin_aa,
           scales=[1, 0.25, 0.65])
    resize("test_resize_antialias_cubic_nhwc_axes_18", 18, f32(1, 9, 10, 3),
           dict(cub_aa, axes=[1, 2]), scales=[0.45, 0.6])
    resize("test_resize_antialias_linear_runtime_scales_18", 18, f32(1, 2, 11, 9), lin_aa,
           scales=[1, 1, 0.4, 0.75], runtime=True)
    resize("test_resize_axes_linear_scales_18", 18, f32(2, 3, 5, 6),
           dict(mode="linear", axes=[2, 3]), scales=[1.5, 0.5])
    resize("test_resize_axes_negative_nearest_sizes_18", 18, f32(1, 4, 5, 6),
           dict(mode="nearest", axes=[-1, 2]), sizes=[9, 3])
    resize("test_resize_axes_crop_and_resize_18", 18, f32(1, 1, 6, 7),
           dict(mode="linear", axes=[3, 2], coordinate_transformation_mode="tf_crop_and_resize",
                extrapolation_value=2.5),
           sizes=[5, 4], roi=np.array([0.1, -0.2, 0.9, 0.8], np.float32))
    resize("test_resize_axes_cubic_runtime_sizes_19", 19, f32(1, 1, 5, 6),
           dict(mode="cubic", axes=[2, 3], coordinate_transformation_mode="half_pixel_symmetric"),
           sizes=[8, 4], runtime=True)
    resize("test_resize_not_larger_linear_18", 18, f32(1, 2, 6, 9),
           dict(mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_larger"), sizes=[4, 4])
    resize("test_resize_not_smaller_nearest_18", 18, f32(1, 1, 5, 8),
           dict(mode="nearest", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"),
           sizes=[7, 7])
    resize("test_resize_not_larger_cubic_up_18", 18, f32(1, 1, 4, 6),
           dict(mode="cubic", axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
           sizes=[10, 9])
    resize("test_resize_not_larger_2d_all_axes_18", 18, f32(6, 9),
           dict(mode="linear", keep_aspect_ratio_policy="not_larger"), sizes=[4, 4])
    resize("test_resize_not_smaller_antialias_18", 18, f32(1, 3, 10, 12),
           dict(lin_aa, axes=[2, 3], keep_aspect_ratio_policy="not_smaller"), sizes=[4, 6])
    resize("test_resize_not_smaller_runtime_sizes_18", 18, f32(1, 2, 7, 5),
           dict(mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"),
           sizes=[3, 3], runtime=True)

    def col2im(name, x, image, block, runtime_image=False, **attrs):
        inputs, inits = {"x": x}, [numpy_helper.from_array(i64(*block), "block")]
        if runtime_image:
            inputs["image"] = i64(*image)
        else:
            inits.append(numpy_helper.from_array(i64(*image), "image"))
        test(name, 18, [helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)],
             inputs, [("y", TensorProto.FLOAT)], inits)

    col2im("test_col2im_basic_18", f32(1, 5, 5), [5, 5], [1, 5])
    col2im("test_col2im_overlapping_18", f32(2, 27, 6), [4, 5], [3, 3])
    col2im("test_col2im_strides_pads_dilations_18", f32(2, 12, 9), [6, 7], [2, 3],
           dilations=[2, 1], pads=[1, 0, 1, 2], strides=[2, 3])
    col2im("test_col2im_3d_18", f32(1, 8, 24), [3, 4, 5], [2, 2, 2])
    col2im("test_col2im_runtime_image_shape_18", f32(2, 12, 8), [5, 6], [2, 3],
           runtime_image=True, strides=[2, 1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ort", default="/tmp/ort", help="folder holding node_modules/onnxruntime-node")
    args = parser.parse_args()
    define_tests()
    out_dir = os.path.join(HERE, "data")
    shutil.rmtree(out_dir, ignore_errors=True)
    for name, opset, nodes, inputs, outputs, inits, exact in TESTS:
        d = os.path.join(out_dir, name)
        os.makedirs(os.path.join(d, "test_data_set_0"))
        model_path = os.path.join(d, "model.onnx")
        onnx.save(make_model(opset, nodes, inputs, outputs, inits), model_path)
        for k, (n, a) in enumerate(inputs.items()):
            onnx.save_tensor(numpy_helper.from_array(a, n),
                             os.path.join(d, "test_data_set_0", f"input_{k}.pb"))
        results = run_ort(args.ort, model_path, inputs)
        if exact is not None:
            want = exact(list(inputs.values()))
            for (n, a), w in zip(results, want):
                assert np.allclose(a, w, rtol=1e-4, atol=1e-5), name + ": ORT disagrees"
            results = [(n, w.astype(a.dtype)) for (n, a), w in zip(results, want)]
        for k, (n, a) in enumerate(results):
            onnx.save_tensor(numpy_helper.from_array(a, n),
                             os.path.join(d, "test_data_set_0", f"output_{k}.pb"))
        print("wrote", name)


if __name__ == "__main__":
    main()
