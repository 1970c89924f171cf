#!/usr/bin/env python3
"""Old kiln against new on one-node GEMM and ConvTranspose models: CPU time per call.

    /usr/bin/python3 tools/gemm_bench.py --kiln old=/work/kiln-main --kiln new=bazel-bin/tools/kiln
        [--threads 1,2] [--rounds 3] [--iters 50] [--only 64x8000x256,ct64x32x32] [--out DIR]

Each case is a model of one MatMul with constant weights (packed at compile time, as a
transformer's projections and LM heads are), written MxNxK, with `b` for a bias Add fused into
its epilogue and `r3` for a rank-3 A ([1, M, K], as the zoo's transformers have), or a
ConvTranspose with kernel 2 and stride 2 (ctCINxCOUTxHW: U-Net's upsampling). Every binary
compiles its own copy (the kernels are lowered at compile time, so old and new differ there).

Figure: (task-clock of `kiln bench --iters 5+N` - that of `--iters 5`) / N (N = --iters; the
M = 1 cases of a few microseconds need thousands to rise above the process's noise), the JIT cache warm
and tiering off, so compiles and loading cancel out. CPU time, unlike wall time, stays
meaningful on a loaded machine (2 cores shared with builds); with 2 threads it adds up both
threads' time (idle waits included). Binaries alternate within a round; the median over rounds
is printed with the ratio of each binary to the first.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CASES = ("64x8000x256 64x8192x256 64x4000x256 60x8000x256 66x8000x256 128x8000x256 "
         "64x8000x256b 64x8000x256r3 3136x96x288 3136x96x288b 3136x96x288r3 3136x96x288br3 "
         "3136x96x384br3 196x384x1536b 196x384x1536br3 49x3072x768 49x3072x768r3 50x768x2304b "
         "50x768x2304br3 ct64x32x32 ct32x16x64").split()


def matmul_model(spec, path):
    """MxNxK[b][r3]: A [M, K] (or [1, M, K]) times constant B [K, N] (+ constant bias [N])."""
    parsed = re.fullmatch(r"(\d+)x(\d+)x(\d+)(b?)(r3)?", spec)
    if not parsed:
        sys.exit(f"gemm_bench: case {spec!r} is not MxNxK[b][r3] or ctCINxCOUTxHW")
    m, n, k = (int(v) for v in parsed.group(1, 2, 3))
    bias, lead = parsed.group(4) == "b", [1] if parsed.group(5) else []
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, (k, n)).astype(np.float32), "w")]
    nodes = [helper.make_node("MatMul", ["a", "w"], ["t" if bias else "y"])]
    if bias:
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, (n,)).astype(np.float32), "c"))
        nodes.append(helper.make_node("Add", ["t", "c"], ["y"]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, lead + [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, lead + [m, n])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def conv_transpose_model(spec, path):
    """ctCINxCOUTxHW: X [1, CIN, HW, HW] -> [1, COUT, 2 HW, 2 HW], kernel 2, stride 2, bias."""
    cin, cout, hw = (int(v) for v in spec[2:].split("x"))
    rng = np.random.default_rng(0)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[2, 2],
                            strides=[2, 2])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, 2 * hw, 2 * hw])],
        [numpy_helper.from_array(rng.uniform(-1, 1, (cin, cout, 2, 2)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.uniform(-1, 1, (cout,)).astype(np.float32), "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def task_clock_ms(cmd):
    p = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock"] + cmd, capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"gemm_bench: {' '.join(cmd)} failed:\n{p.stderr}")
    line = next(l for l in p.stderr.splitlines() if "task-clock" in l)
    return float(line.split(",")[0])


def per_call_ms(kiln, kfile, threads, cache, iters):
    def bench(iters):
        return task_clock_ms([kiln, "bench", kfile, "--threads", str(threads), "--iters",
                              str(iters), "--warmup", "1", "--jit-cache", cache,
                              "--jit-tiering", "off"])
    bench(1)  # fills the JIT cache: both measured runs then load the same objects
    return (bench(5 + iters) - bench(5)) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", action="append", required=True, help="NAME=PATH (repeatable)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50, help="timed calls per measurement")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="/tmp/gemm_bench")
    args = ap.parse_args()
    kilns = [tuple(k.split("=", 1)) for k in args.kiln]
    cases = args.only.split(",") if args.only else CASES
    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        model = os.path.join(args.out, case + ".onnx")
        (conv_transpose_model if case.startswith("ct") else matmul_model)(case, model)
        files = {}
        for name, kiln in kilns:
            files[name] = os.path.join(args.out, f"{case}.{name}.kiln")
            subprocess.run([kiln, "compile", model, "-o", files[name], "--external", "none",
                            "-q"], check=True, capture_output=True)
        for threads in (int(t) for t in args.threads.split(",")):
            times = {name: [] for name, _ in kilns}
            for _ in range(args.rounds):
                for name, kiln in kilns:
                    cache = os.path.join(args.out, "jit-cache-" + name)
                    times[name].append(per_call_ms(kiln, files[name], threads, cache,
                                                          args.iters))
            med = {name: statistics.median(t) for name, t in times.items()}
            first = kilns[0][0]
            cols = "  ".join(f"{name} {med[name]:7.3f} ms" + (
                "" if name == first else f" ({med[name] / med[first]:.2f}x)") for name, _ in kilns)
            print(f"{case:18s} {threads}t  {cols}", flush=True)


if __name__ == "__main__":
    main()
