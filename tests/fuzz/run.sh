#!/usr/bin/env bash
# A bounded libFuzzer run over the loader (load + verify + inspect + disassemble).
#
#   tests/fuzz/run.sh [SECONDS]      (default 60)
#
# Builds the seed writer with the normal config and the fuzzer with --config=fuzz (clang-14,
# libFuzzer + ASan) in an output base of its own ($KILN_FUZZ_OUTPUT_BASE, default
# ~/.cache/kiln-fuzz-bazel), fuzzes a temporary copy of the seeds, and prints libFuzzer's final
# stats line. Exits non-zero if the fuzzer found a crash, leak, timeout or OOM; the reproducer
# is kept in $KILN_FUZZ_ARTIFACTS (default /tmp/kiln-fuzz-artifacts) and its path printed.
# Writes nothing in the tree.
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-60}
fuzz_base=${KILN_FUZZ_OUTPUT_BASE:-$HOME/.cache/kiln-fuzz-bazel}
keep=${KILN_FUZZ_ARTIFACTS:-/tmp/kiln-fuzz-artifacts}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"

fail() {
  echo "fuzz: $1" >&2
  [[ -n ${2:-} && -f $2 ]] && tail -n 40 "$2" >&2
  exit 1
}

# (1) The seeds: valid executables written by ExecutableBuilder (main output base, g++).
bazel run --jobs=2 //tests/fuzz:make_seeds -- "$work/corpus" >"$work/seeds.log" 2>&1 ||
  fail "building or running //tests/fuzz:make_seeds failed" "$work/seeds.log"

# (2) The fuzzer: --config=fuzz in its own output base, so the main cache stays valid. Its
# server exits after a few idle minutes rather than holding memory next to the main one.
fuzz_bazel=(bazel "--output_base=$fuzz_base" --max_idle_secs=300)
"${fuzz_bazel[@]}" build --jobs=2 --config=fuzz //tests/fuzz:load_fuzzer >"$work/build.log" 2>&1 ||
  fail "building //tests/fuzz:load_fuzzer with --config=fuzz failed" "$work/build.log"
bin=$("${fuzz_bazel[@]}" info --config=fuzz bazel-bin 2>/dev/null) ||
  fail "bazel info bazel-bin failed for the fuzz output base"
fuzzer="$bin/tests/fuzz/load_fuzzer"

# (3) Fuzz for a bounded time, in the work dir (libFuzzer may write files to its cwd).
echo "fuzz: $(ls "$work/corpus" | wc -l) seeds, ${seconds}s"
(cd "$work" && "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" corpus) >"$work/fuzz.log" 2>&1
rc=$?

# Coverage of the seeds alone, then the final stats line (execs, coverage, corpus, speed).
grep -E '^#[0-9]+[[:space:]]+(INITED|DONE) ' "$work/fuzz.log"
grep -E '^Done [0-9]+ runs' "$work/fuzz.log" | tail -n 1
found=$(cd "$work/artifacts" && ls -d crash-* leak-* timeout-* oom-* 2>/dev/null)
if [[ $rc -ne 0 || -n $found ]]; then
  mkdir -p "$keep"
  for f in $found; do
    cp "$work/artifacts/$f" "$keep/" && echo "fuzz: reproduce with $fuzzer $keep/$f" >&2
  done
  cp "$work/fuzz.log" "$keep/fuzz.log"
  fail "the fuzzer failed (exit $rc); full log in $keep/fuzz.log" "$work/fuzz.log"
fi
