#!/usr/bin/env bash
# README command 1: install the build dependencies (not the test-only ones: clang for fuzzing,
# the npm tokenizer fixture), build the `tandem` executable and the libraries it
# links (nothing else: the default job loads no plugin), and run the embedded default job.
# Tests, benchmarks and examples build in README command 2 (scripts/test.sh), in the same
# build/ directory, so nothing built here is built twice.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --build
TANDEM_BUILD_TARGETS=tandem bash scripts/build.sh
./build/tools/tandem run
