// CUDA residual add, casts and scale. Algorithm: a grid-stride loop over vectors of kVec elements
// (16-byte loads of the narrower type), then the few tail elements one by one. Falls back to
// kVec = 1 when a pointer is not 16-byte aligned. The widening cast bf16 -> f32 reads a third
// of what it moves, so one 16-byte load per thread keeps too few bytes in flight (~32 KB per
// SM); it instead takes vectors of 4 bf16 (8-byte load, one 16-byte float4 store, so every
// warp instruction covers one contiguous 256/512-byte span) and issues kUnroll of them per
// thread before the first store (128 KB of loads in flight per SM at full occupancy).
#include "kernels/elementwise/elementwise_kernels.h"
#include "kernels/elementwise/elementwise_vec.cuh"

namespace tandem::kernels {
namespace {

using cuda_detail::GridFor;
using cuda_detail::LoadVec;
using cuda_detail::StoreVec;

// out, a, b: T [n]
template <typename T, int kVec>
__global__ void residual_add_kernel(T* out, const T* a, const T* b, int64_t n) {
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < nvec; v += stride) {
    float x[kVec], y[kVec];
    LoadVec<kVec>(a + v * kVec, x);
    LoadVec<kVec>(b + v * kVec, y);
#pragma unroll
    for (int i = 0; i < kVec; ++i) x[i] += y[i];
    StoreVec<kVec>(out + v * kVec, x);
  }
  for (int64_t i = nvec * kVec + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = cuda_detail::FromF32<T>(cuda_detail::ToF32<T>(a[i]) + cuda_detail::ToF32<T>(b[i]));
}

// out, in: T [n]; out may alias in (each element is read before the same thread writes it).
template <typename T, int kVec>
__global__ void scale_kernel(T* out, const T* in, float scale, int64_t n) {
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < nvec; v += stride) {
    float x[kVec];
    LoadVec<kVec>(in + v * kVec, x);
#pragma unroll
    for (int i = 0; i < kVec; ++i) x[i] *= scale;
    StoreVec<kVec>(out + v * kVec, x);
  }
  for (int64_t i = nvec * kVec + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = cuda_detail::FromF32<T>(cuda_detail::ToF32<T>(in[i]) * scale);
}

// out: To [n], in: Ti [n]
template <typename To, typename Ti, int kVec>
__global__ void cast_kernel(To* out, const Ti* in, int64_t n) {
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < nvec; v += stride) {
    float x[kVec];
    LoadVec<kVec>(in + v * kVec, x);
    StoreVec<kVec>(out + v * kVec, x);
  }
  for (int64_t i = nvec * kVec + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = cuda_detail::FromF32<To>(cuda_detail::ToF32<Ti>(in[i]));
}

// out: f32 [n], in: bf16 [n]; in 8-byte and out 16-byte aligned. A block takes tiles of
// kUnroll * blockDim vectors of 4; thread t owns vectors t, t + blockDim, ... of its tile.
template <int kUnroll>
__global__ void __launch_bounds__(256, 8)
    cast_bf16_f32_kernel(float* out, const __nv_bfloat16* in, int64_t n) {
  const int64_t nvec = n / 4, tile = int64_t{kUnroll} * blockDim.x;
  for (int64_t base = blockIdx.x * tile; base < nvec; base += int64_t{gridDim.x} * tile) {
    const int64_t first = base + threadIdx.x, left = nvec - first;  // vectors from `first` on
    const uint2* src = reinterpret_cast<const uint2*>(in) + first;
    float4* dst = reinterpret_cast<float4*>(out) + first;
    uint2 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (int64_t{u} * blockDim.x < left) raw[u] = __ldcs(src + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (int64_t{u} * blockDim.x < left) {
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw[u].x));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw[u].y));
        dst[u * blockDim.x] = make_float4(lo.x, lo.y, hi.x, hi.y);
      }
    }
  }
  for (int64_t i = nvec * 4 + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

constexpr int kThreads = 256;

template <typename T>
cudaError_t LaunchAddT(T* o, const T* x, const T* y, int64_t n, Stream s) {
  constexpr int kVec = 16 / sizeof(T);
  if (cuda_detail::Aligned16({o, x, y})) {
    residual_add_kernel<T, kVec><<<GridFor(n / kVec + 1, kThreads), kThreads, 0, s>>>(o, x, y, n);
  } else {
    residual_add_kernel<T, 1><<<GridFor(n, kThreads), kThreads, 0, s>>>(o, x, y, n);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchScaleT(T* o, const T* x, float scale, int64_t n, Stream s) {
  constexpr int kVec = 16 / sizeof(T);
  if (cuda_detail::Aligned16({o, x})) {
    scale_kernel<T, kVec><<<GridFor(n / kVec + 1, kThreads), kThreads, 0, s>>>(o, x, scale, n);
  } else {
    scale_kernel<T, 1><<<GridFor(n, kThreads), kThreads, 0, s>>>(o, x, scale, n);
  }
  return cudaGetLastError();
}

template <typename To, typename Ti>
cudaError_t LaunchCastT(To* o, const Ti* x, int64_t n, Stream s) {
  constexpr int kVec = 8;  // 16 bytes of bf16, 32 of f32
  if (cuda_detail::Aligned16({o, x})) {
    cast_kernel<To, Ti, kVec><<<GridFor(n / kVec + 1, kThreads), kThreads, 0, s>>>(o, x, n);
  } else {
    cast_kernel<To, Ti, 1><<<GridFor(n, kThreads), kThreads, 0, s>>>(o, x, n);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchResidualAdd(void* out, const void* a, const void* b, int64_t n, bool is_bf16,
                              Stream s) {
  using bf = __nv_bfloat16;
  if (is_bf16)
    return LaunchAddT(static_cast<bf*>(out), static_cast<const bf*>(a), static_cast<const bf*>(b),
                      n, s);
  return LaunchAddT(static_cast<float*>(out), static_cast<const float*>(a),
                    static_cast<const float*>(b), n, s);
}

cudaError_t LaunchScale(void* out, const void* in, float scale, int64_t n, bool is_bf16,
                        Stream s) {
  using bf = __nv_bfloat16;
  if (is_bf16)
    return LaunchScaleT(static_cast<bf*>(out), static_cast<const bf*>(in), scale, n, s);
  return LaunchScaleT(static_cast<float*>(out), static_cast<const float*>(in), scale, n, s);
}

cudaError_t LaunchCast(void* out, const void* in, int64_t n, bool to_f32, Stream s) {
  using bf = __nv_bfloat16;
  if (to_f32) {
    if (!cuda_detail::Aligned16({out, in}))
      return LaunchCastT(static_cast<float*>(out), static_cast<const bf*>(in), n, s);
    constexpr int kUnroll = 8;
    cast_bf16_f32_kernel<kUnroll>
        <<<cuda_detail::GridFor(n / 4 / kUnroll + 1, kThreads), kThreads, 0, s>>>(
            static_cast<float*>(out), static_cast<const bf*>(in), n);
    return cudaGetLastError();
  }
  return LaunchCastT(static_cast<bf*>(out), static_cast<const float*>(in), n, s);
}

}  // namespace tandem::kernels
