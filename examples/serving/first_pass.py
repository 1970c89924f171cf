#!/usr/bin/python3
"""first_pass: the latency tail of kiln_serve's first requests against its steady state (issue 16).

For each server configuration given (--config 'LABEL|KILN_SERVE|FLAGS...', run one after another
in one invocation so they see the same machine load), starts kiln_serve on one model with a
symbolic seq dim (by default the BERT-like encoder, `kiln compile /work/models/bert_tiny.onnx`:
input_ids INT64[batch, seq]), timing start-up until it reports ready, then sends two passes of
N binary-tensor REST requests at random seq 1..--max-seq from C keep-alive connections: the
first pass right after ready, the second (steady state) after it, with the same seeds, so the
same mix. Prints start-up seconds, each pass's p50 / p99 (ms), first-pass p99 / steady p50,
and /metrics' JIT compilations and specializations at ready and after each pass. Every reply
must be 200 with the output shape the request implies; the exit status is 1 otherwise.

  /usr/bin/python3 examples/serving/first_pass.py --model /tmp/bert_tiny.kiln \\
      --config 'plain|bazel-bin/examples/serving/kiln_serve|--warmup' \\
      --config 'range|bazel-bin/examples/serving/kiln_serve|--warmup-dims seq=1:256'
"""

import argparse
import http.client
import os
import random
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_curve import infer_request, scrape, send  # noqa: E402  (beside this file)


def jit_counters(port):
    """(compilations, specializations) from /metrics."""
    value = scrape(port)
    return (int(value("kiln_jit_compilations_total")),
            int(value("kiln_jit_specializations_total")))


def start(binary, model, args, flags):
    """Starts kiln_serve; returns (process, port, seconds until it reported ready)."""
    cmd = [binary, "--model", f"m={model}", "--port", "0", "--workers", str(args.workers),
           "--threads", str(args.threads), "--jit-cache", "off"] + flags
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # printed once Server::Start returned: warm-up done
    ready_s = time.time() - t0
    m = re.search(r":(\d+) \(", line)
    if not m:
        proc.kill()
        sys.exit(f"first_pass: {cmd} did not start: {line!r}")
    port = int(m.group(1))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/v2/health/ready")
    if conn.getresponse().status != 200:
        sys.exit("first_pass: not ready after the start-up line")
    return proc, port, ready_s


def run_pass(port, args, failures):
    """Latencies (ms) of args.requests random-seq requests over args.connections."""
    latencies = []
    lock = threading.Lock()
    per_conn = args.requests // args.connections

    def client(c):
        rng = random.Random(args.seed * 1000 + c)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for _ in range(per_conn):
            seq = rng.randint(1, args.max_seq)
            header, data = infer_request(seq, 1, args.vocab, rng)
            t = time.perf_counter()
            shape = send(conn, header, data)
            ms = (time.perf_counter() - t) * 1e3
            with lock:
                if not isinstance(shape, list) or shape[:2] != [1, seq]:
                    failures.append(f"[1, {seq}]: {shape}")
                latencies.append(ms)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(latencies)


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", action="append", required=True,
                   help="LABEL|KILN_SERVE|FLAGS (space-separated extra kiln_serve flags)")
    p.add_argument("--model", required=True, help="a .kiln with input_ids INT64[batch, seq]")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--seed", type=int, default=17)
    args = p.parse_args()

    failures = []
    for config in args.config:
        label, binary, flags = (config.split("|") + [""])[:3]
        load = os.getloadavg()[0]
        proc, port, ready_s = start(binary, args.model, args, flags.split())
        at_ready = jit_counters(port)
        first = run_pass(port, args, failures)
        after_first = jit_counters(port)
        steady = run_pass(port, args, failures)
        after_steady = jit_counters(port)
        proc.terminate()
        proc.wait(timeout=120)
        print(f"{label}: ready {ready_s:.2f} s | first p50 {pct(first, .5):.1f} p99 "
              f"{pct(first, .99):.1f} ms | steady p50 {pct(steady, .5):.1f} p99 "
              f"{pct(steady, .99):.1f} ms | first p99 / steady p50 "
              f"{pct(first, .99) / pct(steady, .5):.2f} | compilations, specializations "
              f"{at_ready} -> {after_first} -> {after_steady} | load {load:.1f} -> "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    for f in failures[:10]:
        print("FAILED", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
