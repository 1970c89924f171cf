"""Zero copy both ways, the one conversion of other inputs, and DLPack."""
import gc

import numpy as np
import pytest

import kiln
import models
from onnx import TensorProto, helper
from conftest import assert_matches


def test_contiguous_input_is_bound_in_place(flatten, rng):
    _, session = flatten
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    copies = session.input_copies
    (y,) = session.run(None, {"x": x})
    assert session.input_copies == copies
    # The model only reshapes: kiln's output is a view of the very buffer it was given.
    assert np.shares_memory(y, x) and y.base is x
    assert not y.flags.writeable  # memory kiln did not allocate is never handed out writable
    expected = x.reshape(2, 12).copy()
    del x
    gc.collect()
    np.testing.assert_array_equal(y, expected)  # the output keeps the input alive


@pytest.mark.parametrize("make", [
    lambda x: np.asfortranarray(x),             # not C-contiguous
    lambda x: np.repeat(x, 2, axis=1)[:, ::2],  # strided view
    lambda x: x.astype(">f4"),                  # byte-swapped
])
def test_other_arrays_are_converted_once(mlp, rng, make):
    model, session = mlp
    x = rng.standard_normal((4, 16)).astype(np.float32)
    feed = make(x)
    assert not (feed.flags.c_contiguous and feed.dtype.isnative)
    copies = session.input_copies
    assert_matches(session.run(None, {"x": feed}), model.reference(x))
    assert session.input_copies == copies + 1


def test_lists_take_the_declared_dtype(mlp, rng):
    model, session = mlp
    x = rng.standard_normal((1, 16)).astype(np.float32)
    assert_matches(session.run(None, {"x": x.tolist()}), model.reference(x))


def test_outputs_own_kiln_buffers(rng):
    runtime = kiln.Runtime(threads=1, jit_cache="off")  # its own allocator, counted alone
    session = runtime.load(models.Mlp().onnx)
    x = rng.standard_normal((1024, 16)).astype(np.float32)
    session.run(None, {"x": x})  # warm up: buffers go back to the allocator's cache
    before = runtime.stats()["allocator_bytes_in_use"]
    logits, probs = session.run(None, {"x": x})
    assert type(logits.base).__name__ == "PyCapsule" and not logits.flags.owndata
    assert logits.flags.writeable and logits.flags.c_contiguous
    held = runtime.stats()["allocator_bytes_in_use"] - before
    assert held >= logits.nbytes + probs.nbytes  # the arrays are kiln's buffers, not copies
    del logits, probs
    gc.collect()
    assert runtime.stats()["allocator_bytes_in_use"] <= before


def test_dlpack_round_trip_shares_memory(mlp, rng):
    model, session = mlp
    x = rng.standard_normal((3, 16)).astype(np.float32)
    t = kiln.from_dlpack(x)
    assert t.shape == (3, 16) and t.dtype == np.float32
    assert np.shares_memory(np.from_dlpack(t), x)
    assert np.shares_memory(t.numpy(), x)
    copies = session.input_copies
    logits, _ = session.run(None, {"x": t})  # a kiln.Tensor input is used in place
    assert session.input_copies == copies
    assert_matches([logits], model.reference(x)[:1])
    back = np.from_dlpack(kiln.from_dlpack(logits))  # numpy -> kiln -> numpy, no copy
    assert np.shares_memory(back, logits)
    np.testing.assert_array_equal(np.asarray(kiln.from_dlpack(logits)), logits)


def test_dlpack_capsules_are_consumed_once_and_strides_refused():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    capsule = x.__dlpack__()
    kiln.from_dlpack(capsule)
    with pytest.raises(kiln.InvalidArgument, match="consumed only once"):
        kiln.from_dlpack(capsule)
    with pytest.raises(kiln.InvalidArgument, match="stride"):
        kiln.from_dlpack(x[:, ::2])
    with pytest.raises(kiln.InvalidArgument, match="__dlpack__"):
        kiln.from_dlpack(object())


@pytest.mark.parametrize("dtype, onnx_type", [
    (np.uint16, TensorProto.UINT16),
    (np.uint32, TensorProto.UINT32),
    (np.uint64, TensorProto.UINT64),
])
def test_unsigned_arrays_map_to_kiln_dtypes_both_ways(dtype, onnx_type):
    model = models.make_model(
        [helper.make_node("Max", ["a", "b"], ["y"])],
        [helper.make_tensor_value_info("a", onnx_type, [3]),
         helper.make_tensor_value_info("b", onnx_type, [3])],
        [helper.make_tensor_value_info("y", onnx_type, [3])], [])
    session = kiln.Runtime(threads=1, jit_cache="off").load(model)
    top = np.iinfo(dtype).max
    a = np.array([top, 1, top // 2 + 1], dtype)  # the high bit set: a signed max would differ
    b = np.array([0, 2, top // 2], dtype)
    (y,) = session.run(None, {"a": a, "b": b})
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, np.maximum(a, b))
    back = np.from_dlpack(kiln.from_dlpack(y))  # DLPack keeps the unsigned type
    assert back.dtype == dtype and np.shares_memory(back, y)
