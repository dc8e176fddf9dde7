// Internal to kernels/attention: launcher and shared-memory budget of the query-major DFlash
// backward on Hopper warpgroup MMA (dflash_wgmma_bwd.cu), which the split MMA backward
// (LaunchDFlashMmaBackward with a delta scratch) runs in place of its mma.sync query-major
// kernel where it applies. Kept free of runtime/ headers so nvcc compiles it.
// Thread-safety: the launcher only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention/dflash_internal.h"

namespace tandem::kernels::attention_internal {

// One warpgroup per (block, KV head) with M = 64 query rows = 4 heads x 16 slots.
inline constexpr int kWgmmaGroup = 4;

// Whether the warpgroup kernel handles a (GQA group, head_dim) pair; other pairs keep the
// mma.sync query-major kernel.
inline constexpr bool DFlashWgmmaQuerySupported(int64_t group, int64_t d) {
  return group == kWgmmaGroup && (d == 64 || d == 128);
}

// Dynamic shared memory: Q, dO and 2 stages x (K, V) as 64-row 128-byte-swizzled tiles, the
// block's own keys' P and dS ([64 rows][16 keys + 8 pad] bf16), plus 1 KiB to align the tiles
// (d 128: 103 KiB, two CTAs per SM).
inline constexpr size_t DFlashWgmmaQuerySmemBytes(int64_t d) {
  const size_t tile = 64 * static_cast<size_t>(d) * 2;
  return 1024 + 6 * tile + 2 * 64 * (kBlock + 8) * 2;
}

// REQUIRES DFlashWgmmaQuerySupported(hq / hk, d), p.delta set (f32 [nb * 16, hq]); bf16
// tensors 16-byte aligned. Writes dq, dkb, dvb and delta = rowsum(dO O); the context dK/dV
// are the key-major kernel's.
cudaError_t LaunchDFlashWgmmaQueryBackward(const DFlashKernelParams& p, cudaStream_t stream);

}  // namespace tandem::kernels::attention_internal
