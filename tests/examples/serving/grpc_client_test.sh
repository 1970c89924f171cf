#!/usr/bin/env bash
# Runs grpc_client_test.py with Debian's python3 (grpcio, numpy), which the pyenv shim on PATH
# may lack. Arguments: kiln_serve, make_demo_model, the .proto, the test script.
set -euo pipefail
exec /usr/bin/python3 "$4" --kiln-serve "$1" --make-demo-model "$2" --proto "$3"
