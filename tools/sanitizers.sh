#!/usr/bin/env bash
# Runs the VM, tools and external-runtime tests under AddressSanitizer and the concurrency tests
# under ThreadSanitizer. Each sanitizer builds in an output base of its own (so the main cache
# is untouched) and makes no bazel-* symlinks in the tree.
#   tools/sanitizers.sh [asan|tsan|all]      (default all)
set -uo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
base=${KILN_SANITIZER_OUTPUT_BASE:-$HOME/.cache/kiln-sanitizers}
rc=0

run() {  # run NAME TARGETS...
  local name=$1
  shift
  echo "== ${name}: $*"
  bazel --output_base="${base}-${name}" --max_idle_secs=60 test --jobs=2 --config="${name}" \
    --symlink_prefix=/ --test_output=errors \
    --test_env=ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
    --test_env=TSAN_OPTIONS=halt_on_error=1 "$@" || rc=1
}

if [[ $which == all || $which == asan ]]; then
  run asan //tests/base/... //tests/vm/... //tests/embed/... //tests/tools/... //tests/external/...
fi
if [[ $which == all || $which == tsan ]]; then
  run tsan //tests/vm:context_test //tests/base:allocator_test //tests/base:epoch_test //tests/external:registry_test
fi
exit $rc
