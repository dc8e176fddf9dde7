// Internal to kernels/attention: launcher and shared-memory budget of the tensor-core
// (mma.sync m16n8k16 bf16, fp32 accumulate) DFlash block attention kernels in dflash_mma.cu.
// Kept free of runtime/ headers so nvcc compiles it. Thread-safety: the launcher only
// enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention/dflash_internal.h"
#include "kernels/attention/dflash_plan.h"

namespace tandem::kernels::attention_internal {

inline constexpr int kMmaTileKeys = 64;  // context keys per shared-memory tile

// Dynamic shared memory of the MMA kernels. Rows are padded by 8 bf16 (16 bytes) so the 8
// rows of an ldmatrix 8x8 matrix fall on distinct bank groups.
//   forward:  the CTA's Q m-tiles (at most 8 of 16 rows) and 2 stages x (K, V) tiles of
//             kMmaTileKeys rows (the launcher requests exactly what its grouping needs);
//   backward: Q and dO [16 * group rows], one (K, V) stage, P and dS [16 * group][64 + 8].
inline constexpr size_t DFlashMmaSmemBytes(bool backward, int64_t group, int64_t d) {
  const size_t row = static_cast<size_t>(d + 8) * 2, rows = 16 * static_cast<size_t>(group);
  if (!backward) return (16 * kMmaMaxGroup + 4 * kMmaTileKeys) * row;  // <= 8 Q m-tiles
  return (2 * rows + 2 * kMmaTileKeys) * row + 2 * rows * (kMmaTileKeys + 8) * 2;
}

// The key-major context-gradient kernel of the split backward: kCtxWarps warps of 16 keys
// (one 64-key tile per CTA), query rows in items of kCtxHeads heads x 16 slots, a list of
// up to kCtxListCap blocks per pass. Smem: K, V tiles; Q, dO double-buffered; lse, delta;
// the block list.
inline constexpr int kCtxWarps = kMmaTileKeys / 16;
inline constexpr int kCtxHeads = 4;
inline constexpr int kCtxListCap = 1024;
inline constexpr size_t DFlashMmaCtxSmemBytes(int64_t d) {
  const size_t row = static_cast<size_t>(d + 8) * 2, rows = 16 * kCtxHeads;
  return 2 * kMmaTileKeys * row + 4 * rows * row + 4 * rows * 4 + kCtxListCap * 4;
}

// The wgmma (Hopper warpgroup MMA) key-major context kernel, dflash_wgmma_ctx.cu: d = 128,
// any group the MMA kernels take; kWgmmaCtxKeys context keys per CTA (two warpgroups of 64),
// query items of kCtxHeads heads x 16 slots in kWgmmaCtxStages shared-memory stages. Smem:
// K, V tiles; per stage Q, dO, lse, delta; the block list and ranges; 1 KiB to align the
// swizzled tiles.
inline constexpr int kWgmmaCtxKeys = 128;
inline constexpr int kWgmmaCtxStages = 3;
inline constexpr size_t DFlashWgmmaCtxSmemBytes() {
  const size_t rows = 16 * kCtxHeads;
  return 2 * kWgmmaCtxKeys * 256 + kWgmmaCtxStages * (2 * rows * 256 + 2 * rows * 4) +
         kCtxListCap * 12 + 64 + 1024;
}
// Whether the wgmma context kernel runs its tiles longest first for a context of t keys: the
// ranking counts the tiles in the block list's space (2 tiles + 1 ints), so up to t = 65408;
// longer contexts run in grid order (same results: the order only decides when a tile runs).
inline constexpr bool DFlashWgmmaCtxRanked(int64_t t) {
  return 2 * ((t + kWgmmaCtxKeys - 1) / kWgmmaCtxKeys) + 1 <= kCtxListCap;
}

// Launch the mma.sync kernels: REQUIRES DFlashMmaSupported(hq / hk, d); bf16 tensors and the
// fp32 context gradients 16-byte aligned. The forward: grid (ceil(nb / nbc), hk).
cudaError_t LaunchDFlashMmaForward(const DFlashKernelParams& p, cudaStream_t stream);
// With p.delta == nullptr one fused kernel, grid (nb, hk), which adds the context dK/dV
// with fp32 atomics (dkc/dvc zero-filled first). With p.delta (f32 [nb * 16, hq] scratch):
// the query-major kernel (dQ, block dK/dV, delta = rowsum(dO O)) and then the key-major
// context kernel, each of the family `plan` names for it (query_backward: wgmma REQUIRES
// DFlashWgmmaQuerySupported; context_backward: wgmma REQUIRES DFlashWgmmaCtxSupported, else
// mma.sync with grid (ceil(t / 64), hk)); the context kernel writes every row of dkc/dvc
// once, in a fixed order (no atomics, deterministic, no zero-fill needed).
cudaError_t LaunchDFlashMmaBackward(const DFlashKernelParams& p, const DFlashPlan& plan,
                                    cudaStream_t stream);
// The wgmma context kernel alone (REQUIRES the split backward's query-major kernel ran first,
// p.delta filled; d = 128): grid (ceil(t / 128), hk), 256 threads.
cudaError_t LaunchDFlashWgmmaCtx(const DFlashKernelParams& p, cudaStream_t stream);
// Shared memory of the split backward's context kernel of family `kernel` for head_dim d.
inline size_t DFlashCtxSmemBytes(DFlashKernel kernel, int64_t d) {
  return kernel == DFlashKernel::kWgmma ? DFlashWgmmaCtxSmemBytes() : DFlashMmaCtxSmemBytes(d);
}

}  // namespace tandem::kernels::attention_internal
