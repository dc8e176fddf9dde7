#!/bin/sh
# Runs two copies of a GoogleTest binary at once with the same TEST_TMPDIR and TMPDIR, as two
# checkouts' suites or a direct run beside ctest would (speculative_test failed once
# under ctest -j2 while other checkouts ran it; hybrid_decode_test wrote fixed names under
# TempDir() and one copy's remove_all ran under the other). Fails when either copy fails, so
# a test that writes a fixed name where another process may write it fails here.
#   run_twice_shared_tmpdir.sh SCRATCH BINARY [gtest args...]
set -u
scratch=$1
bin=$2
shift 2
rm -rf "$scratch" && mkdir -p "$scratch/tmp" || exit 1
export TEST_TMPDIR="$scratch/tmp" TMPDIR="$scratch/tmp"
"$bin" "$@" >"$scratch/a.log" 2>&1 &
a=$!
"$bin" "$@" >"$scratch/b.log" 2>&1
rb=$?
wait "$a"
ra=$?
for copy in a b; do
  if grep -q "FAILED" "$scratch/$copy.log"; then
    echo "== copy $copy failed; its failures:"
    grep -B3 -A6 "Failure" "$scratch/$copy.log" | head -60
  fi
done
echo "copy a exit $ra, copy b exit $rb"
[ "$ra" -eq 0 ] && [ "$rb" -eq 0 ]
