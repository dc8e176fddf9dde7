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

// One warpgroup per (block, KV head) with M = 64 query rows = 4 heads x 16 slots; two blocks
// per CTA share the K/V stream.
inline constexpr int kWgmmaGroup = 4;

// Whether the warpgroup kernel handles a (GQA group, head_dim) pair; other pairs keep the
// mma.sync query-major kernel.
inline constexpr bool DFlashWgmmaQuerySupported(int64_t group, int64_t d) {
  return group == kWgmmaGroup && (d == 64 || d == 128);
}

// Dynamic shared memory with `pair` blocks per CTA (one warpgroup each): per block Q, dO and
// its own keys' P and dS ([64 rows][16 keys + 8 pad] bf16); 2 stages x (K, V) shared; tiles
// of 64 rows, 128-byte swizzled; plus 1 KiB to align them.
inline constexpr size_t DFlashWgmmaQuerySmemBytes(int64_t d, int pair = 2) {
  const size_t tile = 64 * static_cast<size_t>(d) * 2;
  return 1024 + (2 * static_cast<size_t>(pair) + 4) * tile + pair * 2 * 64 * (kBlock + 8) * 2;
}

// REQUIRES DFlashWgmmaQuerySupported(hq / hk, d), p.delta set (f32 [nb * 16, hq]); bf16
// tensors 16-byte aligned. Writes dq, dkb, dvb and delta = rowsum(dO O); the context dK/dV
// are the key-major kernel's.
cudaError_t LaunchDFlashWgmmaQueryBackward(const DFlashKernelParams& p, cudaStream_t stream);

}  // namespace tandem::kernels::attention_internal
