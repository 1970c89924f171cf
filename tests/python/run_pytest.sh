#!/usr/bin/env bash
# Runs kiln's Python tests with pytest under the system python3 (the one the module is built
# for, with Debian's numpy, onnx and pytest), importing the package Bazel built.
set -euo pipefail
cd "${TEST_SRCDIR}/kiln"
export PYTHONPATH="$PWD/python:$PWD/tests/python:$PWD/examples/python"
export PYTHONDONTWRITEBYTECODE=1           # the runfiles tree is not ours to write
export XDG_CACHE_HOME="${TEST_TMPDIR}"     # a default JIT cache, if any, stays in the sandbox
exec /usr/bin/python3 -m pytest -q -s -p no:cacheprovider --basetemp="${TEST_TMPDIR}/pytest" \
  tests/python "$@"
