#!/usr/bin/env bash
# kiln beside ONNX Runtime on the benchmark models, same machine, same thread count, alternating
# runs (ROUNDS rounds each, default 5), medians in ms; a summary table at the end (the median of
# each side over the rounds, and their ratio). Prerequisites (outside the repository, see
# ../shared/peers/README.md and ../shared/models/README.md):
#   ONNX Runtime: mkdir -p /tmp/ort && cd /tmp/ort && npm init -y && \
#                 ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node@1.30.0
#   models:       /usr/bin/python3 ../shared/models/gen_models.py /work/models
# Usage: tools/compare_ort.sh [MODELS_DIR] [OUT_DIR]   (default /work/models, /tmp/kiln-vs-ort)
set -uo pipefail
cd "$(dirname "$0")/.."
models=${1:-/work/models}
out=${2:-/tmp/kiln-vs-ort}
ort_js=${ORT_BENCH_JS:-../shared/peers/bench_ort.js}
export NODE_PATH=${NODE_PATH:-/tmp/ort/node_modules}
mkdir -p "$out"
bazel build --jobs=2 //tools:kiln >/dev/null 2>&1 || { echo "build failed"; exit 1; }
K=bazel-bin/tools/kiln
for m in resnet18 resnet50 mobilenet_v2 bert_tiny mlp; do
  $K compile "$models/$m.onnx" -o "$out/$m.kiln" --quiet >/dev/null || exit 1
done
rounds=${ROUNDS:-5}
run() {  # name kiln-file onnx kiln-shapes ort-shape threads iters
  for round in $(seq "$rounds"); do
    # kiln's default warm-up (8 runs) is what gets every shape specialized; ORT gets 5.
    k=$($K bench "$2" $4 --threads "$6" --iters "$7" --json 2>/dev/null | tail -1 |
        sed -E 's/.*"p50_ms": ([0-9.]+).*/\1/')
    o=$(node "$ort_js" "$3" --shape "$5" --threads "$6" --iters "$7" --warmup 5 2>/dev/null |
        grep '^JSON' | sed -E 's/.*"median":([0-9.]+).*/\1/')
    echo "$1 threads=$6 round=$round kiln_ms=$k ort_ms=$o"
  done
}
{
for t in 1 2; do
  run resnet18 "$out/resnet18.kiln" "$models/resnet18.onnx" "--dim batch=1" 1x3x224x224 $t 30
  run resnet50 "$out/resnet50.kiln" "$models/resnet50.onnx" "--dim batch=1" 1x3x224x224 $t 15
  run mobilenet_v2 "$out/mobilenet_v2.kiln" "$models/mobilenet_v2.onnx" "--dim batch=1" 1x3x224x224 $t 50
  for s in 16 128 256; do
    run bert_seq$s "$out/bert_tiny.kiln" "$models/bert_tiny.onnx" "--dim batch=1 --dim seq=$s" 1x$s $t 50
  done
  run mlp_b1 "$out/mlp.kiln" "$models/mlp.onnx" "--dim batch=1" 1x784 $t 200
  run mlp_b64 "$out/mlp.kiln" "$models/mlp.onnx" "--dim batch=64" 64x784 $t 100
done
} | tee "$out/rounds.txt"
echo
echo "model threads kiln_ms ort_ms ratio (medians over $rounds rounds)"
awk '{ split($2, t, "="); split($4, k, "="); split($5, o, "="); key = $1 " " t[2];
       if (!(key in n)) order[++m] = key; n[key]++; K[key, n[key]] = k[2]; O[key, n[key]] = o[2] }
     function med(a, key, c,   i, j, v, tmp) {
       for (i = 1; i <= c; i++) v[i] = a[key, i] + 0
       for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
       return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2 }
     END { for (i = 1; i <= m; i++) { key = order[i]; km = med(K, key, n[key]); om = med(O, key, n[key]);
           printf "%s %.3f %.3f %.2f\n", key, km, om, (om > 0 ? km / om : 0) } }' "$out/rounds.txt"
