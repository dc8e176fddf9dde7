#!/usr/bin/env bash
# Configures and builds tandem into build/ (CUDA when nvcc is found).
#   scripts/build.sh [extra cmake args...]
# TANDEM_BUILD_TARGETS: build only these targets (space-separated) and what they need;
# unset or empty builds everything (tests, benchmarks, examples), as scripts/test.sh needs.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TANDEM_JOBS:-$(nproc)}
# ccache, when installed, for C++ and CUDA (as scripts/test.sh and scripts/fuzz.sh do).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
targets=()
if [ -n "${TANDEM_BUILD_TARGETS:-}" ]; then
  read -r -a names <<<"$TANDEM_BUILD_TARGETS"
  targets=(--target "${names[@]}")
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@" >/dev/null
cmake --build build -j "$jobs" "${targets[@]}"
