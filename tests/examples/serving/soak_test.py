"""A bounded soak of the real kiln_serve binary (issue 17, "Deliver"): several keep-alive
connections send a seeded random mix of good and bad requests of random shapes (REST JSON and
REST binary), every good answer is checked against the models' reference computation and every
bad one must get its 4xx; the server's RSS (from /proc) must stay under a generous bound after
warm-up; then SIGTERM arrives once the server has read a last, slow request per connection:
each of those still gets its right answer, the server exits 0, and the request count it reports equals the
number of requests the clients sent (none lost).

Models: the demo models (make_demo_model): affine (y = x + b, s = row sums), add (c = a + b),
spin (sum of i < n).
The inputs are small dyadic rationals, so float32 results are exact and compared bit for bit.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

ARGS = None
CONNECTIONS = 4
REQUESTS_PER_CONNECTION = 300
WARMUP_PER_CONNECTION = 50
MAX_REQUEST_BYTES = 64 * 1024
# RSS may grow this much after warm-up; the run holds a few MB of tensors at most, so only a
# leak (thousands of requests' buffers, JIT variants per shape, ...) can exceed it.
RSS_GROWTH_BOUND_MB = 64
# Under AddressSanitizer (tools/sanitizers.sh sets ASAN_OPTIONS) freed memory waits in ASan's
# quarantine (256 MB by default) instead of returning to the heap, so RSS would measure the
# quarantine: the server gets a small one, and the bound grows by its size.
ASAN_QUARANTINE_MB = 16
UNDER_ASAN = 'ASAN_OPTIONS' in os.environ


def server_env():
    env = dict(os.environ)
    if UNDER_ASAN:
        env['ASAN_OPTIONS'] += ':quarantine_size_mb=%d' % ASAN_QUARANTINE_MB
    return env


def rss_mb(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError('no VmRSS for %d' % pid)


def values(rng, shape):
    """Small dyadic rationals: exact in float32 through one add or a 4-term sum."""
    return (np.array([rng.randint(-64, 64) for _ in range(int(np.prod(shape)))],
                     dtype=np.float32) / 4).reshape(shape)


def json_input(name, array):
    return {'name': name, 'datatype': 'FP32', 'shape': list(array.shape),
            'data': array.ravel().tolist()}


class Case:
    """One request: its route, body and headers, and how to check the reply."""

    def __init__(self, path, body, headers=None, status=200, check=None, error=None):
        self.path, self.body, self.headers = path, body, headers or {}
        self.status, self.check, self.error = status, check, error


def affine_case(rng, binary):
    rows = rng.randint(0, 40)
    x, b = values(rng, (rows, 4)), values(rng, (4,))

    def check(outputs):
        np.testing.assert_array_equal(outputs['y'], x + b)
        np.testing.assert_array_equal(outputs['s'], x.sum(axis=1))

    if not binary:
        body = json.dumps({'inputs': [json_input('x', x), json_input('b', b)]}).encode()
        return Case('/v2/models/affine/infer', body, check=check)
    header = json.dumps({
        'inputs': [{'name': n, 'datatype': 'FP32', 'shape': list(a.shape),
                    'parameters': {'binary_data_size': a.nbytes}} for n, a in (('x', x), ('b', b))],
        'parameters': {'binary_data_output': True}}).encode()
    return Case('/v2/models/affine/infer', header + x.tobytes() + b.tobytes(),
                {'Inference-Header-Content-Length': str(len(header))}, check=check)


def add_case(rng):
    n = rng.randint(1, 300)
    a, b = values(rng, (n,)), values(rng, (n,))

    def check(outputs):
        np.testing.assert_array_equal(outputs['c'], a + b)

    body = json.dumps({'inputs': [json_input('a', a), json_input('b', b)]}).encode()
    return Case('/v2/models/add/infer', body, check=check)


def bad_case(rng):
    """A request the server must refuse with a 4xx (never 500), and a part of its message."""
    kind = rng.randrange(7)
    x, b = values(rng, (2, 4)), values(rng, (4,))
    if kind == 0:  # a shape contradicting the model
        body = {'inputs': [json_input('x', values(rng, (2, 3))), json_input('b', b)]}
        return Case('/v2/models/affine/infer', json.dumps(body).encode(), status=400,
                    error='contradicts')
    if kind == 1:  # data not matching its shape
        bad = json_input('x', x)
        bad['data'] = bad['data'][:-1]
        body = {'inputs': [bad, json_input('b', b)]}
        return Case('/v2/models/affine/infer', json.dumps(body).encode(), status=400)
    if kind == 2:  # symbolic dims disagreeing: an invocation error the inputs caused
        n = rng.randint(1, 50)
        body = {'inputs': [json_input('a', values(rng, (n,))), json_input('b', values(rng, (n + 1,)))]}
        return Case('/v2/models/add/infer', json.dumps(body).encode(), status=400)
    if kind == 3:  # unknown model
        return Case('/v2/models/nope/infer', b'{}', status=404)
    if kind == 4:  # malformed JSON
        return Case('/v2/models/affine/infer', b'{"inputs": [', status=400, error='malformed JSON')
    if kind == 5:  # inputs plus the outputs they imply over --max-request-bytes (binary)
        rows = MAX_REQUEST_BYTES // 32 - 8  # x fits; x + y + s does not
        big = np.zeros((rows, 4), dtype=np.float32)
        header = json.dumps({'inputs': [
            {'name': 'x', 'datatype': 'FP32', 'shape': [rows, 4],
             'parameters': {'binary_data_size': big.nbytes}}, json_input('b', b)]}).encode()
        return Case('/v2/models/affine/infer', header + big.tobytes(),
                    {'Inference-Header-Content-Length': str(len(header))}, status=413,
                    error='--max-request-bytes')
    # a declared input shape over --max-request-bytes (JSON, refused before decoding)
    body = {'inputs': [{'name': 'x', 'datatype': 'FP32', 'shape': [1 << 40, 4], 'data': [1]},
                       json_input('b', b)]}
    return Case('/v2/models/affine/infer', json.dumps(body).encode(), status=413,
                error='--max-request-bytes')


def random_case(rng):
    r = rng.random()
    if r < 0.35:
        return affine_case(rng, binary=False)
    if r < 0.6:
        return affine_case(rng, binary=True)
    if r < 0.8:
        return add_case(rng)
    return bad_case(rng)


def decode_outputs(res, body):
    hlen = res.getheader('Inference-Header-Content-Length')
    header = json.loads(body[:int(hlen)] if hlen else body)
    out, offset = {}, int(hlen) if hlen else 0
    for o in header['outputs']:
        self_shape = tuple(o['shape'])
        if 'parameters' in o and 'binary_data_size' in o['parameters']:
            n = o['parameters']['binary_data_size']
            out[o['name']] = np.frombuffer(body[offset:offset + n], np.float32).reshape(self_shape)
            offset += n
        else:
            out[o['name']] = np.array(o['data'], dtype=np.float32).reshape(self_shape)
    return out


def run_case(conn, case):
    """'' if the reply is right, else what is wrong."""
    conn.request('POST', case.path, body=case.body, headers=case.headers)
    res = conn.getresponse()
    body = res.read()
    if res.status != case.status:
        return 'HTTP %d, expected %d: %r' % (res.status, case.status, body[:300])
    if case.status != 200:
        message = json.loads(body).get('error', '')
        if case.error and case.error not in message:
            return 'error %r does not mention %r' % (message, case.error)
        return ''
    try:
        case.check(decode_outputs(res, body))
    except AssertionError as e:
        return 'wrong answer: %s' % e
    return ''


class SoakTest(unittest.TestCase):
    def test_soak_then_sigterm(self):
        tmp = tempfile.mkdtemp(dir=os.environ.get('TEST_TMPDIR'))
        subprocess.run([ARGS.make_demo_model, tmp], check=True, stdout=subprocess.DEVNULL)
        cmd = [ARGS.kiln_serve, '--port', '0', '--workers', '2', '--threads', '1',
               '--max-queue', '64', '--max-request-bytes', str(MAX_REQUEST_BYTES),
               '--jit-cache', 'off', '--warmup']
        for m in ('affine', 'add', 'spin'):
            cmd += ['--model', '%s=%s/%s.kiln' % (m, tmp, m)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=server_env())
        try:
            port = int(re.search(r'http://[^:]+:(\d+)', proc.stdout.readline()).group(1))
            self.soak(proc, port)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def soak(self, proc, port):
        failures, lock = [], threading.Lock()
        sent = [0]
        warm = threading.Barrier(CONNECTIONS + 1)
        last_sent = threading.Barrier(CONNECTIONS + 1)
        conns = []

        def client(c):
            rng = random.Random(1700 + c)
            conn = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
            conns.append(conn)
            for i in range(REQUESTS_PER_CONNECTION):
                if i == WARMUP_PER_CONNECTION:
                    warm.wait()
                    warm.wait()  # the main thread samples RSS in between
                case = random_case(rng)
                with lock:
                    sent[0] += 1
                problem = run_case(conn, case)
                if problem:
                    with lock:
                        failures.append('connection %d request %d: %s' % (c, i, problem))
            # The last request (a slow one) is read by the server when SIGTERM arrives: it must
            # be answered all the same, and rightly.
            n = rng.randint(200000, 400000)
            body = json.dumps({'inputs': [{'name': 'n', 'datatype': 'INT64', 'shape': [],
                                           'data': [n]}]}).encode()
            with lock:
                sent[0] += 1
            conn.request('POST', '/v2/models/spin/infer', body=body)
            last_sent.wait()
            res = conn.getresponse()
            reply = res.read()
            problem = ''
            if res.status != 200:
                problem = 'HTTP %d %r' % (res.status, reply[:200])
            elif json.loads(reply)['outputs'][0]['data'] != [n * (n - 1) // 2]:
                problem = 'wrong answer %r for n = %d' % (reply[:200], n)
            if problem:
                with lock:
                    failures.append('connection %d, request in flight at SIGTERM: %s' % (c, problem))

        threads = [threading.Thread(target=client, args=(c,)) for c in range(CONNECTIONS)]
        for t in threads:
            t.start()
        warm.wait()
        rss_warm = rss_mb(proc.pid)
        warm.wait()
        last_sent.wait()
        rss_end = rss_mb(proc.pid)
        # SIGTERM once the server has read every last request (each is running, queued or
        # answered), so each must get its answer; the /metrics reads count as requests too.
        metrics = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
        for _ in range(6000):
            sent[0] += 1
            metrics.request('GET', '/metrics')
            page = metrics.getresponse().read().decode()
            seen = sum(float(v) for v in re.findall(
                r'^kiln_inference_(?:in_flight|requests_total)\{model="spin"[^}]*\} (\S+)$', page,
                re.M))
            if seen >= CONNECTIONS:
                break
            time.sleep(0.01)
        metrics.close()
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=120)
        out, _ = proc.communicate(timeout=60)
        self.assertEqual(failures, [])
        print('RSS after warm-up %.1f MB, at the end %.1f MB' % (rss_warm, rss_end))
        self.assertLess(rss_end - rss_warm,
                        RSS_GROWTH_BOUND_MB + (ASAN_QUARANTINE_MB if UNDER_ASAN else 0))
        self.assertEqual(proc.returncode, 0, out)
        served = re.search(r'served (\d+) requests', out)
        self.assertIsNotNone(served, out)
        self.assertEqual(int(served.group(1)), sent[0], out)
        for conn in conns:
            conn.close()


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--kiln-serve', required=True)
    parser.add_argument('--make-demo-model', required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
