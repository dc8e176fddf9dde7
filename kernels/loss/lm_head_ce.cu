// CUDA kernels of the fused LM head + cross-entropy (host side: lm_head_ce_cuda.cc).
// Per chunk of rows:
//   1. cuBLASLt: logits[n, V] (bf16, row stride round_up(V, 8)) = hidden[chunk] @ W^T.
//   2. ce_rows_kernel, one block per row: pass 1 reads the row with 16-byte loads and keeps
//      an online (max, sum of exp) pair, the best (value, index) and the target logit;
//      a block reduction gives logsumexp. Pass 2 (backward) rereads the row (mostly from L2)
//      and overwrites it with g = (softmax - onehot) * w / sum(w) in bf16.
//   3. cuBLASLt: dhidden[chunk] = g @ W.
// With a logit transform (multiplier, soft cap) the row kernel reads z = T(logit) in both
// passes and multiplies the gradient by dz/dlogit; the identity takes the plain
// instantiation (kTransform = false), unchanged.
// The weight sum is reduced on the device first; per-row weighted losses go to a f32 [R]
// buffer that one block sums at the end, so the loss is deterministic and needs no atomics.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>

#include "kernels/loss/lm_head_ce_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kRowThreads = 512;
constexpr int kSumThreads = 1024;

// Running softmax statistics of a set of logits plus their argmax.
struct RowStats {
  float max;  // -inf when empty
  float sum;  // sum of exp(x - max)
  float best;
  int best_index;  // INT_MAX when empty
};

__device__ __forceinline__ RowStats Combine(RowStats a, RowStats b) {
  RowStats o;
  o.max = fmaxf(a.max, b.max);
  o.sum = o.max == -INFINITY ? 0.f
                             : a.sum * __expf(a.max - o.max) + b.sum * __expf(b.max - o.max);
  bool take_b = b.best > a.best || (b.best == a.best && b.best_index < a.best_index);
  o.best = take_b ? b.best : a.best;
  o.best_index = take_b ? b.best_index : a.best_index;
  return o;
}

__device__ __forceinline__ RowStats WarpCombine(RowStats s) {
  for (int off = 16; off > 0; off >>= 1) {
    RowStats o;
    o.max = __shfl_xor_sync(0xffffffffu, s.max, off);
    o.sum = __shfl_xor_sync(0xffffffffu, s.sum, off);
    o.best = __shfl_xor_sync(0xffffffffu, s.best, off);
    o.best_index = __shfl_xor_sync(0xffffffffu, s.best_index, off);
    s = Combine(s, o);
  }
  return s;
}

// Folds up to 8 logits starting at column `j0` into `s` (one rescale per group).
__device__ __forceinline__ void Accumulate(RowStats& s, const float* x, int n, int64_t j0) {
  float m = s.max;
  for (int i = 0; i < n; ++i) {
    m = fmaxf(m, x[i]);
    if (x[i] > s.best) {
      s.best = x[i];
      s.best_index = static_cast<int>(j0 + i);
    }
  }
  if (m == -INFINITY) return;
  float sum = s.sum * __expf(s.max - m);
  for (int i = 0; i < n; ++i) sum += __expf(x[i] - m);
  s.max = m;
  s.sum = sum;
}

// z = T(x) and dz/dx of the logit transform (lm_head_ce.h); `inv` = multiplier / softcap.
struct LogitTransform {
  float multiplier, softcap, inv;
  __device__ __forceinline__ float Apply(float x) const {
    return softcap > 0.f ? softcap * tanhf(x * inv) : x * multiplier;
  }
  __device__ __forceinline__ float Slope(float z) const {
    if (softcap <= 0.f) return multiplier;
    const float r = z / softcap;
    return multiplier * (1.f - r * r);
  }
};

// d loss / d logit of one entry: (softmax(z) - onehot) * scale, times dz/dx with a transform.
template <bool kTransform>
__device__ __forceinline__ float RowGrad(const LogitTransform& tr, float x, float lse,
                                         bool is_target, float scale) {
  if constexpr (kTransform) {
    const float z = tr.Apply(x);
    return (__expf(z - lse) - (is_target ? 1.f : 0.f)) * scale * tr.Slope(z);
  } else {
    return (__expf(x - lse) - (is_target ? 1.f : 0.f)) * scale;
  }
}

template <bool kBackward, bool kTransform>
__global__ void __launch_bounds__(kRowThreads)
    ce_rows_kernel(__nv_bfloat16* __restrict__ logits, int64_t ld, int64_t vocab,
                   const int32_t* __restrict__ targets, const float* __restrict__ row_weights,
                   const float* __restrict__ weight_sum, int64_t row0,
                   float* __restrict__ row_loss, int32_t* __restrict__ argmax,
                   uint8_t* __restrict__ correct, LogitTransform tr) {
  auto z_of = [&](float x) { return kTransform ? tr.Apply(x) : x; };
  __shared__ RowStats warp_stats[kRowThreads / 32];
  __shared__ float shared_lse;
  const int64_t local_row = blockIdx.x;
  const int64_t row = row0 + local_row;
  __nv_bfloat16* x = logits + local_row * ld;
  const int64_t nvec = vocab / 8;

  RowStats s{-INFINITY, 0.f, -INFINITY, INT_MAX};
  for (int64_t i = threadIdx.x; i < nvec; i += kRowThreads) {
    uint4 u = reinterpret_cast<const uint4*>(x)[i];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    float v[8];
    for (int k = 0; k < 4; ++k) {
      float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = z_of(f.x);
      v[2 * k + 1] = z_of(f.y);
    }
    Accumulate(s, v, 8, i * 8);
  }
  for (int64_t j = nvec * 8 + threadIdx.x; j < vocab; j += kRowThreads) {
    float v = z_of(__bfloat162float(x[j]));
    Accumulate(s, &v, 1, j);
  }
  s = WarpCombine(s);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_stats[warp] = s;
  __syncthreads();
  const int32_t target = targets[row];
  const float w = row_weights[row];
  const bool valid = target >= 0 && target < vocab && w != 0.f;
  if (warp == 0) {
    s = lane < kRowThreads / 32 ? warp_stats[lane] : RowStats{-INFINITY, 0.f, -INFINITY, INT_MAX};
    s = WarpCombine(s);
    if (lane == 0) {
      float lse = s.max + __logf(s.sum);
      shared_lse = lse;
      float target_logit = valid ? z_of(__bfloat162float(x[target])) : 0.f;
      row_loss[row] = valid ? w * (lse - target_logit) : 0.f;
      if (argmax) argmax[row] = s.best_index;
      if (correct) correct[row] = valid && s.best_index == target;
    }
  }
  if constexpr (kBackward) {
    __syncthreads();
    const float lse = shared_lse;
    const float wsum = *weight_sum;
    const float scale = valid && wsum != 0.f ? w / wsum : 0.f;
    for (int64_t i = threadIdx.x; i < nvec; i += kRowThreads) {
      uint4 u = reinterpret_cast<const uint4*>(x)[i];
      __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
      for (int k = 0; k < 4; ++k) {
        float2 f = __bfloat1622float2(h[k]);
        int64_t j = i * 8 + 2 * k;
        f.x = RowGrad<kTransform>(tr, f.x, lse, j == target, scale);
        f.y = RowGrad<kTransform>(tr, f.y, lse, j + 1 == target, scale);
        h[k] = __float22bfloat162_rn(f);
      }
      reinterpret_cast<uint4*>(x)[i] = u;
    }
    for (int64_t j = nvec * 8 + threadIdx.x; j < vocab; j += kRowThreads) {
      float v = __bfloat162float(x[j]);
      x[j] = __float2bfloat16_rn(RowGrad<kTransform>(tr, v, lse, j == target, scale));
    }
  }
}

__device__ float BlockSum(float v) {
  __shared__ float partial[kSumThreads / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
  if (threadIdx.x < 32)
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;  // valid in thread 0
}

// One block: sum of weights over rows with a target in [0, V).
__global__ void ce_weight_sum_kernel(const int32_t* targets, const float* row_weights,
                                     int64_t rows, int64_t vocab, float* weight_sum) {
  float acc = 0.f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (targets[r] >= 0 && targets[r] < vocab) acc += row_weights[r];
  acc = BlockSum(acc);
  if (threadIdx.x == 0) *weight_sum = acc;
}

// One block: loss = sum(row_loss) / weight_sum (0 when the weights sum to 0).
__global__ void ce_loss_kernel(const float* row_loss, int64_t rows, const float* weight_sum,
                               float* loss) {
  float acc = 0.f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) acc += row_loss[r];
  acc = BlockSum(acc);
  if (threadIdx.x == 0) *loss = *weight_sum != 0.f ? acc / *weight_sum : 0.f;
}

}  // namespace

cudaError_t LaunchCeWeightSum(const int32_t* targets, const float* row_weights, int64_t rows,
                              int64_t vocab, float* weight_sum, Stream s) {
  ce_weight_sum_kernel<<<1, kSumThreads, 0, s>>>(targets, row_weights, rows, vocab, weight_sum);
  return cudaGetLastError();
}

cudaError_t LaunchCeRows(bool backward, void* logits, int64_t n, int64_t ld, int64_t vocab,
                         const int32_t* targets, const float* row_weights,
                         const float* weight_sum, int64_t row0, float* row_loss,
                         int32_t* argmax, uint8_t* correct, Stream s, float multiplier,
                         float softcap) {
  auto* x = static_cast<__nv_bfloat16*>(logits);
  const LogitTransform tr{multiplier, softcap, softcap > 0.f ? multiplier / softcap : 0.f};
  const bool transform = multiplier != 1.f || softcap != 0.f;
  auto launch = [&](auto kernel) {
    kernel<<<n, kRowThreads, 0, s>>>(x, ld, vocab, targets, row_weights, weight_sum, row0,
                                     row_loss, argmax, correct, tr);
  };
  if (backward)
    transform ? launch(ce_rows_kernel<true, true>) : launch(ce_rows_kernel<true, false>);
  else
    transform ? launch(ce_rows_kernel<false, true>) : launch(ce_rows_kernel<false, false>);
  return cudaGetLastError();
}

cudaError_t LaunchCeLoss(const float* row_loss, int64_t rows, const float* weight_sum,
                         float* loss, Stream s) {
  ce_loss_kernel<<<1, kSumThreads, 0, s>>>(row_loss, rows, weight_sum, loss);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
