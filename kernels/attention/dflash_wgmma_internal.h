// Internal to kernels/attention: launchers and shared-memory budgets of the query-major DFlash
// kernels on Hopper warpgroup MMA: the forward (dflash_wgmma_fwd.cu), which the MMA forward
// (LaunchDFlashMmaForward) runs in place of its mma.sync kernel where it applies, and the
// backward (dflash_wgmma_bwd.cu), which the split MMA backward (LaunchDFlashMmaBackward with a
// delta scratch) runs in place of its mma.sync query-major kernel. Kept free of runtime/
// headers so nvcc compiles it.
// Thread-safety: the launchers only enqueue work on `stream`; the selection reads the
// environment and the current device.
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

// Forward dynamic shared memory with `blocks` (1 or 2) blocks per CTA: Q of each and 2 stages
// x (K, V) as 64-row 128-byte-swizzled tiles, plus 1 KiB to align them (d 128: 81 or 97 KiB).
inline constexpr size_t DFlashWgmmaForwardSmemBytes(int64_t d, int blocks = 2) {
  return 1024 + (4 + static_cast<size_t>(blocks)) * 64 * static_cast<size_t>(d) * 2;
}

// Whether the MMA forward runs the warpgroup kernel: DFlashWgmmaQuerySupported(group, d) on a
// Hopper (compute capability 9.x) device, unless the environment sets TANDEM_DFLASH_FWD=mma
// (the mma.sync kernel, for comparison; "wg1" / "wg2" pick 1 or 2 blocks per CTA, "wg1q" /
// "wg2q" the same with Q in registers; read at every call).
bool DFlashWgmmaForwardSelected(int64_t group, int64_t d);

// REQUIRES DFlashWgmmaQuerySupported(hq / hk, d), scale > 0; bf16 tensors 16-byte aligned.
// Writes out and lse as LaunchDFlashMmaForward does; grid (ceil(nb / blocks), hk), 128 x
// blocks threads.
cudaError_t LaunchDFlashWgmmaForward(const DFlashKernelParams& p, cudaStream_t stream);

// REQUIRES DFlashWgmmaQuerySupported(hq / hk, d), p.delta set (f32 [nb * 16, hq]); bf16
// tensors 16-byte aligned. Writes dq, dkb, dvb and delta = rowsum(dO O); the context dK/dV
// are the key-major kernel's.
cudaError_t LaunchDFlashWgmmaQueryBackward(const DFlashKernelParams& p, cudaStream_t stream);

}  // namespace tandem::kernels::attention_internal
