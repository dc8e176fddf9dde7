#!/usr/bin/env bash
# Runs tandem's GPU tests (and optionally benchmarks and golden generators) on a GPU host
# from a bundle made by scripts/gpu-bundle.sh (binaries in $BUNDLE/bin, libraries in
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
  local one; one=$(mktemp)
  local t0=$SECONDS
  timeout "${TANDEM_STEP_TIMEOUT:-300}" "$@" >"$one" 2>&1
  local rc=$?
  { echo "=== $name: $*"; cat "$one"; echo "=== $name rc=$rc"; } >>"$log"
  printf '%-30s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$one" | sort -u | tr '\n' ' ')"
  rm -f "$one"
}
for phase in $phases; do
  case $phase in
    tests)
      for t in ${TANDEM_TESTS:-$bundle/bin/*_test}; do
        run "$out/tests.log" "$(basename "$t")" "$t"
      done
      grep -E -A6 'Failure$' "$out/tests.log" | head -60 ;;
    bench)
      for fam in ${TANDEM_BENCH_FAMILIES:-store kernels attention}; do
        run "$out/bench.log" "bench-$fam" "$bundle/bin/tandem-bench" $fam
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
