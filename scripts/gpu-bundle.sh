#!/usr/bin/env bash
# Makes binaries built here runnable on a GPU host that has the CUDA stack but not the other
# libraries tandem links.
#
#   scripts/gpu-bundle.sh OUTDIR BINARY...
#
# Copies each BINARY into OUTDIR/bin and every shared library it needs that such a host may
# lack (capnp, kj, fmt, boost, gtest, toml, ...) into OUTDIR/lib. CUDA, cuBLAS, cuDNN, NCCL,
# the driver and libc are left out: the GPU host brings its own.
# On the GPU host:  export LD_LIBRARY_PATH=$PWD/OUTDIR/lib:$LD_LIBRARY_PATH
# (bench/device/run_gpu_suite.sh OUTDIR LOGDIR runs the GPU tests from such a bundle).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR BINARY..." >&2; exit 2; }
out=$1; shift
mkdir -p "$out/bin" "$out/lib"
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s|libstdc\+\+|libcuda\.|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink|libcurand|libcufft|libcusparse|libcusolver|libnvidia)'
for b in "$@"; do
  [ -f "$b" ] || { echo "gpu-bundle: $b: no such file" >&2; exit 2; }
  cp -f "$b" "$out/bin/"
  ldd "$b" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    if ! [[ $name =~ $skip ]]; then cp -fL "$path" "$out/lib/$name"; fi
  done
done
du -sh "$out" | awk '{print "bundle size: " $1}'
ls "$out/lib"
