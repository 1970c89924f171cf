"""A dynamic-sequence encoder (BERT-like) from Python: one session, many sequence lengths, and
Python threads sharing it (run releases the GIL).

    PYTHONPATH=bazel-bin/python /usr/bin/python3 examples/python/encoder.py \\
        /work/models/bert_tiny.onnx --seqs 8,16,32,64,128 --threads 1

For each sequence length: first-run latency (kernels compile for a new shape; shapes seen often
get specialized variants in the background) and steady-state latency. Then --parallel Python
threads each run the model --runs times at the last length, against the same runs one after
another (the results must be identical). --input / --reference check one run's output.
"""
import argparse
import sys
import threading
import time

import numpy as np

import kiln
from demo_models import check_reference


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="an encoder with symbolic batch and seq dims (.onnx or .kiln)")
    p.add_argument("--seqs", default="8,16,32,64,128", help="sequence lengths (8,16,32,64,128)")
    p.add_argument("--threads", type=int, default=1, help="OpenMP threads per run (1)")
    p.add_argument("--parallel", type=int, default=4, help="Python threads sharing it (4)")
    p.add_argument("--runs", type=int, default=10, help="runs per length and per thread (10)")
    p.add_argument("--input", help=".npy input for a reference check")
    p.add_argument("--reference", help=".npy expected output for --input: exit 1 on mismatch")
    return p.parse_args()


def make_feed(session, seq, rng):
    """Inputs for batch 1 x `seq`: token ids (ints) in [0, 100), floats standard normal."""
    feed = {}
    for arg in session.get_inputs():
        shape = [1 if d == "batch" else seq if isinstance(d, str) or d is None else d
                 for d in arg.shape]
        if arg.type == "tensor(int64)":
            feed[arg.name] = rng.integers(0, 100, size=shape, dtype=np.int64)
        else:
            feed[arg.name] = rng.standard_normal(shape).astype(np.float32)
    return feed


def run_many(session, feed, runs, out):
    out.extend(session.run(None, feed)[0] for _ in range(runs))


def run_threads(session, feeds, runs, outs):
    """Thread k runs feeds[k] `runs` times into outs[k]. Returns the seconds from every thread
    being ready (each has run once, so its VM context exists) until the last one finishes."""
    ready = threading.Barrier(len(feeds) + 1)

    def work(feed, out):
        session.run(None, feed)
        ready.wait()
        run_many(session, feed, runs, out)

    threads = [threading.Thread(target=work, args=(f, o)) for f, o in zip(feeds, outs)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def main():
    args = parse_args()
    rng = np.random.default_rng(0)
    # (1) Load once; every sequence length runs on the same executable.
    session = kiln.InferenceSession(args.model, threads=args.threads)
    print(f"(1) {args.model}: {session.get_inputs()} -> {session.get_outputs()}")

    # (2) Each length: first run, then steady state.
    seqs = [int(s) for s in args.seqs.split(",")]
    for seq in seqs:
        feed = make_feed(session, seq, rng)
        start = time.perf_counter()
        (y,) = session.run(None, feed)
        first = time.perf_counter() - start
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            session.run(None, feed)
            times.append(time.perf_counter() - start)
        print(f"(2) seq {seq:4d}: output {list(y.shape)}, first run {first * 1e3:8.2f} ms, "
              f"steady median {np.median(times) * 1e3:7.3f} ms")

    # (3) Python threads share the session: the GIL is released while kiln runs.
    feeds = [make_feed(session, seqs[-1], rng) for _ in range(args.parallel)]
    for feed in feeds:
        run_many(session, feed, 3, [])  # warm: every kernel compiled for this shape
    session.runtime.wait_for_background_compiles()
    serial = [[] for _ in feeds]
    start = time.perf_counter()
    for feed, out in zip(feeds, serial):
        run_many(session, feed, args.runs, out)
    serial_s = time.perf_counter() - start
    parallel = [[] for _ in feeds]
    parallel_s = run_threads(session, feeds, args.runs, parallel)
    same = all(len(p) == args.runs and all(np.array_equal(a, b) for a, b in zip(p, s))
               for p, s in zip(parallel, serial))
    print(f"(3) {args.parallel} x {args.runs} runs at seq {seqs[-1]}: one after another "
          f"{serial_s * 1e3:.1f} ms, {args.parallel} Python threads {parallel_s * 1e3:.1f} ms "
          f"({serial_s / parallel_s:.2f}x); results {'identical' if same else 'DIFFER'}")
    if not same:
        return 1

    # (4) Optionally, one run against a reference.
    if args.input and args.reference:
        (y,) = session.run(None, {session.get_inputs()[0].name: np.load(args.input)})
        return 0 if check_reference(y, args.reference, 4) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
