"""kiln.InferenceSession, kiln.compile and kiln.Runtime: outputs against numpy references."""
import pathlib
import platform

import numpy as np
import pytest

import kiln
import models
from conftest import assert_matches


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_mlp_matches_reference_at_every_batch(mlp, rng, batch):
    model, session = mlp
    x = rng.standard_normal((batch, 16)).astype(np.float32)
    assert_matches(session.run(None, {"x": x}), model.reference(x))


@pytest.mark.parametrize("external", ["onednn", "none"])
def test_convnet_matches_reference_on_onednn_and_jit(rng, external):
    model = models.ConvNet()
    session = kiln.InferenceSession(model.onnx, jit_cache="off", external=external)
    image = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    assert_matches(session.run(["scores"], {"image": image}), model.reference(image))


@pytest.mark.parametrize("seq", [1, 7, 32, 100])
def test_encoder_matches_reference_at_every_seq(encoder, rng, seq):
    model, session = encoder
    x = rng.standard_normal((2, seq, model.hidden)).astype(np.float32)
    assert_matches(session.run(None, {"x": x}), model.reference(x), rtol=1e-4, atol=1e-4)


def test_signature_reads_as_onnx_runtime(mlp):
    _, session = mlp
    (x,) = session.get_inputs()
    assert (x.name, x.type, x.shape) == ("x", "tensor(float)", ["batch", 16])
    outputs = session.get_outputs()
    assert [o.name for o in outputs] == ["logits", "probs"]
    assert all(o.type == "tensor(float)" and o.shape == ["batch", 4] for o in outputs)
    assert repr(x) == "NodeArg(name='x', type='tensor(float)', shape=['batch', 16])"


def test_output_names_select_and_order_outputs(mlp, rng):
    model, session = mlp
    x = rng.standard_normal((2, 16)).astype(np.float32)
    logits, probs = model.reference(x)
    assert_matches(session.run(["probs"], {"x": x}), [probs])
    assert_matches(session.run(["probs", "logits"], {"x": x}), [probs, logits])


def test_compile_pins_dims_and_the_kiln_bytes_load_every_way(tmp_path, rng):
    model = models.Mlp()
    exe = kiln.compile(model.onnx, dims={"batch": 2}, external="none")
    assert isinstance(exe, bytes) and exe[8:12] == b"KILN"
    path = tmp_path / "mlp.kiln"
    path.write_bytes(exe)
    x = rng.standard_normal((2, 16)).astype(np.float32)
    runtime = kiln.Runtime(threads=1, jit_cache="off")
    sessions = [
        kiln.InferenceSession(exe, jit_cache="off"),
        kiln.InferenceSession(path, jit_cache="off"),  # os.PathLike
        runtime.load(str(path)),
        runtime.load(bytearray(exe)),
    ]
    for session in sessions:
        assert session.get_inputs()[0].shape == [2, 16]
        assert_matches(session.run(None, {"x": x}), model.reference(x))


def test_onnx_file_is_compiled_in_memory(tmp_path, rng):
    model = models.ConvNet()
    path = tmp_path / "convnet.onnx"
    path.write_bytes(model.onnx)
    session = kiln.InferenceSession(str(path), jit_cache="off", dims={"batch": 1})
    assert session.get_inputs()[0].shape == [1, 3, 8, 8]
    image = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    assert_matches(session.run(None, {"image": image}), model.reference(image))


def test_runtime_options_and_stats(rng):
    runtime = kiln.Runtime(threads=1, jit_cache="off")
    assert runtime.num_threads == 1 and runtime.jit_cache_dir == ""
    session = runtime.load(models.Mlp().onnx)
    assert session.runtime.stats()["jit_compilations"] == 0  # kernels compile on first use
    session.run(None, {"x": rng.standard_normal((1, 16)).astype(np.float32)})
    assert runtime.stats()["jit_compilations"] > 0


def _host_has(*flags):
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    line = next((l for l in text.splitlines() if l.startswith("flags")), "")
    return set(flags) <= set(line.split())


def test_compile_embeds_code_by_default_as_kiln_compile_does(rng):
    # kiln.compile's default is the library's (embed/compile.h kiln::CompileOptions), the same
    # as `kiln compile`'s: x86-64-v3 code on x86-64, which an AVX2 host links instead of
    # JIT-compiling; targets="none" (or []) opts out as `--target none` does.
    model = models.Mlp()
    x = rng.standard_normal((3, 16)).astype(np.float32)
    x86 = platform.machine() in ("x86_64", "AMD64")
    links = x86 and _host_has("avx2", "fma", "bmi2")
    for targets, linked in ((None, links), ("none", False), ([], False), (["x86-64-v3"], links)):
        exe = kiln.compile(model.onnx, external="none", targets=targets)
        runtime = kiln.Runtime(threads=1, jit_cache="off")
        session = runtime.load(exe)
        assert_matches(session.run(None, {"x": x}), model.reference(x))
        stats = runtime.stats()
        if linked:
            assert stats["jit_aot_kernels"] > 0 and stats["jit_compilations"] == 0, targets
        else:
            assert stats["jit_aot_kernels"] == 0 and stats["jit_compilations"] > 0, targets
    # An .onnx loaded in memory embeds no code: the JIT's first tier compiles what runs.
    runtime = kiln.Runtime(threads=1, jit_cache="off")
    runtime.load(model.onnx).run(None, {"x": x})
    assert runtime.stats()["jit_aot_kernels"] == 0
    with pytest.raises(kiln.InvalidArgument, match="cannot be combined"):
        kiln.compile(model.onnx, targets=["none", "x86-64-v3"])
    with pytest.raises(TypeError):
        kiln.compile(model.onnx, targets=[3])


def test_compile_tune_records_measurements_that_load_and_compute_the_same(rng):
    # kiln.compile(tune=True) is `kiln compile --tune`: the oneDNN region of ConvNet (a 3x3
    # stride-1 Conv, a Winograd candidate, at batch 1) gets its load-time measurements recorded
    # in the blob, so the bytes differ from an untuned compile and both compute the same.
    model = models.ConvNet()
    image = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    plain = kiln.compile(model.onnx, targets="none", threads=1)
    tuned = kiln.compile(model.onnx, targets="none", threads=1, tune=True)
    assert tuned != plain
    for exe in (plain, tuned):
        session = kiln.Runtime(threads=1, jit_cache="off").load(exe)
        assert_matches(session.run(None, {"image": image}), model.reference(image))
    with pytest.raises(TypeError):
        kiln.compile(model.onnx, tune="yes")


def test_sessions_with_the_same_options_share_a_runtime():
    a = kiln.InferenceSession(models.Flatten().onnx, jit_cache="off", threads=2)
    b = kiln.InferenceSession(models.Mlp().onnx, jit_cache="off", threads=2)
    c = kiln.InferenceSession(models.Mlp().onnx, jit_cache="off", threads=1)
    assert a.runtime is b.runtime  # pybind11 hands out one wrapper per C++ object
    assert a.runtime is not c.runtime
    assert c.runtime.num_threads == 1 and a.runtime.num_threads == 2


def test_package_exports():
    assert kiln.__version__
    assert pathlib.Path(kiln.__file__).name == "__init__.py"
    for name in kiln.__all__:
        assert hasattr(kiln, name), name


def test_load_policy_reaches_the_loader(capfd):
    # tests/embed/c_api_tuned.kiln: x + x through a region of the unregistered vendor "acme"
    # that `kiln compile --tune` gave to its fallback. By default the fallback runs with the
    # tune's notice; ignore_tuned_fallback asks for the vendor, absent here, so the region
    # falls back for that reason; require_vendor makes the absence an error.
    path = "tests/embed/c_api_tuned.kiln"
    x = np.array([1, -2, 4], np.float32)
    capfd.readouterr()
    for kwargs, notice in (({}, "measured them faster: acme_0"),
                           ({"ignore_tuned_fallback": True},
                            "no runtime is registered for vendor 'acme'")):
        for session in (kiln.Runtime(threads=1, jit_cache="off", **kwargs).load(path),
                        kiln.InferenceSession(path, threads=1, jit_cache="off", **kwargs)):
            (y,) = session.run(None, {"x": x})
            np.testing.assert_array_equal(y, 2 * x)
        err = capfd.readouterr().err
        assert notice in err, (kwargs, err)
    for make in (lambda: kiln.Runtime(threads=1, jit_cache="off", require_vendor=True).load(path),
                 lambda: kiln.InferenceSession(path, threads=1, jit_cache="off",
                                               require_vendor=True)):
        with pytest.raises(kiln.NotFound, match="vendor 'acme'.*the vendor is required"):
            make()
