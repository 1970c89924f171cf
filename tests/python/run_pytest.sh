#!/usr/bin/env bash
# Runs kiln's Python tests with pytest under the system python3 (the one the module is built
# for, with Debian's numpy, onnx and pytest), importing the package Bazel built.
set -euo pipefail
cd "${TEST_SRCDIR}/kiln"
export PYTHONPATH="$PWD/tests/python:$PWD/examples/python"
source python/test_env.sh
exec "$KILN_PYTHON" -m pytest -q -s -p no:cacheprovider --basetemp="${TEST_TMPDIR}/pytest" \
  tests/python "$@"
