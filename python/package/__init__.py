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

import os as _os

# How kiln's OpenMP threads wait (embed/omp_wait.h, kOmpSpinCountDefault): a bounded spin, so
# that a busy host does not slow 2-thread runs 10-40x. libgomp reads its environment once, when
# the extension below loads it, so the default is set here, before that, and only when the user
# set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT. It has no effect when libgomp was loaded
# before kiln (by another extension imported first): set GOMP_SPINCOUNT before starting Python.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "3000"

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
