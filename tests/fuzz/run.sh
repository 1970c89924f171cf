#!/usr/bin/env bash
# Bounded libFuzzer runs over every fuzz target, each for SECONDS:
#   load_fuzzer    load + verify + bind (JIT kernel payloads, oneDNN regions) + inspect +
#                  disassemble, on seeds written by make_seeds (every opcode and table) and
#                  make_model_seeds (ONNX models compiled by kiln: real kernel IR and regions);
#   npy_fuzzer     ParseNpy and its encode/parse round trip, on a few .npy images written here;
#   region_fuzzer  the oneDNN region blob decoder and its re-encode check (no seeds);
#   kernel_compile_fuzzer  load, then compile (first tier; O3 for one input in eight) up to four
#                  kernels and shape functions of what loads: kernel IR -> LLVM IR -> machine
#                  code, on the compiled seeds of make_model_seeds plus a few conformance models.
#
#   tests/fuzz/run.sh [SECONDS]      (default 60, per fuzzer)
#
# Builds the seed writers with the normal config and the fuzzers with --config=fuzz (clang-14,
# libFuzzer + ASan) in an output base of its own ($KILN_FUZZ_OUTPUT_BASE, default
# ~/.cache/kiln-fuzz-bazel), fuzzes temporary copies of the seeds, and prints libFuzzer's stats
# lines per fuzzer. Exits non-zero if any fuzzer found a crash, leak, timeout or OOM; reproducers
# are kept in $KILN_FUZZ_ARTIFACTS (default /tmp/kiln-fuzz-artifacts) and their paths printed.
# Writes nothing in the tree.
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-60}
fuzz_base=${KILN_FUZZ_OUTPUT_BASE:-$HOME/.cache/kiln-fuzz-bazel}
keep=${KILN_FUZZ_ARTIFACTS:-/tmp/kiln-fuzz-artifacts}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "fuzz: $1" >&2
  [[ -n ${2:-} && -f $2 ]] && tail -n 40 "$2" >&2
  exit 1
}

# A .npy v1.0 image: npy FILE DESCR SHAPE DATA_HEX (header padded to 64 bytes with spaces).
npy() {
  local header="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  local pad=$(((64 - (10 + ${#header} + 1) % 64) % 64))
  header+="$(printf '%*s' "$pad" '')"$'\n'
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf '%02x' $((${#header} & 255)))\\x$(printf '%02x' $((${#header} >> 8)))"
    printf '%s' "$header"
    printf "$(echo -n "$4" | sed 's/../\\x&/g')"
  } >"$1"
}

# (1) Seeds, written by the repo's own generators (main output base, g++).
mkdir -p "$work/load" "$work/npy" "$work/region" "$work/compile" "$work/artifacts"
bazel build --jobs=2 //tests/fuzz:make_seeds //tests/fuzz:make_model_seeds >"$work/seeds.log" 2>&1 ||
  fail "building the seed writers failed" "$work/seeds.log"
bin_main=$(bazel info bazel-bin 2>/dev/null) || fail "bazel info bazel-bin failed"
"$bin_main/tests/fuzz/make_seeds" "$work/load" >>"$work/seeds.log" 2>&1 &&
  "$bin_main/tests/fuzz/make_model_seeds" "$work/load" >>"$work/seeds.log" 2>&1 ||
  fail "writing the load seeds failed" "$work/seeds.log"
# The compile fuzzer's seeds: only real kernels (the hand-built ones carry stub payloads), from
# the models above and a few ONNX node tests (an indexing check, a recurrence, a data-dependent
# shape, a resize) when Debian's libonnx-testdata is installed (tools/setup.sh).
node=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data/node}
node_models=()
for t in test_reversesequence_batch test_gathernd_example_int32 test_lstm_defaults \
  test_nonzero_example test_resize_upsample_scales_linear; do
  [[ -f $node/$t/model.onnx ]] && node_models+=("$node/$t/model.onnx")
done
"$bin_main/tests/fuzz/make_model_seeds" "$work/compile" "${node_models[@]}" \
  >>"$work/seeds.log" 2>&1 || fail "writing the compile seeds failed" "$work/seeds.log"
npy "$work/npy/f4.npy" '<f4' '(2, 3)' 0000803f000000400000404000008040000000000000c0bf
npy "$work/npy/i8.npy" '<i8' '(2,)' 2a00000000000000ffffffffffffffff
npy "$work/npy/b1.npy" '|b1' '()' 01
npy "$work/npy/f2.npy" '<f2' '(1, 2, 1)' 003c00c0

# (2) The fuzzers: --config=fuzz in its own output base, so the main cache stays valid. Its
# server exits after a few idle minutes rather than holding memory next to the main one.
fuzz_bazel=(bazel "--output_base=$fuzz_base" --max_idle_secs=300)
"${fuzz_bazel[@]}" build --jobs=2 --config=fuzz //tests/fuzz:load_fuzzer //tests/fuzz:npy_fuzzer \
  //tests/external/onednn:region_fuzzer //tests/fuzz:kernel_compile_fuzzer >"$work/build.log" 2>&1 ||
  fail "building the fuzzers with --config=fuzz failed" "$work/build.log"
bin=$("${fuzz_bazel[@]}" info --config=fuzz bazel-bin 2>/dev/null) ||
  fail "bazel info bazel-bin failed for the fuzz output base"

# (3) Each fuzzer for a bounded time, in the work dir (libFuzzer may write files to its cwd), two
# at a time (one per core; the run's wall time is what the CI budget counts), then each one's
# summary in order.
rc=0
fuzz() {  # fuzz NAME BINARY CORPUS: runs in the background; report NAME reads its status
  local name=$1 fuzzer=$2 corpus=$3 log="$work/$1.log"
  echo "fuzz: $name, $(ls "$corpus" | wc -l) seeds, ${seconds}s"
  echo "$fuzzer" >"$work/$name.bin"
  ( (cd "$work" && "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/${name}-" "$corpus") >"$log" 2>&1
    echo $? >"$work/$name.status") &
}
report() {  # report NAME: libFuzzer's stats lines, and any failure with its reproducers
  local name=$1 log="$work/$1.log" fuzzer status
  fuzzer=$(cat "$work/$name.bin")
  status=$(cat "$work/$name.status" 2>/dev/null || echo "no status")
  echo "fuzz: $name"
  # Coverage of the seeds alone, then the final stats line (execs, coverage, corpus, speed).
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE) ' "$log"
  grep -E '^Done [0-9]+ runs' "$log" | tail -n 1
  grep -E '^[a-z_]+: [0-9]+ inputs loaded' "$log"  # the compile fuzzer's own counts
  local found
  found=$(cd "$work/artifacts" && ls -d "${name}"-crash-* "${name}"-leak-* "${name}"-timeout-* \
    "${name}"-oom-* 2>/dev/null)
  if [[ $status != 0 || -n $found ]]; then
    mkdir -p "$keep"
    for f in $found; do
      cp "$work/artifacts/$f" "$keep/" && echo "fuzz: reproduce with $fuzzer $keep/$f" >&2
    done
    cp "$log" "$keep/$name.log"
    echo "fuzz: $name failed (exit $status); full log in $keep/$name.log" >&2
    tail -n 40 "$log" >&2
    rc=1
  fi
}
fuzz load_fuzzer "$bin/tests/fuzz/load_fuzzer" "$work/load"
fuzz kernel_compile_fuzzer "$bin/tests/fuzz/kernel_compile_fuzzer" "$work/compile"
wait
fuzz npy_fuzzer "$bin/tests/fuzz/npy_fuzzer" "$work/npy"
fuzz region_fuzzer "$bin/tests/external/onednn/region_fuzzer" "$work/region"
wait
for name in load_fuzzer kernel_compile_fuzzer npy_fuzzer region_fuzzer; do
  report "$name"
done
exit $rc
