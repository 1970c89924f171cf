"""Small ONNX models built in the test (onnx.helper, fixed seeds) and their numpy references,
beside the examples' demo models (examples/python/demo_models.py: ConvNet, Encoder)."""
import numpy as np
from onnx import TensorProto, helper

from demo_models import ConvNet, Encoder, constant, make_model, relu, softmax  # noqa: F401


class Mlp:
    """x: f32[batch, 16] -> relu(x @ w1 + b1) @ w2 + b2 -> logits f32[batch, 4], probs (softmax)."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.w1 = rng.standard_normal((16, 32)).astype(np.float32) * 0.3
        self.b1 = rng.standard_normal(32).astype(np.float32) * 0.1
        self.w2 = rng.standard_normal((32, 4)).astype(np.float32) * 0.3
        self.b2 = rng.standard_normal(4).astype(np.float32) * 0.1
        self.onnx = make_model(
            [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
             helper.make_node("Add", ["h3", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4]),
             helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
            [constant("w1", self.w1), constant("b1", self.b1), constant("w2", self.w2),
             constant("b2", self.b2)])

    def reference(self, x):
        x = x.astype(np.float64)
        logits = relu(x @ self.w1 + self.b1) @ self.w2 + self.b2
        return [logits, softmax(logits)]


class Flatten:
    """x f32[batch, 3, 4] -> Reshape to [batch, 12]: kiln returns a view of the input."""

    def __init__(self):
        self.onnx = make_model(
            [helper.make_node("Reshape", ["x", "shape"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 12])],
            [constant("shape", np.array([0, 12], np.int64))])

    def reference(self, x):
        return [x.reshape(x.shape[0], 12).astype(np.float64)]


class MatMulChain:
    """x f32[256, 256] -> 8 chained products with a 256x256 weight: ~0.27 GFLOP, long enough
    per run that a 1 ms deadline always passes inside it."""

    def __init__(self, seed=3, depth=8):
        rng = np.random.default_rng(seed)
        self.w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
        names = ["x"] + [f"h{i}" for i in range(depth - 1)] + ["y"]
        self.onnx = make_model(
            [helper.make_node("MatMul", [names[i], "w"], [names[i + 1]]) for i in range(depth)],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 256])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])],
            [constant("w", self.w)])
