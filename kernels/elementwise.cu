// CUDA residual add and casts. Algorithm: a grid-stride loop over vectors of kVec elements
// (16-byte loads of the narrower type), then the few tail elements one by one. Falls back to
// kVec = 1 when a pointer is not 16-byte aligned.
#include "kernels/elementwise_kernels.h"
#include "kernels/elementwise_vec.cuh"

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

cudaError_t LaunchCast(void* out, const void* in, int64_t n, bool to_f32, Stream s) {
  using bf = __nv_bfloat16;
  if (to_f32) return LaunchCastT(static_cast<float*>(out), static_cast<const bf*>(in), n, s);
  return LaunchCastT(static_cast<bf*>(out), static_cast<const float*>(in), n, s);
}

}  // namespace tandem::kernels
