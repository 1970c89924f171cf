"""kiln: run ONNX models and compiled .kiln executables from Python.

The API follows ONNX Runtime's, so code written for it reads the same::

    import kiln, numpy as np
    session = kiln.InferenceSession("model.onnx")          # or a .kiln file, or bytes
    print(session.get_inputs()[0])                          # NodeArg(name='x', type='tensor(float)', shape=['batch', 4])
    (y,) = session.run(None, {"x": np.ones((2, 4), np.float32)})

Below it, ``kiln.compile(model) -> bytes`` compiles an ONNX model ahead of time, and
``kiln.Runtime(threads=..., jit_cache=...).load(...)`` controls which runtime (JIT, vendor
runtimes, allocator) a model runs on.

Memory: contiguous numpy inputs of the declared dtype are bound without copying; other arrays
are converted once. Outputs are numpy arrays over kiln's own buffers (no copy). ``kiln.Tensor``,
``kiln.from_dlpack`` and ``Tensor.__dlpack__`` exchange tensors with other frameworks zero-copy.

Threads: ``run`` releases the GIL, so Python threads sharing one session run in parallel.

Errors: every error kiln reports is a ``kiln.KilnError`` subclass named after kiln's status code
(``kiln.InvalidArgument``, ``kiln.DeadlineExceeded``, ``kiln.NotFound``, ...) whose message says
where and what, e.g. which input has the wrong dtype.
"""

from ._kiln import (  # noqa: F401  (the public API, re-exported)
    Aborted,
    DeadlineExceeded,
    InferenceSession,
    Internal,
    InvalidArgument,
    InvalidFormat,
    KilnError,
    NodeArg,
    NotFound,
    OutOfRange,
    ResourceExhausted,
    Runtime,
    Tensor,
    Unsupported,
    __version__,
    compile,
    from_dlpack,
)

__all__ = [
    "Aborted",
    "DeadlineExceeded",
    "InferenceSession",
    "Internal",
    "InvalidArgument",
    "InvalidFormat",
    "KilnError",
    "NodeArg",
    "NotFound",
    "OutOfRange",
    "ResourceExhausted",
    "Runtime",
    "Tensor",
    "Unsupported",
    "compile",
    "from_dlpack",
]
