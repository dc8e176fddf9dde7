// Internal to kernels/linear_attention: what the chunked gated delta rule's CUDA files
// share (gated_delta_rule_chunked.cu: kernel 1 and the launcher;
// gated_delta_rule_chunked_state.cu: kernel 2): tile constants, the workspace layout and the
// cp.async row loader. Thread-safety: device code and constants only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/ptx.cuh"

namespace tandem::kernels::gdr_internal {

using bf16_t = __nv_bfloat16;
using ptx::CpAsync16;
using ptx::CpAsync4;
using ptx::CpAsyncCommit;
using ptx::CpAsyncWait;
using ptx::Ldsm4;
using ptx::Ldsm4T;
using ptx::Mma;
using ptx::Pack;

constexpr int BT = 64;        // chunk
constexpr int DK = 128;       // key head dim
constexpr int DV = 128;       // value head dim
constexpr int LDH = DK + 8;   // bf16 row pitch of [64, 128] tiles (16-byte pad: ldmatrix
                              // rows fall in distinct banks)
constexpr int LDT = BT + 8;   // bf16 row pitch of [64, 64] tiles
constexpr int LDA = BT + 4;   // f32 row pitch of A
constexpr int kThreads = 256;  // kernel 1

// The workspace, in the order and 256-byte alignment of GatedDeltaRuleChunkedWorkspaceBytes.
struct Workspace {
  bf16_t* tb;   // [hv][T][BT]  T diag(beta), each chunk's rows (lower triangular)
  bf16_t* aqk;  // [hv][T][BT]  the masked decayed Q^ K^^T, each chunk's rows
  float* rq;    // [hk][T]  1 / |q| (1 without the L2 norm)
  float* rk;    // [hk][T]  1 / |k|
  float* gc;    // [hv][T]
};

__host__ __device__ inline int64_t Align256(int64_t b) { return (b + 255) / 256 * 256; }

__device__ inline Workspace Carve(void* ws, int64_t t, int hk, int hv) {
  Workspace p;
  char* b = static_cast<char*>(ws);
  p.tb = reinterpret_cast<bf16_t*>(b);
  b += Align256(int64_t{hv} * t * BT * 2);
  p.aqk = reinterpret_cast<bf16_t*>(b);
  b += Align256(int64_t{hv} * t * BT * 2);
  p.rq = reinterpret_cast<float*>(b);
  b += Align256(int64_t{hk} * t * 4);
  p.rk = reinterpret_cast<float*>(b);
  b += Align256(int64_t{hk} * t * 4);
  p.gc = reinterpret_cast<float*>(b);
  return p;
}

// Async copy of rows [0, n) of a [*, 128] bf16 matrix (row pitch `stride` elements) to smem
// rows of pitch LDH; rows [n, 64) are zero-filled.
__device__ inline void LoadRows128(bf16_t* dst, const bf16_t* src, int64_t stride, int n) {
  constexpr int kRowsPerPass = kThreads / (DK / 8);
  const int r0 = threadIdx.x / (DK / 8), c = (threadIdx.x % (DK / 8)) * 8;
#pragma unroll
  for (int r = r0; r < BT; r += kRowsPerPass) {
    const bool valid = r < n;
    CpAsync16(dst + r * LDH + c, src + (valid ? r : 0) * stride + c, valid);
  }
}

// Kernel 2 over `docs` documents (grid and shared memory set here); q, k, v: the raw rows.
cudaError_t LaunchStateKernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                              int64_t q_stride, const bf16_t* k, int64_t k_stride,
                              const bf16_t* v, int64_t v_stride, const int32_t* cu, int docs,
                              int64_t tokens, int hk, int hv,
                              float scale, void* workspace, cudaStream_t stream);

}  // namespace tandem::kernels::gdr_internal
