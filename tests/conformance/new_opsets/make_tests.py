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


def test(name, opset, nodes, inputs, outputs, initializers=()):
    """Registers one test: nodes, {name: array} inputs, [(name, elem_type)] outputs."""
    TESTS.append((name, opset, nodes, inputs, outputs, list(initializers)))


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ort", default="/tmp/ort", help="folder holding node_modules/onnxruntime-node")
    args = parser.parse_args()
    define_tests()
    out_dir = os.path.join(HERE, "data")
    shutil.rmtree(out_dir, ignore_errors=True)
    for name, opset, nodes, inputs, outputs, inits in TESTS:
        d = os.path.join(out_dir, name)
        os.makedirs(os.path.join(d, "test_data_set_0"))
        model_path = os.path.join(d, "model.onnx")
        onnx.save(make_model(opset, nodes, inputs, outputs, inits), model_path)
        for k, (n, a) in enumerate(inputs.items()):
            onnx.save_tensor(numpy_helper.from_array(a, n),
                             os.path.join(d, "test_data_set_0", f"input_{k}.pb"))
        for k, (n, a) in enumerate(run_ort(args.ort, model_path, inputs)):
            onnx.save_tensor(numpy_helper.from_array(a, n),
                             os.path.join(d, "test_data_set_0", f"output_{k}.pb"))
        print("wrote", name)


if __name__ == "__main__":
    main()
