"""Errors: kiln's status codes as exception classes, with kiln's message naming the input."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln
import models


def test_exception_classes_follow_status_codes():
    assert issubclass(kiln.InvalidArgument, kiln.KilnError)
    assert issubclass(kiln.InvalidArgument, ValueError)
    assert issubclass(kiln.DeadlineExceeded, TimeoutError)
    assert issubclass(kiln.NotFound, LookupError)
    assert kiln.DeadlineExceeded.code == "DEADLINE_EXCEEDED"
    assert kiln.InvalidArgument.__module__ == "kiln"


@pytest.mark.parametrize("feed, message", [
    (np.zeros((1, 16), np.float64), r"input 0 'x': dtype f64, expected f32"),
    (np.zeros((16,), np.float32), r"input 0 'x': rank 1"),
    (np.zeros((1, 15), np.float32), r"input 0 'x': dim 1 is 15, expected 16"),
    (np.zeros((1, 16), np.complex64), r"input 'x': numpy dtype complex64 has no kiln equivalent"),
    (np.zeros((1, 16), np.uint32), r"input 0 'x': dtype u32, expected f32"),
])
def test_bad_inputs_raise_naming_the_input(mlp, feed, message):
    _, session = mlp
    with pytest.raises(kiln.InvalidArgument, match=message):
        session.run(None, {"x": feed})


def test_bad_feeds_and_output_names(mlp):
    _, session = mlp
    x = np.zeros((1, 16), np.float32)
    with pytest.raises(kiln.InvalidArgument, match="missing input 'x'"):
        session.run(None, {})
    with pytest.raises(kiln.InvalidArgument, match=r"no input 'y' \(inputs: 'x'\)"):
        session.run(None, {"x": x, "y": x})
    with pytest.raises(kiln.InvalidArgument, match="no output 'nope'"):
        session.run(["nope"], {"x": x})
    with pytest.raises(TypeError):
        session.run(None, [x])
    with pytest.raises(kiln.InvalidArgument, match="timeout_ms must be positive"):
        session.run(None, {"x": x}, timeout_ms=0)


def test_timeout_raises_deadline_exceeded_and_the_session_still_runs():
    model = models.MatMulChain()
    session = kiln.InferenceSession(model.onnx, jit_cache="off", threads=1)
    x = np.eye(256, dtype=np.float32)
    # The first run compiles kernels (tens of ms at least): far past a 1 ms deadline.
    with pytest.raises(kiln.DeadlineExceeded, match="deadline exceeded"):
        session.run(None, {"x": x}, timeout_ms=1)
    (y,) = session.run(None, {"x": x}, timeout_ms=600_000)
    expected = np.linalg.matrix_power(model.w.astype(np.float64), 8)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


def test_bad_models(tmp_path):
    with pytest.raises(kiln.NotFound):
        kiln.InferenceSession(str(tmp_path / "missing.onnx"), jit_cache="off")
    with pytest.raises(kiln.InvalidFormat):
        kiln.InferenceSession(b"\x08\x07\x12garbage that is not a protobuf", jit_cache="off")
    exe = kiln.compile(models.Flatten().onnx)
    with pytest.raises(kiln.InvalidArgument, match="dims pins symbolic dims"):
        kiln.InferenceSession(exe, jit_cache="off", dims={"batch": 1})
    with pytest.raises(kiln.InvalidFormat, match="functions|truncated|size|verif"):
        kiln.InferenceSession(exe[:64], jit_cache="off")
    with pytest.raises(TypeError):
        kiln.InferenceSession(42, jit_cache="off")


def test_an_op_kiln_lacks_is_unsupported_naming_the_node():
    rand = models.make_model(
        [helper.make_node("RandomUniformLike", ["x"], ["y"], name="rand_node")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [])
    with pytest.raises(kiln.Unsupported,
                       match="RandomUniformLike is not supported \\(node 'rand_node'\\)"):
        kiln.compile(rand)
