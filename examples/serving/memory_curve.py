#!/usr/bin/python3
"""memory_curve: the RSS curve of kiln_serve under random-shape requests (issue 17, finding 8).

Starts kiln_serve on one model with a symbolic dim (by default the BERT-like encoder,
`kiln compile /work/models/bert_tiny.onnx`: input_ids INT64[batch, seq]), sends N binary-tensor
REST requests of random shapes from C keep-alive connections, and prints the server's VmRSS
(from /proc/PID/status) before the first request and after every --every requests. Every reply
must be 200 with the output shape the request implies; the exit status is 1 otherwise.

  /usr/bin/python3 examples/serving/memory_curve.py \
      --kiln-serve bazel-bin/examples/serving/kiln_serve --model /tmp/bert_tiny.kiln \
      --requests 50000 --every 5000 --max-seq 256 [-- extra kiln_serve flags]

Plateau test: the growth over the second half of the run (RSS at the end minus RSS at the
middle) is printed; with --max-growth-mb the run fails if it is larger.
"""

import argparse
import http.client
import json
import random
import re
import struct
import subprocess
import sys
import threading
import time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def scrape(port):
    """A function giving the value of a /metrics sample (a regex of its name) read now."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    page = conn.getresponse().read().decode()
    conn.close()

    def value(pattern):
        m = re.search("^" + pattern + r" (\S+)$", page, re.M)
        return float(m.group(1)) if m else float("nan")

    return value


def metrics(port):
    """allocator bytes in use / cached (MB), JIT kernels held, specializations (/metrics)."""
    value = scrape(port)
    return (value(r'kiln_allocator_bytes\{state="in_use"\}') / 2**20,
            value(r'kiln_allocator_bytes\{state="cached"\}') / 2**20,
            value("kiln_jit_cached_kernels"), value("kiln_jit_specializations_total"))


def report(done, rss, port, t0):
    in_use, cached, kernels, specs = metrics(port)
    print(f"requests {done:6d}  RSS {rss:7.1f} MB  allocator in use {in_use:6.1f} MB, "
          f"cached {cached:6.1f} MB  JIT kernels {kernels:.0f}, specializations {specs:.0f}  "
          f"({time.time() - t0:.0f} s)", flush=True)


def start_server(args, extra):
    cmd = [args.kiln_serve, "--model", f"m={args.model}", "--port", "0",
           "--workers", str(args.workers), "--threads", str(args.threads),
           "--jit-cache", "off"] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r":(\d+) \(", line)
    if not m:
        proc.kill()
        sys.exit(f"memory_curve: kiln_serve did not start: {line!r}")
    return proc, int(m.group(1))


def infer_request(seq, batch, vocab, rng):
    n = batch * seq
    header = json.dumps({
        "inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [batch, seq],
                    "parameters": {"binary_data_size": 8 * n}}],
        "parameters": {"binary_data_output": True},
    }).encode()
    data = struct.pack(f"<{n}q", *(rng.randrange(vocab) for _ in range(n)))
    return header, data


def send(conn, header, data):
    conn.request("POST", "/v2/models/m/infer", body=header + data,
                 headers={"Inference-Header-Content-Length": str(len(header)),
                          "Content-Type": "application/octet-stream"})
    res = conn.getresponse()
    body = res.read()
    if res.status != 200:
        return f"HTTP {res.status}: {body[:200]!r}"
    hlen = int(res.getheader("Inference-Header-Content-Length"))
    return json.loads(body[:hlen])["outputs"][0]["shape"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kiln-serve", required=True)
    p.add_argument("--model", required=True, help="a .kiln with input_ids INT64[batch, seq]")
    p.add_argument("--requests", type=int, default=50000)
    p.add_argument("--every", type=int, default=5000)
    p.add_argument("--connections", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seq", type=int, default=256)
    p.add_argument("--max-batch-rows", type=int, default=1, help="batch drawn from 1..this")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--max-growth-mb", type=float, default=None)
    args, extra = p.parse_known_args()
    extra = [a for a in extra if a != "--"]

    proc, port = start_server(args, extra)
    lock = threading.Lock()
    done = [0]
    next_report = [args.every]
    failures = []
    curve = [(0, rss_mb(proc.pid))]
    t0 = time.time()
    report(0, curve[0][1], port, t0)

    def client(c):
        rng = random.Random(args.seed * 1000 + c)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if done[0] + len(failures) >= args.requests:
                    return
            seq = rng.randint(1, args.max_seq)
            batch = rng.randint(1, args.max_batch_rows)
            header, data = infer_request(seq, batch, args.vocab, rng)
            shape = send(conn, header, data)
            with lock:
                if not isinstance(shape, list) or shape[:2] != [batch, seq]:
                    failures.append(f"[{batch}, {seq}]: {shape}")
                    continue
                done[0] += 1
                if done[0] >= next_report[0]:
                    next_report[0] += args.every
                    curve.append((done[0], rss_mb(proc.pid)))
                    report(done[0], curve[-1][1], port, t0)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proc.terminate()
    proc.wait(timeout=60)
    for f in failures[:10]:
        print("FAILED", f, file=sys.stderr)
    mid = curve[len(curve) // 2][1]
    growth = curve[-1][1] - mid
    print(f"growth over the second half: {growth:+.1f} MB (RSS {mid:.1f} -> {curve[-1][1]:.1f})")
    if failures:
        return 1
    if args.max_growth_mb is not None and growth > args.max_growth_mb:
        print(f"memory_curve: grew {growth:.1f} MB > {args.max_growth_mb} MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
