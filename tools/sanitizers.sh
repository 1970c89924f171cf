#!/usr/bin/env bash
# Runs every test target under AddressSanitizer (+ LeakSanitizer) and every test that starts
# threads under ThreadSanitizer. Each sanitizer builds in an output base of its own (so the main
# cache is untouched) and makes no bazel-* symlinks in the tree.
#   tools/sanitizers.sh [asan|tsan|all]      (default all)
#
# ASan: `bazel test //...` (tests only), nothing left out. Code the JIT generates at run time and
# the system libraries (LLVM, oneDNN, libgomp, Boost) are not instrumented; everything kiln
# compiles is. No leak suppressions.
#
# TSan: the tests below start threads of their own (std::thread, the JIT's background compiler,
# worker pools, servers, concurrent Invoke/GetOrCompile). Left out, with the reason:
#   - single-threaded tests (the compiler, lowering, kernel IR, verifier, ... suites): nothing
#     for TSan to find, and its 5-15x slowdown on JIT-heavy suites would cost most of the budget;
#   - OpenMP teams: Debian's libgomp is not TSan-instrumented, so its barriers are invisible to
#     TSan and every parallel-for would be a false report. OMP_NUM_THREADS=1 keeps kernels on the
#     calling thread; the threads kiln starts itself are all still there;
#   - reports with a frame in libLLVM (tests/tsan_suppressions.txt): LLVM is not instrumented
#     either, and ORC frees objects on its own threads after atomic reference counts TSan
#     cannot see.
set -uo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
base=${KILN_SANITIZER_OUTPUT_BASE:-$HOME/.cache/kiln-sanitizers}
rc=0
tsan_supp="$PWD/tests/tsan_suppressions.txt"

TSAN_TARGETS=(
  # base: the allocator's free lists and epoch-based reclamation under concurrent readers.
  //tests/base:allocator_test
  //tests/base:epoch_test
  # vm and the vendor registry: shared executables and registries, per-thread contexts.
  //tests/vm:context_test
  //tests/external:registry_test
  # jit: concurrent GetOrCompile, shape dispatch with background specialization, the provider.
  //tests/jit:dispatch_test
  //tests/jit:engine_test
  //tests/jit:kernel_provider_test
  # oneDNN run side: one region runtime shared by threads.
  //tests/external/onednn:runtime_test
  # embedding: Runtime, the C API and DLPack across threads.
  //tests/embed:runtime_test
  //tests/embed:c_api_test
  //tests/embed:dlpack_test
  # serving: worker pool, server (I/O threads + workers), kiln_serve and the load generator.
  //tests/examples/serving:worker_pool_test
  //tests/examples/serving:server_test
  //tests/examples/serving:kiln_serve_test
  //tests/examples/serving:load_test_small
  # the CLI's bench/serve paths and the quickstart run the JIT's background specialization.
  //tests/tools:kiln_cli_test
  //examples/quickstart:quickstart_jit_test
)

run() {  # run NAME BAZEL_TEST_ARGS...
  local name=$1
  shift
  echo "== ${name}: $*"
  local start=$SECONDS
  # Sanitizers slow tests 2-15x: timeouts of 3x Bazel's defaults still only catch hangs.
  bazel --output_base="${base}-${name}" --max_idle_secs=60 test --jobs=2 --config="${name}" \
    --symlink_prefix=/ --test_output=errors --build_tests_only --keep_going \
    --test_env=ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
    --test_env=TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=${tsan_supp}" \
    --test_timeout=180,900,1800,3600 "$@" || rc=1
  echo "== ${name}: $((SECONDS - start)) s"
}

# //... minus the main build's bazel-* convenience symlinks: they point into another output
# base, so this Bazel would not recognise them as its own and would build the tree twice.
all_tests=(//...)
for link in bazel-*; do  # only the execroot link holds packages (BUILD files one level down)
  [[ -L $link && -n $(find -L "$link/" -maxdepth 2 -name BUILD -print -quit 2>/dev/null) ]] &&
    all_tests+=("-//${link}/...")
done

if [[ $which == all || $which == asan ]]; then
  run asan -- "${all_tests[@]}"
fi
if [[ $which == all || $which == tsan ]]; then
  run tsan --test_env=OMP_NUM_THREADS=1 -- "${TSAN_TARGETS[@]}"
fi
exit $rc
