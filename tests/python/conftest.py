"""Fixtures shared by kiln's Python tests: one session per test model, compiled once per run."""
import numpy as np
import pytest

import kiln
import models


def _session(model, **kwargs):
    # The JIT cache is off so a test run never reads kernels a previous build left behind.
    return kiln.InferenceSession(model.onnx, jit_cache="off", **kwargs)


@pytest.fixture(scope="session")
def mlp():
    model = models.Mlp()
    return model, _session(model)


@pytest.fixture(scope="session")
def convnet():
    model = models.ConvNet()
    return model, _session(model)


@pytest.fixture(scope="session")
def encoder():
    model = models.Encoder()
    return model, _session(model, threads=1)


@pytest.fixture(scope="session")
def flatten():
    model = models.Flatten()
    return model, _session(model)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def assert_matches(outputs, references, rtol=1e-5, atol=1e-5):
    """f32 outputs against float64 references: kernels accumulate in f32, so the tolerance is
    a few f32 ulps scaled by the values (sums over at most a few hundred products)."""
    assert len(outputs) == len(references)
    for out, ref in zip(outputs, references):
        assert out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)
