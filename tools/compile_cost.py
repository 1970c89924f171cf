#!/usr/bin/env python3
"""Compile cost and cold start: `kiln compile` time and first inference beside ONNX Runtime.

usage: /usr/bin/python3 tools/compile_cost.py [--zoo DIR]... [--models DIR] [--onnx NAME=PATH]...
           [--dim SYMBOL=VALUE]... [--kiln PATH] [--compile-flag F]... [--versus PATH
           [--versus-compile-flag F]...] [--rounds N] [--only a,b] [--out DIR]

Per model, median of --rounds runs (default 3), one thread, each as wall and CPU seconds (user
+ system over all threads: what a loaded machine does not inflate):
  compile   a `kiln compile MODEL.onnx -q` process (the default offload, and kiln compile's
            default code ahead of time: x86-64-v3 objects, linked at load on AVX2 hosts;
            `--compile-flag=--target --compile-flag=none` for kernel IR only);
  kiln 1st  a `kiln run FILE.kiln INPUTS --jit-cache off --threads 1` process: start, load,
            verify and the first call with every JIT compile it needs (a cold start with no
            kernel cache);
  ORT 1st   in one node process: InferenceSession.create + the first run (ORT's cold start,
            without node's own start-up and `require`).
Inputs are the zoo's NAME.in0.npy / the benchmark models' NAME_input.npy; for --onnx models
(several inputs allowed) the script writes inputs from the model's signature: symbolic dims
from --dim (default batch=1, sequence=512), random floats, int64 scalars 16000 (silero VAD's
sample rate), other integers 0.
Needs /usr/bin/python3 (numpy, onnx), node with onnxruntime-node (NODE_PATH /tmp/ort/node_modules).
--versus KILN adds the same two columns for a second kiln (e.g. /work/kiln-main), run
alternately with the first in every round.
kiln's columns include its process start (dynamic linking of LLVM and oneDNN), ORT's do not:
a ratio near 1 favours ORT. The table prints the load average at start and end: quote it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from first_output import ORT_JS  # noqa: E402
from make_qdq import random_feed  # noqa: E402
from zoo import cpu, load_models  # noqa: E402  (the zoo runner's model list and CPU line)

# ORT's cold start: create the session and run it once on .npy inputs, in one process (the
# .npy reader of tools/first_output.py, whose processes include node's start-up).
ORT_FIRST_JS = ORT_JS[:ORT_JS.index("(async () =>")] + r"""
(async () => {
  const [model, ...pairs] = process.argv.slice(1);
  const feeds = {};
  for (const p of pairs) { const i = p.indexOf('='); feeds[p.slice(0, i)] = readNpy(p.slice(i + 1)); }
  const cpu = (u) => (u.user + u.system) / 1e3;  // ms
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const s = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  await s.run(feeds);
  const t1 = process.hrtime.bigint();
  console.log(JSON.stringify({ wall_ms: Number(t1 - t0) / 1e6, cpu_ms: cpu(process.cpuUsage(c0)) }));
})().catch((e) => { console.error(String(e)); process.exit(1); });
"""


def timed(cmd):
    """((wall s, CPU s), returncode, stdout, stderr) of one process; CPU is user + system time
    of the process and its threads, which other processes' load does not inflate."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ((wall, usage.ru_utime + usage.ru_stime), p.returncode,
                out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def signature_inputs(onnx_path, dims, work):
    """{input name: .npy path} from the model's declared inputs (see the docstring)."""
    import onnx
    feed = random_feed(onnx.load(onnx_path, load_external_data=False), dims, 1,
                       np.random.default_rng(0))
    out = {}
    for name, value in feed.items():
        if value.ndim == 0 and value.dtype == np.int64:
            value = np.array(16000, np.int64)  # silero VAD's sample rate
        out[name] = os.path.join(work, name + ".npy")
        np.save(out[name], value)
    return out


def entries(a):
    """[(row name, onnx path, {input name: .npy})]."""
    rows = []
    for i, zoo in enumerate(a.zoo or []):
        for row, name, info, _, in_path, _ in load_models(zoo, a.models if i == 0 else ""):
            if any(r[0] == row for r in rows) or " seq " in row and not row.endswith("128"):
                continue  # one BERT row: the compile does not depend on seq
            input_name = info.get("input") or info.get("input_name") or "input"
            rows.append((row.replace(" seq 128", ""), info["onnx"], {input_name: in_path}))
    for spec in a.onnx:
        name, path = spec.split("=", 1)
        work = os.path.join(a.out, name + ".inputs")
        os.makedirs(work, exist_ok=True)
        dims = dict((k, int(v)) for k, v in (d.split("=") for d in a.dim))
        rows.append((name, path, signature_inputs(path, dims, work)))
    return [r for r in rows if not a.only or r[0] in a.only.split(",")]


def kiln_round(kiln, flags, onnx_path, kfile, inputs):
    """((compile wall, CPU), (run wall, CPU)) of one compile and one cold `kiln run`, or an
    error string."""
    t, rc, _, err = timed([kiln, "compile", onnx_path, "-o", kfile, "-q", *flags])
    if rc != 0:
        return "compile: " + err.strip()[-160:]
    r, rc, _, err = timed([kiln, "run", kfile, *inputs.values(), "--jit-cache", "off",
                           "--threads", "1", "--output-dir", kfile + ".out"])
    if rc != 0:
        return "run: " + err.strip()[-160:]
    return t, r


def measure(a, name, onnx_path, inputs):
    """{column: (wall s, CPU s)} medians over a.rounds, and why a column is missing. With
    --versus, the two kilns alternate within each round (this host's speed drifts)."""
    sides = [("", a.kiln, a.compile_flag)]
    if a.versus:
        sides.append(("versus ", a.versus, a.versus_compile_flag))
    got = {"ort": []}
    for prefix, _, _ in sides:
        got[prefix + "compile"], got[prefix + "kiln"] = [], []
    err = ""
    for _ in range(a.rounds):
        for prefix, kiln, flags in sides:
            kfile = os.path.join(a.out, name + (".versus" if prefix else "") + ".kiln")
            r = kiln_round(kiln, flags, onnx_path, kfile, inputs)
            if isinstance(r, str):
                return {}, prefix + r
            got[prefix + "compile"].append(r[0])
            got[prefix + "kiln"].append(r[1])
        _, rc, out, err = timed(["node", "-e", ORT_FIRST_JS, onnx_path,
                                 *[f"{k}={v}" for k, v in inputs.items()]])
        if rc == 0:
            r = json.loads(out.strip().splitlines()[-1])
            got["ort"].append((r["wall_ms"] / 1e3, r["cpu_ms"] / 1e3))
    med = {k: tuple(statistics.median(x[i] for x in v) for i in (0, 1))
           for k, v in got.items() if v}
    return med, "" if got["ort"] else "ORT failed: " + err.strip()[-160:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", action="append", help="zoo folder with zoo.json (repeatable)")
    ap.add_argument("--models", default="", help="benchmark models folder (manifest.json)")
    ap.add_argument("--onnx", action="append", default=[], help="NAME=PATH (repeatable)")
    ap.add_argument("--dim", action="append", default=["batch=1", "sequence=512"],
                    help="SYMBOL=VALUE for --onnx models' inputs (repeatable)")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "bazel-bin/tools/kiln"))
    ap.add_argument("--compile-flag", action="append", default=[],
                    help="extra flag for kiln compile (repeatable), e.g. --compile-flag=--target "
                         "--compile-flag=none for kernel IR only")
    ap.add_argument("--versus", default="", help="a second kiln (e.g. /work/kiln-main), timed "
                    "alternately with --kiln in every round")
    ap.add_argument("--versus-compile-flag", action="append", default=[],
                    help="extra flag for the --versus kiln's compile (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="/tmp/kiln-compile-cost")
    a = ap.parse_args()
    os.environ.setdefault("NODE_PATH", "/tmp/ort/node_modules")
    os.makedirs(a.out, exist_ok=True)
    print(f"CPU: {cpu()}; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    vs = ("", "versus ") if a.versus else ("",)
    if a.versus:
        print(f"kiln: {a.kiln} {' '.join(a.compile_flag)}; versus: {a.versus} "
              f"{' '.join(a.versus_compile_flag)}")
    head = "| model | " + " | ".join(
        f"{p}compile wall / CPU s | {p}kiln load+1st wall / CPU s" for p in vs) + \
        " | ORT create+1st wall / CPU s | " + " | ".join(f"{p}1st CPU kiln/ORT" for p in vs) + " |"
    print(head)
    print("|---" * head.count(" | ") + "|---|", flush=True)
    for name, onnx_path, inputs in entries(a):
        m, why = measure(a, name, onnx_path, inputs)
        cell = lambda k: f"{m[k][0]:.2f} / {m[k][1]:.2f}" if k in m else "-"
        ratio = lambda p: (f"{m[p + 'kiln'][1] / m['ort'][1]:.2f}"
                           if p + "kiln" in m and "ort" in m else "-")
        cells = [c for p in vs for c in (cell(p + "compile"), cell(p + "kiln"))]
        cells += [cell("ort")] + [ratio(p) for p in vs]
        print(f"| {name} | " + " | ".join(cells) + " |" + (f" {why}" if why else ""), flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
