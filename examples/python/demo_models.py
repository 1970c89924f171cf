"""Demo models for kiln's Python examples and tests, built with onnx.helper (fixed seeds), with
numpy references: a tiny resnet-like image classifier and a tiny BERT-like encoder with a dynamic
sequence length.

    /usr/bin/python3 examples/python/demo_models.py OUTDIR

writes OUTDIR/classifier.onnx and OUTDIR/encoder.onnx, each with an input .npy and the reference
output .npy (classifier_input.npy, classifier_output.npy, encoder_input.npy, encoder_output.npy),
which classify.py and encoder.py check kiln's outputs against (check_reference).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def make_model(nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-python-examples")
    onnx.checker.check_model(model)
    return model.SerializeToString()


def constant(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def relu(x):
    return np.maximum(x, 0)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


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
        self.onnx = make_model(
            [helper.make_node("Conv", ["image", "w", "b"], ["c"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fc_b"], ["scores"])],
            [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 8, 8])],
            [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 5])],
            [constant("w", self.w), constant("b", self.b), constant("fc", self.fc),
             constant("fc_b", self.fc_b)])

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
        self.onnx = make_model(
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
            [constant("w1", self.w1), constant("w2", self.w2), constant("gamma", self.gamma),
             constant("beta", self.beta), constant("eps", np.array(1e-5, np.float32))])

    def reference(self, x):
        x = x.astype(np.float64)
        s = x + relu(x @ self.w1) @ self.w2
        d = s - s.mean(axis=-1, keepdims=True)
        return [d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * self.gamma + self.beta]


def check_reference(got, reference_path, step):
    """Prints how `got` compares with the .npy at `reference_path` and returns whether it
    matches: rtol 1e-3 and atol 1e-4 of the reference's scale, as tools/zoo.py checks models."""
    ref = np.load(reference_path)
    scale = float(np.abs(ref).max())
    ok = got.shape == ref.shape and np.allclose(got, ref, rtol=1e-3, atol=1e-4 * scale)
    err = float(np.abs(got - ref).max()) if got.shape == ref.shape else float("inf")
    print(f"({step}) against {reference_path}: max abs error {err:.3g} (scale {scale:.3g}): "
          f"{'match' if ok else 'MISMATCH'}")
    return ok


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(0)
    cases = [("classifier", ConvNet(), rng.standard_normal((2, 3, 8, 8))),
             ("encoder", Encoder(), rng.standard_normal((1, 24, 128)))]
    for name, model, x in cases:
        x = x.astype(np.float32)
        with open(os.path.join(outdir, name + ".onnx"), "wb") as f:
            f.write(model.onnx)
        np.save(os.path.join(outdir, name + "_input.npy"), x)
        np.save(os.path.join(outdir, name + "_output.npy"), model.reference(x)[0].astype(np.float32))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: demo_models.py OUTDIR")
    main(sys.argv[1])
