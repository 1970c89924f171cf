#!/usr/bin/env bash
# The README's test command: installs what is missing, runs every Bazel test, the layering
# check over every #include, every test under
# ASan and the threaded ones under TSan, then bounded libFuzzer runs (each fuzzer, 60 s). Ends
# with one line "N passed, M failed"; a stage turned off (KILN_SANITIZERS=0,
# KILN_FUZZ_SECONDS=0) is named on the line before it ("skipped: ..."), so a green count never
# hides one.
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Each stage prints its wall time ("== NAME: N s"): the CI budget is 90 minutes, and a stage that
# grows (a cache that stopped hitting) shows in the log of the run that grew.
start=$SECONDS
bazel test --jobs=2 --test_summary=short //... 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}
echo "== bazel test: $((SECONDS - start)) s"

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
if [[ $bazel_rc -ne 0 && $failed -eq 0 ]]; then
  failed=1  # the build itself failed
fi

# The folders include each other one way only (base <- ... <- embed <- tools).
echo "== layering (tools/layers.py)"
if python3 tools/layers.py; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAILED: an #include points the wrong way (tools/layers.py)"
fi

skipped=()
if [[ ${KILN_SANITIZERS:-1} == 0 ]]; then
  skipped+=("sanitizers (KILN_SANITIZERS=0)")
else
  echo "== sanitizers (ASan: every test; TSan: every test that starts threads)"
  if bash tools/sanitizers.sh all; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: sanitizer run (tools/sanitizers.sh)"
  fi
fi

fuzz_seconds=${KILN_FUZZ_SECONDS:-60}
if [[ $fuzz_seconds -le 0 ]]; then
  skipped+=("fuzzing (KILN_FUZZ_SECONDS=${fuzz_seconds})")
else
  echo "== fuzzing: each fuzzer for ${fuzz_seconds}s"
  start=$SECONDS
  bash tests/fuzz/run.sh "$fuzz_seconds"
  fuzz_rc=$?
  echo "== fuzzing: $((SECONDS - start)) s"
  if [[ $fuzz_rc -eq 0 ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: fuzz run (tests/fuzz/run.sh)"
  fi
fi

if [[ ${#skipped[@]} -gt 0 ]]; then
  line="skipped:" sep=" "
  for stage in "${skipped[@]}"; do
    line+="${sep}${stage}"
    sep=", "
  done
  echo "$line"
fi
echo "total: ${SECONDS} s"
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
