#!/usr/bin/env bash
# Runs the Python examples as `bazel test` does: writes the demo models and their references,
# then classifies with the resnet-like model and sweeps the encoder, each checked against its
# reference (an example exits 1 on a mismatch).
set -euo pipefail
cd "${TEST_SRCDIR}/kiln"
export PYTHONPATH="$PWD/examples/python"
source python/test_env.sh
out="${TEST_TMPDIR}/models"
"$KILN_PYTHON" examples/python/demo_models.py "$out"
"$KILN_PYTHON" examples/python/classify.py "$out/classifier.onnx" --threads 1 --runs 3 \
  --input "$out/classifier_input.npy" --reference "$out/classifier_output.npy"
"$KILN_PYTHON" examples/python/encoder.py "$out/encoder.onnx" --seqs 1,8,24,64 --runs 3 \
  --parallel 4 --input "$out/encoder_input.npy" --reference "$out/encoder_output.npy"
