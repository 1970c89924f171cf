"""A real KServe v2 gRPC client against kiln_serve: Python grpcio with stubs that protoc and
grpc_python_plugin generate from the same grpc_predict_v2.proto the server is built from.

Covers ServerLive, ServerReady, ServerMetadata, ModelReady, ModelMetadata, ModelInfer with raw
and typed contents, RepositoryIndex / RepositoryModelLoad / RepositoryModelUnload, and the error codes INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED and
DEADLINE_EXCEEDED (server-side: the invoke timeout, not the client's deadline).
"""
import argparse
import concurrent.futures
import importlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import numpy as np

ARGS = None
pb = None      # grpc_predict_v2_pb2
pb_grpc = None  # grpc_predict_v2_pb2_grpc
grpc = None

# kiln_serve runs with two workers, no queue, a 2 s invoke timeout and a 64 KiB message limit,
# so the overload, deadline and size tests need no large inputs or long waits. Tests that keep
# workers busy wait until both are idle again before they end, so the next test starts with
# both workers free. Tensors of one request are capped at MAX_REQUEST_BYTES.
INVOKE_TIMEOUT_MS = 2000
MAX_BYTES = 64 * 1024
MAX_REQUEST_BYTES = 48 * 1024


def generate_stubs(proto, out_dir):
    # grpc_stubs.py sits beside the .proto (examples/serving).
    sys.path.insert(0, os.path.dirname(os.path.abspath(proto)))
    global pb, pb_grpc, grpc
    grpc, pb, pb_grpc = importlib.import_module('grpc_stubs').load(proto, out_dir)


class Server:
    """kiln_serve on ephemeral REST and gRPC ports; ports read from its start-up lines."""

    def __init__(self, tmp):
        subprocess.run([ARGS.make_demo_model, tmp], check=True, stdout=subprocess.DEVNULL)
        cmd = [ARGS.kiln_serve, '--port', '0', '--grpc-port', '0', '--workers', '2',
               '--max-queue', '0', '--invoke-timeout-ms', str(INVOKE_TIMEOUT_MS),
               '--max-body-bytes', str(MAX_BYTES), '--max-request-bytes',
               str(MAX_REQUEST_BYTES), '--threads', '1', '--warmup',
               '--jit-cache', 'off']
        for m in ('affine', 'spin', 'add'):
            cmd += ['--model', '%s=%s/%s.kiln' % (m, tmp, m)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline()
        second = self.proc.stdout.readline()
        rest = re.search(r'http://[^:]+:(\d+)', first)
        grpc_port = re.search(r'gRPC on [^ ]+:(\d+)', second)
        if not rest or not grpc_port:
            self.stop()
            raise RuntimeError('kiln_serve did not start: %r %r' % (first, second))
        self.rest_port = int(rest.group(1))
        self.grpc_port = int(grpc_port.group(1))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=60)
        return self.proc.returncode


def raw_input(name, array, datatype):
    t = pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype,
                                              shape=list(array.shape))
    return t, np.ascontiguousarray(array).tobytes()


def output_array(resp, index, dtype):
    out = resp.outputs[index]
    return np.frombuffer(resp.raw_output_contents[index], dtype=dtype).reshape(tuple(out.shape))


class GrpcTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get('TEST_TMPDIR'))
        generate_stubs(ARGS.proto, cls.tmp)
        cls.server = Server(cls.tmp)
        cls.channel = grpc.insecure_channel('127.0.0.1:%d' % cls.server.grpc_port)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.server.stop() == 0

    def assertCode(self, code, fn, *args, **kwargs):
        with self.assertRaises(grpc.RpcError) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception.details()

    def affine_request(self, x, b, raw=True):
        req = pb.ModelInferRequest(model_name='affine', id='req-7')
        if raw:
            for name, arr in (('x', x), ('b', b)):
                t, data = raw_input(name, arr, 'FP32')
                req.inputs.append(t)
                req.raw_input_contents.append(data)
        else:
            for name, arr in (('x', x), ('b', b)):
                t = req.inputs.add(name=name, datatype='FP32', shape=list(arr.shape))
                t.contents.fp32_contents.extend(arr.ravel().tolist())
        return req

    def test_health(self):
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest()).ready)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name='affine')).ready)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name='affine', version='1')).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name='nope')).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name='affine', version='9')).ready)

    def test_server_metadata(self):
        meta = self.stub.ServerMetadata(pb.ServerMetadataRequest())
        self.assertEqual(meta.name, 'kiln')
        self.assertIn('binary_tensor_data', list(meta.extensions))

    def test_model_metadata(self):
        meta = self.stub.ModelMetadata(pb.ModelMetadataRequest(name='affine'))
        self.assertEqual(meta.name, 'affine')
        self.assertEqual(list(meta.versions), ['1'])
        self.assertEqual(meta.platform, 'kiln')
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in meta.inputs],
                         [('x', 'FP32', [-1, 4]), ('b', 'FP32', [4])])
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in meta.outputs],
                         [('y', 'FP32', [-1, 4]), ('s', 'FP32', [-1])])
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.stub.ModelMetadata,
                        pb.ModelMetadataRequest(name='nope'))
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.stub.ModelMetadata,
                        pb.ModelMetadataRequest(name='affine', version='2'))

    def check_affine(self, resp, x, b):
        self.assertEqual(resp.model_name, 'affine')
        self.assertEqual(resp.model_version, '1')
        self.assertEqual(resp.id, 'req-7')
        self.assertEqual([o.name for o in resp.outputs], ['y', 's'])
        self.assertEqual([o.datatype for o in resp.outputs], ['FP32', 'FP32'])
        # y = x + b and s = row sums of x, computed in float32 like the kernels (exact here:
        # the inputs are small dyadic rationals).
        np.testing.assert_array_equal(output_array(resp, 0, np.float32), x + b)
        np.testing.assert_array_equal(output_array(resp, 1, np.float32), x.sum(axis=1))

    def test_infer_raw(self):
        x = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 4
        b = np.array([0.5, -1, 2, 0.25], dtype=np.float32)
        self.check_affine(self.stub.ModelInfer(self.affine_request(x, b)), x, b)

    def test_infer_typed(self):
        x = np.array([[1, 2, 3, 4], [5, 6, 7, 8.5]], dtype=np.float32)
        b = np.array([0.125, 0.25, 0.5, 1], dtype=np.float32)
        self.check_affine(self.stub.ModelInfer(self.affine_request(x, b, raw=False)), x, b)
        # INT64 typed contents, a scalar; outputs come back raw.
        req = pb.ModelInferRequest(model_name='spin')
        req.inputs.add(name='n', datatype='INT64', shape=[]).contents.int64_contents.append(1000)
        resp = self.stub.ModelInfer(req)
        self.assertEqual(output_array(resp, 0, np.int64).item(), 1000 * 999 // 2)

    def test_infer_selected_output_and_version(self):
        x = np.ones((1, 4), dtype=np.float32)
        b = np.zeros(4, dtype=np.float32)
        req = self.affine_request(x, b)
        req.model_version = '1'
        req.outputs.add(name='s')
        resp = self.stub.ModelInfer(req)
        self.assertEqual([o.name for o in resp.outputs], ['s'])
        np.testing.assert_array_equal(output_array(resp, 0, np.float32), [4.0])

    def test_invalid_argument(self):
        x = np.ones((2, 4), dtype=np.float32)
        b = np.zeros(4, dtype=np.float32)
        cases = []
        req = self.affine_request(x, b)
        req.inputs[0].datatype = 'FP64'
        cases.append((req, 'datatype FP64 but the model expects FP32'))
        req = self.affine_request(x, b)
        req.inputs[0].shape[:] = [2, 3]
        cases.append((req, 'contradicts'))
        req = self.affine_request(x, b)
        req.raw_input_contents[0] = req.raw_input_contents[0][:-4]
        cases.append((req, 'bytes of data'))
        req = self.affine_request(x, b)
        del req.inputs[1]
        del req.raw_input_contents[1]
        cases.append((req, "missing input 'b'"))
        req = self.affine_request(x, b)
        req.inputs[1].name = 'x'
        cases.append((req, 'given more than once'))
        req = self.affine_request(x, b)
        req.outputs.add(name='z')
        cases.append((req, "unknown output 'z'"))
        req = self.affine_request(x, b, raw=False)
        del req.inputs[0].contents.fp32_contents[-1]
        cases.append((req, 'elements'))
        req = self.affine_request(x, b)
        del req.raw_input_contents[1]
        cases.append((req, 'raw_input_contents for 2 inputs'))
        # Symbolic dim n of add's inputs must agree (checked by the VM at Invoke).
        req = pb.ModelInferRequest(model_name='add')
        for name, n in (('a', 3), ('b', 2)):
            t, data = raw_input(name, np.zeros(n, dtype=np.float32), 'FP32')
            req.inputs.append(t)
            req.raw_input_contents.append(data)
        cases.append((req, 'add'))
        for req, needle in cases:
            details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.stub.ModelInfer, req)
            self.assertIn(needle, details)

    def test_not_found(self):
        req = self.affine_request(np.ones((1, 4), np.float32), np.ones(4, np.float32))
        req.model_name = 'nope'
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.stub.ModelInfer, req)
        req.model_name = 'affine'
        req.model_version = '3'
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.stub.ModelInfer, req)

    def test_message_too_large(self):
        x = np.zeros((MAX_BYTES // 16 + 1, 4), dtype=np.float32)  # just over the limit
        req = self.affine_request(x, np.zeros(4, np.float32))
        self.assertCode(grpc.StatusCode.RESOURCE_EXHAUSTED, self.stub.ModelInfer, req)

    def test_request_tensors_too_large(self):
        limit = '%d bytes (--max-request-bytes)' % MAX_REQUEST_BYTES
        # Raw: x (32,000 bytes) fits, but with the y and s it implies the request would hold
        # 72,016 bytes; refused before invoking.
        x = np.zeros((2000, 4), dtype=np.float32)
        details = self.assertCode(grpc.StatusCode.RESOURCE_EXHAUSTED, self.stub.ModelInfer,
                                  self.affine_request(x, np.zeros(4, np.float32)))
        self.assertIn('the inputs and the outputs they imply are 72016 bytes', details)
        self.assertIn(limit, details)
        # Typed: a declared shape over the limit, refused before its contents are read.
        req = self.affine_request(np.ones((1, 4), np.float32), np.ones(4, np.float32), raw=False)
        req.inputs[0].shape[:] = [1 << 40, 4]
        details = self.assertCode(grpc.StatusCode.RESOURCE_EXHAUSTED, self.stub.ModelInfer, req)
        self.assertIn("inputs[0] 'x': shape [1099511627776, 4] makes the inputs", details)
        self.assertIn(limit, details)
        # Under the limit: served.
        x = np.ones((2, 4), dtype=np.float32)
        b = np.zeros(4, dtype=np.float32)
        self.check_affine(self.stub.ModelInfer(self.affine_request(x, b)), x, b)

    def index(self, ready=False):
        resp = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=ready))
        return {m.name: (m.version, m.state) for m in resp.models}

    def test_repository_rpcs(self):
        # The model repository extension over gRPC, on 'add' (served again at the end, so the
        # other tests find it).
        self.assertEqual(self.index()['affine'], ('1', 'READY'))
        before = int(self.index()['add'][0])
        self.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name='add'))
        self.assertEqual(self.index()['add'], (str(before + 1), 'READY'))
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name='add',
                                                                  version=str(before + 1))).ready)
        self.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name='add'))
        self.assertEqual(self.index()['add'][1], 'UNAVAILABLE')
        self.assertNotIn('add', self.index(ready=True))
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name='add')).ready)
        x = np.ones(3, np.float32)
        req = pb.ModelInferRequest(model_name='add')
        for name in ('a', 'b'):
            t, data = raw_input(name, x, 'FP32')
            req.inputs.append(t)
            req.raw_input_contents.append(data)
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.stub.ModelInfer, req)
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.stub.RepositoryModelUnload,
                        pb.RepositoryModelUnloadRequest(model_name='add'))
        self.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name='add'))
        self.assertEqual(self.index(ready=True)['add'], (str(before + 2), 'READY'))
        resp = self.stub.ModelInfer(req)
        np.testing.assert_array_equal(output_array(resp, 0, np.float32), x + x)
        # Errors: unknown model, another repository, parameters.
        self.assertIn("no model 'nope'", self.assertCode(
            grpc.StatusCode.NOT_FOUND, self.stub.RepositoryModelLoad,
            pb.RepositoryModelLoadRequest(model_name='nope')))
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.stub.RepositoryIndex,
                        pb.RepositoryIndexRequest(repository_name='other'))
        load = pb.RepositoryModelLoadRequest(model_name='add')
        load.parameters['config'].string_param = '{}'
        self.assertIn('takes no parameters',
                      self.assertCode(grpc.StatusCode.INVALID_ARGUMENT,
                                      self.stub.RepositoryModelLoad, load))

    def spin_request(self, n):
        req = pb.ModelInferRequest(model_name='spin')
        req.inputs.add(name='n', datatype='INT64', shape=[]).contents.int64_contents.append(n)
        return req

    def busy_workers(self):
        url = 'http://127.0.0.1:%d/metrics' % self.server.rest_port
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        return int(re.search(r'^kiln_busy_workers (\d+)$', text, re.M).group(1))

    def wait_busy_workers(self, want):
        deadline = time.monotonic() + 20
        while self.busy_workers() != want and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertEqual(self.busy_workers(), want)

    def test_deadline_exceeded_by_the_invoke_timeout(self):
        # No client deadline: DEADLINE_EXCEEDED can only come from the server's invoke timeout.
        details = self.assertCode(grpc.StatusCode.DEADLINE_EXCEEDED, self.stub.ModelInfer,
                                  self.spin_request(10**15))
        self.assertIn('spin', details)
        self.wait_busy_workers(0)

    def test_resource_exhausted_when_the_queue_is_full(self):
        # Both workers busy and no queue: another request is refused at once.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            long_calls = [pool.submit(self.stub.ModelInfer, self.spin_request(10**15))
                          for _ in range(2)]
            self.wait_busy_workers(2)
            req = self.affine_request(np.ones((1, 4), np.float32), np.ones(4, np.float32))
            details = self.assertCode(grpc.StatusCode.RESOURCE_EXHAUSTED, self.stub.ModelInfer,
                                      req)
            self.assertIn('queue is full', details)
            for call in long_calls:
                with self.assertRaises(grpc.RpcError):
                    call.result()
        self.wait_busy_workers(0)

    def test_metrics_count_grpc_requests(self):
        x = np.ones((1, 4), np.float32)
        self.stub.ModelInfer(self.affine_request(x, np.zeros(4, np.float32)))
        url = 'http://127.0.0.1:%d/metrics' % self.server.rest_port
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        m = re.search(r'^kiln_inference_requests_total\{model="affine",protocol="grpc",'
                      r'status="OK"\} (\d+)$', text, re.M)
        self.assertIsNotNone(m, text)
        self.assertGreaterEqual(int(m.group(1)), 1)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--kiln-serve', required=True)
    parser.add_argument('--make-demo-model', required=True)
    parser.add_argument('--proto', required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
