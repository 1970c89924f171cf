"""Small ONNX models built in the test (onnx.helper, fixed seeds) and their numpy references."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def _model(nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-python-tests")
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _const(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def relu(x):
    return np.maximum(x, 0)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class Mlp:
    """x: f32[batch, 16] -> relu(x @ w1 + b1) @ w2 + b2 -> logits f32[batch, 4], probs (softmax)."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.w1 = rng.standard_normal((16, 32)).astype(np.float32) * 0.3
        self.b1 = rng.standard_normal(32).astype(np.float32) * 0.1
        self.w2 = rng.standard_normal((32, 4)).astype(np.float32) * 0.3
        self.b2 = rng.standard_normal(4).astype(np.float32) * 0.1
        self.onnx = _model(
            [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
             helper.make_node("Add", ["h3", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4]),
             helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
            [_const("w1", self.w1), _const("b1", self.b1), _const("w2", self.w2),
             _const("b2", self.b2)])

    def reference(self, x):
        x = x.astype(np.float64)
        logits = relu(x @ self.w1 + self.b1) @ self.w2 + self.b2
        return [logits, softmax(logits)]


class ConvNet:
    """A resnet-like image classifier: image f32[batch, 3, 8, 8] -> Conv 3x3 (8 channels, pad 1)
    -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> scores f32[batch, 5]. oneDNN claims the
    convolution region by default."""

    def __init__(self, seed=1):
        rng = np.random.default_rng(seed)
        self.w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
        self.b = rng.standard_normal(8).astype(np.float32) * 0.1
        self.fc = rng.standard_normal((8, 5)).astype(np.float32) * 0.3
        self.fc_b = rng.standard_normal(5).astype(np.float32) * 0.1
        self.onnx = _model(
            [helper.make_node("Conv", ["image", "w", "b"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fc_b"], ["scores"])],
            [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 8, 8])],
            [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 5])],
            [_const("w", self.w), _const("b", self.b), _const("fc", self.fc),
             _const("fc_b", self.fc_b)])

    def reference(self, image):
        x = np.pad(image.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        n, _, h, w = image.shape
        conv = np.zeros((n, 8, h, w))
        for dy in range(3):
            for dx in range(3):
                patch = x[:, :, dy:dy + h, dx:dx + w]
                conv += np.einsum("nchw,oc->nohw", patch, self.w[:, :, dy, dx])
        conv += self.b[None, :, None, None]
        pooled = relu(conv).mean(axis=(2, 3))
        return [pooled @ self.fc + self.fc_b]


class Encoder:
    """A BERT-like feed-forward block with a dynamic sequence: x f32[batch, seq, hidden=128] ->
    LayerNorm(x + relu(x @ w1) @ w2) -> y (same shape). Big enough (w1: 128x512) that a run
    is real work for the GIL test (seq 128: ~34 MFLOP)."""

    def __init__(self, seed=2, hidden=128, ffn=512):
        rng = np.random.default_rng(seed)
        self.hidden = hidden
        self.w1 = rng.standard_normal((hidden, ffn)).astype(np.float32) / np.sqrt(hidden)
        self.w2 = rng.standard_normal((ffn, hidden)).astype(np.float32) / np.sqrt(ffn)
        self.gamma = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        self.beta = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
        self.onnx = _model(
            [helper.make_node("MatMul", ["x", "w1"], ["a"]),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("MatMul", ["ar", "w2"], ["b"]),
             helper.make_node("Add", ["x", "b"], ["s"]),
             helper.make_node("ReduceMean", ["s"], ["mean"], axes=[-1]),
             helper.make_node("Sub", ["s", "mean"], ["d"]),
             helper.make_node("Mul", ["d", "d"], ["d2"]),
             helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n"]),
             helper.make_node("Mul", ["n", "gamma"], ["g"]),
             helper.make_node("Add", ["g", "beta"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])],
            [_const("w1", self.w1), _const("w2", self.w2), _const("gamma", self.gamma),
             _const("beta", self.beta), _const("eps", np.array(1e-5, np.float32))])

    def reference(self, x):
        x = x.astype(np.float64)
        s = x + relu(x @ self.w1) @ self.w2
        d = s - s.mean(axis=-1, keepdims=True)
        return [d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * self.gamma + self.beta]


class Flatten:
    """x f32[batch, 3, 4] -> Reshape to [batch, 12]: kiln returns a view of the input."""

    def __init__(self):
        self.onnx = _model(
            [helper.make_node("Reshape", ["x", "shape"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 12])],
            [_const("shape", np.array([0, 12], np.int64))])

    def reference(self, x):
        return [x.reshape(x.shape[0], 12).astype(np.float64)]


class MatMulChain:
    """x f32[256, 256] -> 8 chained products with a 256x256 weight: ~0.27 GFLOP, long enough
    per run that a 1 ms deadline always passes inside it."""

    def __init__(self, seed=3, depth=8):
        rng = np.random.default_rng(seed)
        self.w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
        names = ["x"] + [f"h{i}" for i in range(depth - 1)] + ["y"]
        self.onnx = _model(
            [helper.make_node("MatMul", [names[i], "w"], [names[i + 1]]) for i in range(depth)],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 256])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])],
            [_const("w", self.w)])
