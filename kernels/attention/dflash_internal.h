// Internal to kernels/attention: the DFlash kernels' parameter block and launcher
// (dflash_attention.cu), called by the checked entry points in dflash_attention_cuda.cc.
// Thread-safety: the launcher only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>
#include <cstdint>

namespace tandem::kernels::attention_internal {

inline constexpr int kBlock = 16;                  // == kDFlashBlockSize
inline constexpr int kTileKeys = 32;                // keys per shared-memory tile
inline constexpr int kTileStride = kTileKeys + 1;  // padded row of the backward's p / ds tiles

// The serving rule's window (attention.h): a query sees a key only if query position - key
// position <= window - 1. Written per key index k and query slot i of a block whose anchor
// sits at index `base` of k's index space: the query sees k iff k - i >= WindowFloor(base,
// window). Context keys: base = anchor; the block's own keys (k = 0..15): base = 0. No window:
// INT_MIN, no bound. (constexpr: device code calls it through --expt-relaxed-constexpr.)
constexpr int WindowFloor(int base, int window) {
  return window > 0 ? base - (window - 1) : INT_MIN;
}

struct DFlashKernelParams {
  const void *q, *kb, *vb, *kc, *vc;  // bf16
  const int32_t *anchors, *doc_start;
  int nb, t, hq, hk, d, window;
  bool causal;
  float scale;
  // forward
  void* out;  // bf16
  float* lse;
  // backward
  const void *o_in, *dout;  // bf16
  const float* lse_in;
  void *dq, *dkb, *dvb;  // bf16
  float *dkc, *dvc;
  float* delta;  // optional f32 [nb * 16, hq] scratch (MMA split backward)
};
// Launches the forward (backward = false) or backward kernel: grid (nb, hk), `threads`
// threads, `ds` dims per lane (4, 8, 16 or 32), `smem` bytes of dynamic shared memory.
cudaError_t LaunchDFlashKernel(const DFlashKernelParams& p, bool backward, int ds, int threads,
                               size_t smem, cudaStream_t stream);

}  // namespace tandem::kernels::attention_internal
