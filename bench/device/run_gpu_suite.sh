#!/usr/bin/env bash
# Runs tandem's GPU tests (and optionally benchmarks and golden generators) on a GPU host
# from a bundle made by ../shared/tools/gpu-bundle (binaries in $BUNDLE/bin, libraries in
# $BUNDLE/lib). ctest files hold the build machine's paths, so binaries run directly.
#
#   bench/device/run_gpu_suite.sh BUNDLE OUTDIR [tests|bench|golden]...
#
# Writes one log per phase into OUTDIR and prints a one-line verdict per binary.
set -u
bundle=$1; out=$2; shift 2
phases=${*:-tests}
export LD_LIBRARY_PATH=$PWD/$bundle/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
run() {  # run LOG NAME CMD...: appends output to LOG, prints a verdict line
  local log=$1 name=$2; shift 2
  local t0=$(date +%s.%N)
  { echo "=== $name: $*"; timeout "${TANDEM_STEP_TIMEOUT:-300}" "$@"; echo "=== $name rc=$?"; } >>"$log" 2>&1
  local rc=$(tail -1 "$log" | sed 's/.*rc=//')
  printf '%-28s rc=%-3s %6.1fs  %s\n' "$name" "$rc" "$(echo "$(date +%s.%N) - $t0" | bc)" \
    "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tail -2 | tr '\n' ' ')"
}
for phase in $phases; do
  case $phase in
    tests)
      for t in "$bundle"/bin/*_test; do
        run "$out/tests.log" "$(basename "$t")" "$t"
      done
      grep -E '^\[  FAILED  \]|Failure|error' "$out/tests.log" | head -40 ;;
    bench)
      for fam in ${TANDEM_BENCH_FAMILIES:-store kernels attention}; do
        run "$out/bench.log" "bench-$fam" "$bundle/bin/tandem-bench" "$fam"
      done ;;
    golden)
      # The generators write into tests/golden/ (the layout the C++ golden tests read).
      python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
      for s in tests/golden/make_*golden.py; do
        run "$out/golden.log" "$(basename "$s")" python3 "$s"
      done
      tar cf "$out/goldens.tar" --exclude=__pycache__ tests/golden ;;
  esac
done
