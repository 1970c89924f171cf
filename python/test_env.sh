# Sourced by the scripts `bazel test` runs on the kiln package (tests/python, examples/python),
# from the runfiles root: the system python3 the module is built for, the package on
# PYTHONPATH, nothing written outside the sandbox, and under --config=asan the ASan runtime.
KILN_PYTHON=/usr/bin/python3
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1           # the runfiles tree is not ours to write
export XDG_CACHE_HOME="${TEST_TMPDIR}"     # a default JIT cache stays in the sandbox
# An ASan build of the extension needs the ASan runtime loaded before python3 itself; the
# interpreter's own allocations at exit are not kiln's leaks, so LeakSanitizer is off here.
# libstdc++ is preloaded right after it: python3 does not link it, and ASan's __cxa_throw
# interceptor finds the real function only in a library loaded at startup (otherwise the first
# C++ exception the module throws stops the process with "real___cxa_throw != 0").
kiln_asan=$(ldd python/kiln/_kiln.so | awk '/libasan/ {print $3}')
kiln_cxx=$(ldd python/kiln/_kiln.so | awk '/libstdc\+\+/ {print $3}')
if [[ -n $kiln_asan ]]; then
  export LD_PRELOAD="$kiln_asan${kiln_cxx:+:$kiln_cxx}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
