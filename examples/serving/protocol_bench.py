"""Throughput and latency of one model served by kiln_serve over REST JSON, REST binary tensors
and gRPC, from C concurrent connections (threads), in one run. Every reply is checked against a
reference output. Needs Debian's python3 (numpy, grpcio) and protoc + grpc_python_plugin.

  /usr/bin/python3 examples/serving/protocol_bench.py --rest-port 8000 --grpc-port 9000 \
      --model resnet18 --input /work/models/resnet18_input.npy \
      --expect /work/models/resnet18_output.npy --connections 8 --requests 400
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_stubs  # noqa: E402  (beside this file)

HERE = os.path.dirname(os.path.abspath(__file__))


class Rest:
    """One keep-alive connection; binary=True uses the binary tensor extension both ways."""

    def __init__(self, port, model, name, x, binary):
        self.conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
        self.path = '/v2/models/%s/infer' % model
        tensor = {'name': name, 'shape': list(x.shape), 'datatype': 'FP32'}
        if binary:
            tensor['parameters'] = {'binary_data_size': x.nbytes}
            header = json.dumps({'inputs': [tensor],
                                 'parameters': {'binary_data_output': True}}).encode()
            self.body = header + x.tobytes()
            self.headers = {'Inference-Header-Content-Length': str(len(header)),
                            'Content-Type': 'application/octet-stream'}
        else:
            tensor['data'] = x.ravel().tolist()
            self.body = json.dumps({'inputs': [tensor]}).encode()
            self.headers = {'Content-Type': 'application/json'}
        self.binary = binary

    def call(self):
        self.conn.request('POST', self.path, self.body, self.headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError('HTTP %d: %s' % (r.status, data[:300]))
        if self.binary:
            n = int(r.getheader('Inference-Header-Content-Length'))
            out = json.loads(data[:n])['outputs'][0]
            return np.frombuffer(data[n:], np.float32).reshape(out['shape'])
        out = json.loads(data)['outputs'][0]
        return np.array(out['data'], np.float32).reshape(out['shape'])


class Grpc:
    def __init__(self, stubs, port, model, name, x):
        grpc, pb, pb_grpc = stubs
        self.channel = grpc.insecure_channel('127.0.0.1:%d' % port)
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)
        self.req = pb.ModelInferRequest(model_name=model)
        self.req.inputs.add(name=name, datatype='FP32', shape=list(x.shape))
        self.req.raw_input_contents.append(x.tobytes())

    def call(self):
        resp = self.stub.ModelInfer(self.req, timeout=120)
        return np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(
            tuple(resp.outputs[0].shape))


def run(clients, requests, expect):
    for c in clients:  # warm: connections open, kernels compiled
        check(c.call(), expect)
    latencies = []
    lock = threading.Lock()
    counter = [0]

    def worker(client):
        mine = []
        while True:
            with lock:
                if counter[0] >= requests:
                    break
                counter[0] += 1
            t = time.perf_counter()
            out = client.call()
            mine.append(time.perf_counter() - t)
            check(out, expect)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    lat = np.array(latencies) * 1000
    return len(lat) / wall, np.percentile(lat, 50), np.percentile(lat, 99)


def check(out, expect):
    if expect is None:
        return
    ref = np.broadcast_to(expect, out.shape) if expect.shape[0] == 1 else expect
    tol = 1e-3 * max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(out - ref).max())
    if err > tol:
        raise RuntimeError('reply differs from the reference by %g (tolerance %g)' % (err, tol))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--rest-port', type=int, required=True)
    p.add_argument('--grpc-port', type=int)
    p.add_argument('--model', required=True)
    p.add_argument('--input-name', default='input')
    p.add_argument('--input', required=True, help='.npy input (batch 1)')
    p.add_argument('--expect', help='.npy reference output')
    p.add_argument('--batch', type=int, default=1, help='rows per request (input repeated)')
    p.add_argument('--connections', type=int, default=8)
    p.add_argument('--requests', type=int, default=200)
    p.add_argument('--protocols', default='json,binary,grpc')
    p.add_argument('--proto', default=os.path.join(HERE, 'grpc_predict_v2.proto'))
    a = p.parse_args()
    x = np.load(a.input).astype(np.float32)
    x = np.ascontiguousarray(np.repeat(x, a.batch, axis=0))
    expect = np.load(a.expect).astype(np.float32) if a.expect else None
    if expect is not None:
        expect = np.repeat(expect, a.batch, axis=0)
    stubs = grpc_stubs.load(a.proto) if 'grpc' in a.protocols else None
    print('%-12s %10s %10s %10s' % ('protocol', 'req/s', 'p50 ms', 'p99 ms'))
    for proto in a.protocols.split(','):
        if proto == 'grpc':
            clients = [Grpc(stubs, a.grpc_port, a.model, a.input_name, x)
                       for _ in range(a.connections)]
        else:
            clients = [Rest(a.rest_port, a.model, a.input_name, x, proto == 'binary')
                       for _ in range(a.connections)]
        rps, p50, p99 = run(clients, a.requests, expect)
        print('%-12s %10.1f %10.2f %10.2f' % (proto, rps, p50, p99), flush=True)


if __name__ == '__main__':
    main()
