#!/usr/bin/env python3
"""Time to first output (issue 16): `kiln run` as a whole process (load, code, one inference,
output) beside ONNX Runtime's cold session create + first run, also as a whole process.

    /usr/bin/python3 tools/first_output.py [--kiln PATH] [--rounds 3] [--threads 1]
                                           [--only a,b] [--work DIR]

For each case: `kiln compile` writes the executable twice, plain (`--target none`: kernel IR
only, no code for kiln compile's default x86-64-v3 target) and with code for this host
(`--target native`); then, per round and alternating, these whole processes are timed (wall):
  cold  kiln run on the plain file with an empty JIT cache (`--jit-cache off`: no AOT code; with
        a fresh cache directory instead the process also waits, after the output, to store
        the optimized code for the next one);
  aot   kiln run on the file with AOT code, JIT cache off;
  warm  kiln run on the plain file with a cache a previous process filled (`kiln bench`, which
        waits for the optimized code);
  ort   node: onnxruntime-node InferenceSession.create + one run (default graph optimizations,
        intraOpNumThreads = --threads).
Every process gets the same input (.npy). Prints a markdown table of the medians and the
ratios to ORT, of wall time and of process CPU time (user + sys, every thread: what a loaded
machine does not inflate), with the CPU and the load average (other processes share the
machine).

Prerequisites: a built CLI (bazel build //tools:kiln) and the quickstart model (bazel build
//examples/quickstart:quickstart_onnx), /work/models and /work/zoo, ONNX Runtime for node in
NODE_PATH (default /tmp/ort/node_modules).
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import cpu  # noqa: E402  (the same CPU line as the zoo table)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ONNX Runtime: create a session, run once on the .npy inputs, print the first output values.
ORT_JS = r"""
const ort = require('onnxruntime-node');
const fs = require('fs');
function readNpy(path) {
  const b = fs.readFileSync(path);
  const hlen = b.readUInt16LE(8);
  const header = b.toString('latin1', 10, 10 + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter(s => s.trim())
      .map(s => parseInt(s, 10));
  const data = b.buffer.slice(b.byteOffset + 10 + hlen, b.byteOffset + b.length);
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(data), shape);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(data), shape);
  throw new Error('unsupported npy dtype ' + descr);
}
(async () => {
  const [model, threads, ...inputs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: parseInt(threads, 10), interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all'});
  const feeds = {};
  for (const spec of inputs) {
    const eq = spec.indexOf('=');
    feeds[spec.slice(0, eq)] = readNpy(spec.slice(eq + 1));
  }
  const out = await session.run(feeds);
  const first = out[session.outputNames[0]];
  console.log(session.outputNames[0], first.dims.join('x'), Array.from(first.data.slice(0, 3)));
})().catch(e => { console.error(e); process.exit(1); });
"""


def token_input(path, seq, vocab=None):
    """Token ids [1, seq]: bert_tiny's reference tokens repeated (real ids of its vocabulary),
    taken modulo `vocab` for a model with a smaller one."""
    ids = np.load("/work/models/bert_tiny_input.npy").reshape(-1)
    ids = np.resize(ids, (1, seq)).astype(np.int64)
    np.save(path, ids % vocab if vocab else ids)
    return path


def cases(work):
    """(name, onnx, input name, input .npy) for each case the issue lists."""
    zoo, models = "/work/zoo", "/work/models"
    quickstart = os.path.join(ROOT, "bazel-bin/examples/quickstart/quickstart.onnx")
    return [
        ("bert_tiny seq 128", f"{models}/bert_tiny.onnx", "input_ids",
         token_input(os.path.join(work, "bert128.npy"), 128)),
        ("gpt_tiny", f"{zoo}/gpt_tiny.onnx", "input_ids", f"{zoo}/gpt_tiny.in0.npy"),
        ("lraspp_mobilenet_v3_large 320x480", f"{zoo}/lraspp_mobilenet_v3_large.onnx", "input",
         f"{zoo}/lraspp_mobilenet_v3_large.in0.npy"),
        ("mobilenet_v3_large", f"{zoo}/mobilenet_v3_large.onnx", "input",
         f"{zoo}/mobilenet_v3_large.in0.npy"),
        ("resnet50", f"{models}/resnet50.onnx", "input", f"{models}/resnet50_input.npy"),
        ("quickstart (seq 8)", quickstart, "input_ids",
         token_input(os.path.join(work, "quickstart8.npy"), 8, vocab=1000)),
    ]


CPU = {}  # case kind -> process CPU seconds (user + sys) of each timed process


def timed(cmd, env=None, kind=None):
    """Wall seconds of one whole process; raises with its output if it fails. Its CPU seconds
    (user + sys, all threads) go to CPU[kind]: on a machine other processes load, wall time
    says as much about them, CPU time only about the process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    if kind:
        CPU.setdefault(kind, []).append(after.ru_utime - before.ru_utime +
                                        after.ru_stime - before.ru_stime)
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default=os.path.join(ROOT, "bazel-bin/tools/kiln"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated substrings of case names")
    ap.add_argument("--work", default="", help="directory for executables (default: a temp dir)")
    a = ap.parse_args()
    os.environ.setdefault("NODE_PATH", "/tmp/ort/node_modules")
    work = a.work or tempfile.mkdtemp(prefix="kiln_first_output_")
    os.makedirs(work, exist_ok=True)
    ort_js = os.path.join(work, "ort_first.js")
    with open(ort_js, "w") as f:
        f.write(ORT_JS)
    threads = ["--threads", str(a.threads)]
    rows = []
    for name, onnx, input_name, npy in cases(work):
        if a.only and not any(s in name for s in a.only.split(",")):
            continue
        stem = os.path.join(work, name.split()[0])
        plain, aot = stem + ".kiln", stem + "_aot.kiln"
        for cmd in (["-o", plain, "--target", "none"], ["-o", aot, "--target", "native"]):
            subprocess.run([a.kiln, "compile", onnx, "--quiet"] + cmd, check=True,
                           capture_output=True)
        run = [a.kiln, "run"]
        inputs = [f"{input_name}={npy}"]
        dims = []  # the warm cache is filled at the input's shape
        sig = np.load(npy).shape
        if "bert" in name or "quickstart" in name or "gpt" in name:
            dims = ["--dim", f"batch={sig[0]}", "--dim", f"seq={sig[1]}"]
        elif "lraspp" in name:
            dims = ["--dim", f"batch={sig[0]}", "--dim", f"height={sig[2]}",
                    "--dim", f"width={sig[3]}"]
        else:
            dims = ["--dim", f"batch={sig[0]}"]
        warm_dir = os.path.join(work, "warm_" + os.path.basename(stem))
        shutil.rmtree(warm_dir, ignore_errors=True)
        subprocess.run([a.kiln, "bench", plain, "--jit-cache", warm_dir, "--iters", "1",
                        "--warmup", "2"] + dims + threads + ["--input"] + inputs,
                       check=True, capture_output=True)
        t = {"cold": [], "aot": [], "warm": [], "ort": []}
        CPU.clear()
        for _ in range(a.rounds):
            t["cold"].append(timed(run + [plain, "--jit-cache", "off"] + threads +
                                   ["--input"] + inputs, kind="cold"))
            t["aot"].append(timed(run + [aot, "--jit-cache", "off"] + threads +
                                  ["--input"] + inputs, kind="aot"))
            t["warm"].append(timed(run + [plain, "--jit-cache", warm_dir] + threads +
                                   ["--input"] + inputs, kind="warm"))
            t["ort"].append(timed(["node", ort_js, onnx, str(a.threads)] + inputs, kind="ort"))
        med = {k: statistics.median(v) * 1e3 for k, v in t.items()}
        cpu_med = {k: statistics.median(v) * 1e3 for k, v in CPU.items()}
        rows.append((name, med, cpu_med))
        print(f"{name}: " + ", ".join(f"{k} {v:.0f} ms (cpu {cpu_med[k]:.0f})"
                                      for k, v in med.items()),
              file=sys.stderr, flush=True)
    load = os.getloadavg()
    print(f"\nTime to first output, whole processes, medians of {a.rounds}, {a.threads} "
          f"thread(s); {cpu()}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")
    print("| case | ORT create + run | kiln, empty cache | kiln, AOT | kiln, warm cache |")
    print("|---|---:|---:|---:|---:|")
    for name, m, c in rows:
        o, oc = m["ort"], c["ort"]
        cells = [f"{m[k]:.0f} ms ({m[k] / o:.2f}x; cpu {c[k]:.0f} ms, {c[k] / oc:.2f}x)"
                 for k in ("cold", "aot", "warm")]
        print(f"| {name} | {o:.0f} ms (cpu {oc:.0f} ms) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
