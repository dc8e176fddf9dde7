#!/usr/bin/env bash
# README command 2: the whole test suite.
#   0. scripts/lint-product-text.sh: the tracked files describe only the product (no build
#      history, nothing outside the repository);
#   1. install dependencies; 2. build (CUDA when nvcc is found) and run every ctest test
#      (GPU tests report "Skipped" without a GPU);
#   3. build runtime/ with ThreadSanitizer and with AddressSanitizer+UBSan and run its tests.
#   4. build the libFuzzer targets of fuzz/ and run each for a short fixed budget
#      (scripts/fuzz.sh; TANDEM_FUZZ_SECONDS, default 20; 0 skips).
# Set TANDEM_TEST_SANITIZERS=0 to skip step 3 locally.
# TANDEM_JOBS: build parallelism (default nproc). TANDEM_TEST_JOBS: how many tests ctest runs
# at once (default TANDEM_JOBS); e.g. TANDEM_TEST_JOBS=4 on 2 cores runs the suite under load.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/lint-product-text.sh
jobs=${TANDEM_JOBS:-$(nproc)}
test_jobs=${TANDEM_TEST_JOBS:-$jobs}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
bash scripts/install-deps.sh
# Everything (tests, benchmarks, examples), whatever TANDEM_BUILD_TARGETS says.
TANDEM_BUILD_TARGETS= bash scripts/build.sh
(cd build && ctest --output-on-failure -j "$test_jobs")

if [ "${TANDEM_TEST_SANITIZERS:-1}" != "0" ]; then
  for san in thread address; do
    dir=build-$san
    echo "== runtime tests under ${san} sanitizer =="
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTANDEM_CUDA=OFF \
      -DTANDEM_RUNTIME_ONLY=ON -DTANDEM_SANITIZE=$san "${launcher[@]}" >/dev/null
    cmake --build "$dir" -j "$jobs"
    # halt_on_error: any race or memory error fails the run.
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
      bash -c "cd $dir && ctest --output-on-failure -j $test_jobs -L cpu"
  done
fi
fuzz_secs=${TANDEM_FUZZ_SECONDS:-20}
if [ "$fuzz_secs" != "0" ]; then
  echo "== fuzz targets, ${fuzz_secs} s each =="
  # A fixed seed: the suite replays the same inputs each run (a slower machine runs a prefix
  # of them), so a landing never hangs on a lucky find; scripts/fuzz.sh alone explores anew.
  FUZZ_FLAGS="${FUZZ_FLAGS:--seed=1}" bash scripts/fuzz.sh "$fuzz_secs"
fi
echo "test.sh: all suites passed"
