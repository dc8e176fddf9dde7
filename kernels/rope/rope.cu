// CUDA RoPE. Algorithm: a grid-stride loop over (token, head, group of kVec rotation pairs);
// each item loads kVec elements from each half (16-byte loads when aligned), rotates them in
// fp32 with sincosf of pos * inv_freq, and stores both halves. The inverse frequencies come
// in as a kernel argument (the host table of RopeInvFreq) and are staged in shared memory.
// Pass-through dims beyond rotary_dim are copied by a second loop unless out aliases x.
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/rope/rope_kernels.h"

namespace tandem::kernels {
namespace {

using cuda_detail::GridFor;
using cuda_detail::LoadVec;
using cuda_detail::StoreVec;
using bf16_t = __nv_bfloat16;

constexpr int kMaxHalf = 256;  // kRopeMaxRotaryDim / 2

struct InvFreq {
  float v[kMaxHalf];
};

// out, x: [tokens, heads, head_dim]; pos: [tokens]
template <int kVec>
__global__ void rope_kernel(bf16_t* out, const bf16_t* x, const int32_t* pos, InvFreq f,
                            int64_t tokens, int heads, int head_dim, int half, float sign,
                            bool copy_pass) {
  __shared__ float inv[kMaxHalf];
  for (int i = threadIdx.x; i < half; i += blockDim.x) inv[i] = f.v[i];
  __syncthreads();
  const int nv = half / kVec;
  const int64_t items = tokens * heads * nv;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < items; idx += stride) {
    const int v = static_cast<int>(idx % nv);
    const int64_t th = idx / nv;  // token * heads + head
    const float p = static_cast<float>(pos[th / heads]);
    const int64_t base = th * head_dim + v * kVec;
    float x1[kVec], x2[kVec], o1[kVec], o2[kVec];
    LoadVec<kVec>(x + base, x1);
    LoadVec<kVec>(x + base + half, x2);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float sn, cs;
      sincosf(p * inv[v * kVec + k], &sn, &cs);
      sn *= sign;
      o1[k] = x1[k] * cs - x2[k] * sn;
      o2[k] = x2[k] * cs + x1[k] * sn;
    }
    StoreVec<kVec>(out + base, o1);
    StoreVec<kVec>(out + base + half, o2);
  }
  if (!copy_pass) return;
  const int npv = (head_dim - 2 * half) / kVec;
  const int64_t pass_items = tokens * heads * npv;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < pass_items;
       idx += stride) {
    const int64_t off = (idx / npv) * head_dim + 2 * half + (idx % npv) * kVec;
    float tmp[kVec];
    LoadVec<kVec>(x + off, tmp);
    StoreVec<kVec>(out + off, tmp);
  }
}

}  // namespace

cudaError_t LaunchRope(void* out, const void* x, const int32_t* pos, const float* inv_freq,
                       int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                       float sign, Stream s) {
  const int half = static_cast<int>(rotary_dim / 2);
  if (half > kMaxHalf || rotary_dim > head_dim) return cudaErrorInvalidValue;
  InvFreq f{};
  for (int i = 0; i < half; ++i) f.v[i] = inv_freq[i];
  const bool copy_pass = out != x && rotary_dim < head_dim;
  constexpr int kThreads = 256;
  auto* o = static_cast<bf16_t*>(out);
  const auto* in = static_cast<const bf16_t*>(x);
  if (half % 8 == 0 && head_dim % 8 == 0 && cuda_detail::Aligned16({out, x})) {
    const int64_t work = tokens * heads * std::max<int64_t>(half, head_dim - 2 * half) / 8;
    rope_kernel<8><<<GridFor(work, kThreads), kThreads, 0, s>>>(
        o, in, pos, f, tokens, static_cast<int>(heads), static_cast<int>(head_dim), half, sign,
        copy_pass);
  } else {
    const int64_t work = tokens * heads * std::max<int64_t>(half, head_dim - 2 * half);
    rope_kernel<1><<<GridFor(work, kThreads), kThreads, 0, s>>>(
        o, in, pos, f, tokens, static_cast<int>(heads), static_cast<int>(head_dim), half, sign,
        copy_pass);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels
