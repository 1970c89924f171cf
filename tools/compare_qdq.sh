#!/usr/bin/env bash
# int8 vs f32 in kiln beside ONNX Runtime int8, on QDQ models tools/make_qdq.py writes from the
# benchmark models (issue 18): same machine, 1 and 2 threads, alternating runs (ROUNDS rounds,
# default 3); medians in ms and the summary table (median over rounds; ratios to kiln int8).
# kiln: `kiln bench` p50; ORT: bench_ort.js (../shared/peers) median. Prerequisites as
# tools/compare_ort.sh (onnxruntime-node in /tmp/ort, the models in /work/models).
# Usage: tools/compare_qdq.sh [MODELS_DIR] [OUT_DIR]   (default /work/models, /tmp/kiln-qdq)
set -uo pipefail
cd "$(dirname "$0")/.."
models=${1:-/work/models}
out=${2:-/tmp/kiln-qdq}
ort_js=${ORT_BENCH_JS:-../shared/peers/bench_ort.js}
export NODE_PATH=${NODE_PATH:-/tmp/ort/node_modules}
mkdir -p "$out"
bazel build --jobs=2 //tools:kiln //python:kiln >/dev/null 2>&1 || { echo "build failed"; exit 1; }
K=bazel-bin/tools/kiln
for m in resnet18 resnet50 bert_tiny; do
  if [[ ! -f $out/${m}_qdq.onnx ]]; then
    dims=()  # a pin must name a dim the model has (the importer rejects one that matches none)
    [[ $m == bert_tiny ]] && dims=(--dim seq=64)
    PYTHONPATH=bazel-bin/python /usr/bin/python3 tools/make_qdq.py "$models/$m.onnx" \
      "$out/${m}_qdq.onnx" "${dims[@]}" || exit 1
  fi
  $K compile "$models/$m.onnx" -o "$out/$m.kiln" --quiet >/dev/null || exit 1
  $K compile "$out/${m}_qdq.onnx" -o "$out/${m}_qdq.kiln" --quiet >/dev/null || exit 1
done
rounds=${ROUNDS:-3}
p50() { $K bench "$@" --json 2>/dev/null | tail -1 | sed -E 's/.*"p50_ms": ([0-9.]+).*/\1/'; }
ort() { node "$ort_js" "$@" --warmup 5 2>/dev/null | grep '^JSON' |
        sed -E 's/.*"median":([0-9.]+).*/\1/'; }
run() {  # name model dims ort-shape threads iters
  for round in $(seq "$rounds"); do
    f=$(p50 "$out/$2.kiln" $3 --threads "$5" --iters "$6")
    q=$(p50 "$out/$2_qdq.kiln" $3 --threads "$5" --iters "$6")
    o=$(ort "$out/$2_qdq.onnx" --shape "$4" --threads "$5" --iters "$6")
    echo "$1 threads=$5 round=$round kiln_f32=$f kiln_int8=$q ort_int8=$o"
  done
}
{
for t in 1 2; do
  run resnet18 resnet18 "--dim batch=1" 1x3x224x224 $t 20
  run resnet50 resnet50 "--dim batch=1" 1x3x224x224 $t 10
  run bert_seq64 bert_tiny "--dim batch=1 --dim seq=64" 1x64 $t 50
done
} | tee "$out/rounds.txt"
echo
echo "model threads kiln_f32 kiln_int8 ort_int8 f32/int8 ort/int8 (ms, medians over $rounds rounds; load $(cut -d' ' -f1-3 /proc/loadavg))"
awk '{ key = $1 " " substr($2, 9); if (!(key in n)) order[++m] = key; c = ++n[key];
       for (i = 4; i <= 6; i++) { split($i, kv, "="); V[key, i, c] = kv[2] + 0 } }
     function med(key, col, c,   i, j, v, tmp) {
       for (i = 1; i <= c; i++) v[i] = V[key, col, i]
       for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
       return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2 }
     END { for (k = 1; k <= m; k++) { key = order[k]; f = med(key, 4, n[key]); q = med(key, 5, n[key]);
           o = med(key, 6, n[key]); printf "%s %.3f %.3f %.3f %.2f %.2f\n", key, f, q, o,
           (q > 0 ? f / q : 0), (q > 0 ? o / q : 0) } }' "$out/rounds.txt"
