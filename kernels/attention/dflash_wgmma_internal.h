// Internal to kernels/attention: launchers and shared-memory budgets of the query-major DFlash
// kernels on Hopper warpgroup MMA: the forward (dflash_wgmma_fwd.cu), which runs in place of
// the mma.sync forward (LaunchDFlashMmaForward) where the plan (dflash_plan.h) says so, and the
// backward (dflash_wgmma_bwd.cu), which the split MMA backward (LaunchDFlashMmaBackward with a
// delta scratch) runs in place of its mma.sync query-major kernel. Kept free of runtime/
// headers so nvcc compiles it.
// Thread-safety: the launchers only enqueue work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention/dflash_internal.h"
#include "kernels/attention/dflash_plan.h"

namespace tandem::kernels::attention_internal {

// Dynamic shared memory: Q, dO and 2 stages x (K, V) as 64-row 128-byte-swizzled tiles, the
// block's own keys' P and dS ([64 rows][16 keys + 8 pad] bf16), plus 1 KiB to align the tiles
// (d 128: 103 KiB, two CTAs per SM).
inline constexpr size_t DFlashWgmmaQuerySmemBytes(int64_t d) {
  const size_t tile = 64 * static_cast<size_t>(d) * 2;
  return 1024 + 6 * tile + 2 * 64 * (kBlock + 8) * 2;
}

// Forward dynamic shared memory: Q and 2 stages x (K, V) as 64-row 128-byte-swizzled tiles,
// plus 1 KiB to align them (d 128: 81 KiB).
inline constexpr size_t DFlashWgmmaForwardSmemBytes(int64_t d) {
  return 1024 + 5 * 64 * static_cast<size_t>(d) * 2;
}

// REQUIRES DFlashWgmmaQuerySupported(hq / hk, d), scale > 0; bf16 tensors 16-byte aligned.
// Writes out and lse as LaunchDFlashMmaForward does; grid (nb, hk), 128 threads.
cudaError_t LaunchDFlashWgmmaForward(const DFlashKernelParams& p, cudaStream_t stream);

// REQUIRES DFlashWgmmaQuerySupported(hq / hk, d), p.delta set (f32 [nb * 16, hq]); bf16
// tensors 16-byte aligned. Writes dq, dkb, dvb and delta = rowsum(dO O); the context dK/dV
// are the key-major kernel's.
cudaError_t LaunchDFlashWgmmaQueryBackward(const DFlashKernelParams& p, cudaStream_t stream);

}  // namespace tandem::kernels::attention_internal
