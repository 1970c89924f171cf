"""deploy/ names what kiln_serve really serves: the KServe manifests parse (PyYAML), agree with
each other and with the Dockerfile on ports, and kiln_serve started with the ServingRuntime's own
arguments answers the probe and Prometheus paths they name (ports made ephemeral, the model
path pointed at a demo model)."""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.request

import yaml

ARGS = None


def load(name):
    with open(os.path.join(ARGS.deploy, name)) as f:
        return yaml.safe_load(f)


def flag(args, name):
    i = args.index(name)
    return args[i + 1]


class ManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runtime = load('kserve/servingruntime.yaml')
        cls.isvc = load('kserve/inferenceservice.yaml')
        cls.container = cls.runtime['spec']['containers'][0]
        cls.args = [str(a) for a in cls.container['args']]
        cls.http_port = int(flag(cls.args, '--port'))
        cls.grpc_port = int(flag(cls.args, '--grpc-port'))

    def test_kinds(self):
        self.assertEqual(self.runtime['apiVersion'], 'serving.kserve.io/v1alpha1')
        self.assertEqual(self.runtime['kind'], 'ServingRuntime')
        self.assertEqual(self.isvc['apiVersion'], 'serving.kserve.io/v1beta1')
        self.assertEqual(self.isvc['kind'], 'InferenceService')

    def test_ports_and_probes_agree(self):
        self.assertEqual(flag(self.args, '--host'), '0.0.0.0')
        self.assertEqual([p['containerPort'] for p in self.container['ports']], [self.http_port])
        self.assertEqual(self.container['readinessProbe']['httpGet'],
                         {'path': '/v2/health/ready', 'port': self.http_port})
        self.assertEqual(self.container['livenessProbe']['httpGet'],
                         {'path': '/v2/health/live', 'port': self.http_port})
        for annotations in (self.runtime['metadata']['annotations'],
                            self.runtime['spec']['annotations']):
            self.assertEqual(int(annotations['prometheus.kserve.io/port']), self.http_port)
            self.assertEqual(annotations['prometheus.kserve.io/path'], '/metrics')
        a = self.isvc['metadata']['annotations']
        self.assertEqual(a['serving.kserve.io/enable-prometheus-scraping'], 'true')
        self.assertEqual(a['prometheus.io/scrape'], 'true')
        self.assertEqual(int(a['prometheus.io/port']), self.http_port)
        self.assertEqual(a['prometheus.io/path'], '/metrics')

    def test_inference_service_uses_the_runtime(self):
        model = self.isvc['spec']['predictor']['model']
        self.assertEqual(model['runtime'], self.runtime['metadata']['name'])
        self.assertEqual(model['protocolVersion'], 'v2')
        self.assertIn('v2', self.runtime['spec']['protocolVersions'])
        self.assertIn('grpc-v2', self.runtime['spec']['protocolVersions'])
        formats = [f['name'] for f in self.runtime['spec']['supportedModelFormats']]
        self.assertIn(model['modelFormat']['name'], formats)

    def test_dockerfile_exposes_the_ports(self):
        with open(os.path.join(ARGS.deploy, 'Dockerfile')) as f:
            text = f.read()
        exposed = re.search(r'^EXPOSE (.+)$', text, re.M).group(1).split()
        self.assertEqual(sorted(int(p) for p in exposed), sorted([self.http_port, self.grpc_port]))
        self.assertIn('tools/setup.sh', text)
        self.assertIn('//examples/serving:kiln_serve', text)
        self.assertRegex(text, r'ENTRYPOINT \["/usr/local/bin/kiln_serve"\]')

    def test_kiln_serve_serves_the_named_paths(self):
        tmp = tempfile.mkdtemp(dir=os.environ.get('TEST_TMPDIR'))
        subprocess.run([ARGS.make_demo_model, tmp], check=True, stdout=subprocess.DEVNULL)
        args = []
        for a in self.args:
            a = a.replace('{{.Name}}', 'resnet18').replace('/mnt/models/model.kiln',
                                                            os.path.join(tmp, 'affine.kiln'))
            args.append(a)
        # Same flags, but loopback and ephemeral ports (the fixed ones may be taken here).
        args[args.index('--host') + 1] = '127.0.0.1'
        args[args.index('--port') + 1] = '0'
        args[args.index('--grpc-port') + 1] = '0'
        proc = subprocess.Popen([ARGS.kiln_serve] + args + ['--jit-cache', 'off'],
                                stdout=subprocess.PIPE, text=True)
        try:
            first, second = proc.stdout.readline(), proc.stdout.readline()
            port = int(re.search(r'http://[^:]+:(\d+)', first).group(1))
            self.assertRegex(second, r'gRPC on 127\.0\.0\.1:\d+')
            base = 'http://127.0.0.1:%d' % port
            for probe in ('readinessProbe', 'livenessProbe'):
                path = self.container[probe]['httpGet']['path']
                with urllib.request.urlopen(base + path, timeout=10) as r:
                    self.assertEqual(r.status, 200, path)
            path = self.runtime['metadata']['annotations']['prometheus.kserve.io/path']
            with urllib.request.urlopen(base + path, timeout=10) as r:
                self.assertIn('kiln_inference_queue_depth', r.read().decode())
            with urllib.request.urlopen(base + '/v2/models/resnet18', timeout=10) as r:
                self.assertEqual(r.status, 200)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--dockerfile', required=True)
    parser.add_argument('--kiln-serve', required=True)
    parser.add_argument('--make-demo-model', required=True)
    ARGS, rest = parser.parse_known_args()
    ARGS.deploy = os.path.dirname(ARGS.dockerfile)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
