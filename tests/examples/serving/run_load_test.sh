#!/usr/bin/env bash
# Runs the load test binary ($1) with the remaining arguments as its flags; the binary exits
# non-zero if any request failed, was answered wrongly or was lost.
set -euo pipefail
binary="$1"
shift
exec "$binary" "$@"
