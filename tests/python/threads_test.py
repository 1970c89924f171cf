"""The GIL is released while kiln runs: Python threads sharing one session run in parallel."""
import threading
import time

import numpy as np

from conftest import assert_matches

THREADS = 4
RUNS = 8  # per thread


def _work(session, inputs, results, k):
    results[k] = [session.run(None, {"x": x})[0] for x in inputs]


def _run_threads(session, inputs, results):
    """Runs inputs[k] on thread k; returns the seconds from all threads being ready (each has
    run once: its VM context exists) until the last finishes."""
    ready = threading.Barrier(len(inputs) + 1)

    def work(k):
        session.run(None, {"x": inputs[k][0]})
        ready.wait()
        _work(session, inputs[k], results, k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def test_four_threads_run_one_session_and_all_get_their_answers(encoder):
    model, session = encoder
    rng = np.random.default_rng(7)
    inputs = [[rng.standard_normal((1, 128, model.hidden)).astype(np.float32) for _ in range(RUNS)]
              for _ in range(THREADS)]
    # Warm up outside the timing: kernels compile on first use, and shapes seen often get
    # specialized variants compiled in the background.
    for _ in range(3):
        _work(session, inputs[0], [None], 0)
    session.runtime.wait_for_background_compiles()

    # Best of three rounds each way: other processes share the cores.
    serial_s = parallel_s = float("inf")
    for _ in range(3):
        serial = [None] * THREADS
        start = time.perf_counter()
        for k in range(THREADS):
            _work(session, inputs[k], serial, k)
        serial_s = min(serial_s, time.perf_counter() - start)

        parallel = [None] * THREADS
        parallel_s = min(parallel_s, _run_threads(session, inputs, parallel))

    for k in range(THREADS):
        assert parallel[k] is not None and len(parallel[k]) == RUNS
        for x, y_serial, y_parallel in zip(inputs[k], serial[k], parallel[k]):
            assert_matches([y_parallel], model.reference(x), rtol=1e-4, atol=1e-4)
            np.testing.assert_array_equal(y_parallel, y_serial)
    # Reported, not asserted: the machine is shared and noisy.
    print(f"\n{THREADS} threads x {RUNS} runs of the encoder (seq 128, 1 OpenMP thread each): "
          f"serial {serial_s * 1e3:.1f} ms, threaded {parallel_s * 1e3:.1f} ms, "
          f"speed-up {serial_s / parallel_s:.2f}x")
