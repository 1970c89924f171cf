#!/bin/bash
# The sweep survives a test that crashes its worker and one that hangs (self-test hooks), reports
# them, counts every test, and writes the sorted passing names with --write-list.
set -u
SWEEP=tests/conformance/sweep
SRC="${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data/node}"
DATA="$TEST_TMPDIR/node"
for t in test_add test_relu test_abs test_neg; do
  [ -d "$SRC/$t" ] || { echo "FAIL: missing $SRC/$t (install libonnx-testdata: tools/setup.sh)"; exit 1; }
  mkdir -p "$DATA" && cp -r "$SRC/$t" "$DATA/"
done
fail() { echo "FAIL: $1"; echo "--- sweep output:"; cat "$TEST_TMPDIR/out.txt"; exit 1; }

KILN_SWEEP_SELFTEST_CRASH=test_relu KILN_SWEEP_SELFTEST_HANG=test_abs \
  "$SWEEP" --data "$DATA" --jobs 2 --timeout 3 --write-list "$TEST_TMPDIR/list.txt" \
  > "$TEST_TMPDIR/out.txt" 2>&1 || fail "sweep exited with $?"
# A plain build dies of the signal; under ASan its handler reports the SEGV and exits 1.
grep -Eq "CRASH test_relu .*(killed by signal 11 .*last output: self-test: crashing on test_relu|worker exited with code 1; last output: .*ERROR: AddressSanitizer: SEGV)" \
  "$TEST_TMPDIR/out.txt" || fail "no CRASH line for test_relu"
grep -q "TIMEOUT test_abs .*no result after 3 s" "$TEST_TMPDIR/out.txt" || fail "no TIMEOUT line for test_abs"
grep -q "PASS test_add" "$TEST_TMPDIR/out.txt" || fail "test_add did not pass"
grep -q "PASS test_neg" "$TEST_TMPDIR/out.txt" || fail "test_neg did not pass"
grep -qx "1 crashed, 1 timed out" "$TEST_TMPDIR/out.txt" || fail "crash/timeout counts"
grep -qx "2 passed, 2 failed of 4" "$TEST_TMPDIR/out.txt" || fail "totals line"
[ "$(grep -v '^#' "$TEST_TMPDIR/list.txt")" = "$(printf 'test_add\ntest_neg')" ] || fail "list: $(cat "$TEST_TMPDIR/list.txt")"

# A missing data folder is an error, not an empty success.
"$SWEEP" --data "$TEST_TMPDIR/nothing_here" > "$TEST_TMPDIR/out.txt" 2>&1 && fail "missing folder accepted"
grep -q "libonnx-testdata" "$TEST_TMPDIR/out.txt" || fail "missing folder message"
echo PASS
