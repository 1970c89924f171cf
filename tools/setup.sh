#!/usr/bin/env bash
# Installs every system package kiln needs on Debian bookworm (apt only, idempotent).
# Fast when everything is present: dpkg is asked first, apt only for what is missing.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap            # Bazel 4.2.3
  g++                        # host toolchain
  llvm-19-dev                # ORC LLJIT (libLLVM-19.so + headers)
  libdnnl-dev                # oneDNN 2.6 (OpenMP build)
  libflatbuffers-dev flatbuffers-compiler   # FlatBuffers 2.0.8 + flatc
  libboost-test-dev libboost-dev            # Boost.Test, Boost.Beast/Asio (headers)
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX 1.12 protobuf, checker, parser
  libonnx-testdata           # ONNX backend node tests (conformance runner)
  libbenchmark-dev           # Google Benchmark
  libdlpack-dev              # DLPack struct definitions
  clang-14 libclang-rt-14-dev   # libFuzzer + ASan runtime for the fuzz target
  python3-numpy              # quickstart / test data generation; the Python package's arrays
  python3-dev pybind11-dev   # the Python package (python/): python3.11 headers, pybind11 2.10
  python3-pytest python3-onnx   # its tests (pytest; models built with onnx.helper)
  libgrpc++-dev protobuf-compiler-grpc   # kiln_serve's KServe v2 gRPC (gRPC C++ + grpc_cpp_plugin)
  python3-grpcio             # the gRPC client test (stubs from protobuf-compiler-grpc's python plugin)
  python3-yaml               # deploy/ manifest test
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages present"
fi
