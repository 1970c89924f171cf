#!/usr/bin/env bash
# Regenerates tests/zoo/data: each case's graph (its zoo model with float weights stripped to
# their ranges) and ONNX Runtime's output on the refilled model and seeded input.
#   tests/zoo/make_refs.sh ZOO_DIR      (ZOO_DIR from ../shared/models/gen_zoo.py; needs node and
#                                        onnxruntime-node, ORT_NODE=its directory if not /tmp/ort)
set -euo pipefail
zoo=${1:?usage: tests/zoo/make_refs.sh ZOO_DIR}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
bazel build --jobs=2 //tests/zoo:zoo_weights
tool=bazel-bin/tests/zoo/zoo_weights
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v '^#' tests/zoo/data/cases.txt | while read -r name input _; do
  [[ -n "$name" ]] || continue
  "$tool" strip "$zoo/$name.onnx" "tests/zoo/data/$name.graph.onnx"
done
"$tool" make tests/zoo/data "$tmp"
grep -v '^#' tests/zoo/data/cases.txt | while read -r name input _; do
  [[ -n "$name" ]] || continue
  node tests/zoo/ort_run.js "$tmp/$name.onnx" "$input" "$tmp/$name.in.npy" "tests/zoo/data/$name.ref.npy"
  echo "$name: reference written"
done
