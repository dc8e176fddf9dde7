#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets of fuzz/ with clang, AddressSanitizer and
# UBSan in build-fuzz/, then runs each for SECONDS (default 60) starting from its seed
# corpus fuzz/corpus/<target>/ (new inputs go to build-fuzz/corpus/<target>/), and prints
# per target the executions, coverage (cov: edges, ft: features) and corpus size reached.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
# A crash, leak, sanitizer report or timeout leaves its input in build-fuzz/crashes/<target>/
# and makes the script fail after the other targets ran; turn it into a regression test.
# TANDEM_JOBS: build parallelism (default nproc). FUZZ_FLAGS: extra libFuzzer flags.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
jobs=${TANDEM_JOBS:-$(nproc)}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(safetensors_fuzz safetensors_index_fuzz hf_config_fuzz job_spec_fuzz
           control_frame_fuzz data_set_fuzz jsonl_fuzz checkpoint_state_fuzz metrics_http_fuzz
           tokenizer_fuzz chat_template_fuzz chat_line_fuzz chat_set_fuzz prompt_set_fuzz
           metrics_report_fuzz)
fi
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_CUDA=OFF \
  -DTANDEM_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
  >/dev/null
cmake --build build-fuzz -j "$jobs" --target "${targets[@]}"

failed=()
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t crashes=build-fuzz/crashes/$t log=build-fuzz/logs/$t.log
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  # -max_len: file parsers get room for deep nesting and long keys (without it libFuzzer keeps
  # inputs near the largest seed's size); control frames and HTTP requests stay small (the
  # metrics endpoint reads at most 8 KiB of head: twice that reaches its limit).
  case "$t" in
    control_frame_fuzz) max_len=65536 ;;
    metrics_http_fuzz) max_len=16384 ;;
    *) max_len=262144 ;;
  esac
  # -timeout: one input taking 60 s is a finding (a hang, a quadratic parse); shorter limits
  # fail on a loaded machine, where a descheduled process can take 10 s for 100 bytes.
  if ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
     UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
     "build-fuzz/fuzz/$t" -max_total_time="$secs" -timeout=60 -max_len="$max_len" \
       -print_final_stats=1 -artifact_prefix="$crashes/" ${FUZZ_FLAGS:-} \
       "$work" "fuzz/corpus/$t" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' || true)
  echo "fuzz: $t: $status: ${runs:-?} executions in ${secs} s, ${last:-no coverage line}"
  if [ "$status" != ok ]; then tail -40 "$log"; fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in build-fuzz/crashes/)"
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${secs} s without a crash"
