"""Python stubs for kiln_serve's KServe v2 gRPC protocol, generated from grpc_predict_v2.proto
by Debian's protoc and grpc_python_plugin (protobuf-compiler-grpc) into a temporary folder, so
no generated code is checked in and it always matches the server's .proto."""
import importlib
import os
import subprocess
import sys
import tempfile


def load(proto, out_dir=None):
    """Returns the modules (grpc, grpc_predict_v2_pb2, grpc_predict_v2_pb2_grpc)."""
    out_dir = out_dir or tempfile.mkdtemp()
    proto_dir, name = os.path.split(os.path.abspath(proto))
    subprocess.run(['/usr/bin/protoc', '-I' + proto_dir, '--python_out=' + out_dir,
                    '--grpc_python_out=' + out_dir,
                    '--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin', name],
                   check=True)
    sys.path.insert(0, out_dir)
    return (importlib.import_module('grpc'), importlib.import_module('grpc_predict_v2_pb2'),
            importlib.import_module('grpc_predict_v2_pb2_grpc'))
