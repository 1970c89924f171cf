#!/usr/bin/env bash
# Runs the Python examples as `bazel test` does: writes the demo models and their references,
# then classifies with the resnet-like model and sweeps the encoder, each checked against its
# reference (an example exits 1 on a mismatch).
set -euo pipefail
cd "${TEST_SRCDIR}/kiln"
export PYTHONPATH="$PWD/python:$PWD/examples/python"
export PYTHONDONTWRITEBYTECODE=1           # the runfiles tree is not ours to write
export XDG_CACHE_HOME="${TEST_TMPDIR}"     # the JIT cache stays in the sandbox
out="${TEST_TMPDIR}/models"
py=/usr/bin/python3
$py examples/python/demo_models.py "$out"
$py examples/python/classify.py "$out/classifier.onnx" --threads 1 --runs 3 \
  --input "$out/classifier_input.npy" --reference "$out/classifier_output.npy"
$py examples/python/encoder.py "$out/encoder.onnx" --seqs 1,8,24,64 --runs 3 --parallel 4 \
  --input "$out/encoder_input.npy" --reference "$out/encoder_output.npy"
