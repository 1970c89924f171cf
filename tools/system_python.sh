#!/usr/bin/env bash
# Runs a Python test with Debian's /usr/bin/python3 (numpy, grpcio, yaml from tools/setup.sh):
# the python3 first on PATH may be another interpreter without them. Arguments: the script, then
# its arguments.
set -euo pipefail
exec /usr/bin/python3 "$@"
