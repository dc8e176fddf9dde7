// Device wrappers of Hopper's warpgroup MMA (wgmma.mma_async, sm_90a; bf16 in, fp32
// accumulate) and of the 128-byte-swizzled shared-memory tiles it reads: descriptors, the
// ordering fences, commit / wait, and the MMA shapes the kernels use. ptx.cuh holds the
// mma.sync-era instructions (cp.async, ldmatrix, mma.sync) these kernels use beside them.
//
// SW128 tile: a [rows][D] bf16 tile (rows % 8 == 0, D % 64 == 0) is stored as D / 64 panels of
// [rows][64]; row r of a panel is 128 bytes at r * 128 and its 16-byte chunk c sits at chunk
// c ^ (r % 8) (Swizzle<3,4,3>, the layout TMA's SWIZZLE_128B writes); panels are rows * 128
// bytes apart and 1024-byte aligned. wgmma reads such a tile two ways (PTX ISA, "matrix
// descriptor", canonical layouts):
//   K-major, k = the tile's columns (A = Q, B = K for S = Q K^T): SBO = 1024 (next 8 rows), LBO
//   unused; a k-step of 16 columns is +32 bytes within a panel, the next panel + rows * 128.
//   MN-major, k = the tile's rows (B = K for dQ = dS K, transpose bit set): SBO = 1024 (next 8
//   rows along k), LBO = rows * 128 (next 64 columns along n); a k-step of 16 rows is +2048.
// Accumulators: m64nN gives warp w of the warpgroup rows 16 w .. 16 w + 15 in mma.sync's C
// layout per 8 columns (d[n][0..3] = rows gid, gid + 8, columns 8 n + 2 tig, + 1; lane =
// 4 gid + tig), and a register A operand is mma.sync's A fragment of those rows (ptx.cuh).
// Ordering: Fence() before the first MMA of a batch (the asm statements make the compiler
// settle the registers it reads), Commit() after it, Wait<N>() before reading its results
// (FenceRegs keeps the compiler from moving those reads above the wait); FenceProxyAsync()
// after cp.async data lands, before wgmma (the async proxy) reads it.
// Accumulate or overwrite: the first k-step of a product passes kAccumulate = false, which
// makes D write-only for the compiler. A D with an earlier value would be a definition ptxas
// must order against the MMAs in flight, and it then serializes them (ptxas says so only in
// an info line, C7514 / C7515 / C7518).
// Thread-safety: device functions only; nothing global.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

// wgmma exists only on sm_90a (the 'a' target's architecture-specific features).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kernels/core/wgmma.cuh needs sm_90a (wgmma): set CMAKE_CUDA_ARCHITECTURES=90a"
#endif

namespace tandem::kernels::wgmma {

// Byte offset of 16-byte chunk `chunk` (columns 8 chunk .. 8 chunk + 7) of row r of an SW128
// tile of `rows`.
__device__ inline uint32_t Sw128Chunk(int rows, int r, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * rows * 128 + r * 128 +
                               (((chunk & 7) ^ (r & 7)) << 4));
}
// Byte offset of element (r, c) (c % 8 == 0: its 16-byte chunk) of an SW128 tile of `rows`:
// Sw128Chunk(rows, r, c / 8). Written out rather than forwarded: the kernels' instruction
// streams were measured with each form where they use it.
__device__ inline uint32_t Sw128(int rows, int r, int c) {
  return static_cast<uint32_t>((c >> 6) * rows * 128 + r * 128 +
                               ((((c & 63) >> 3) ^ (r & 7)) << 4));
}

// Shared-memory matrix descriptor with 128-byte swizzle; offsets in bytes.
__device__ inline uint64_t Desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (uint64_t{1} << 62);
}

__device__ inline void Fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void Commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ inline void Wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ inline void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving reads of accumulators across Wait().
template <int N>
__device__ inline void FenceRegs(float (&d)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[n][e])::"memory");
}

// The accumulator operands of one instruction, d[N / 8][4] in order, each as C(element): C is
// TANDEM_WGMMA_RW (read and written: accumulate) or TANDEM_WGMMA_WO (written only: overwrite).
#define TANDEM_WGMMA_RW(x) "+f"(x)
#define TANDEM_WGMMA_WO(x) "=f"(x)
#define TANDEM_WGMMA_D4(C, n) C(d[n][0]), C(d[n][1]), C(d[n][2]), C(d[n][3])
#define TANDEM_WGMMA_D64(C)                                                                   \
  TANDEM_WGMMA_D4(C, 0), TANDEM_WGMMA_D4(C, 1), TANDEM_WGMMA_D4(C, 2), TANDEM_WGMMA_D4(C, 3), \
      TANDEM_WGMMA_D4(C, 4), TANDEM_WGMMA_D4(C, 5), TANDEM_WGMMA_D4(C, 6), TANDEM_WGMMA_D4(C, 7)
#define TANDEM_WGMMA_D128(C)                                                                 \
  TANDEM_WGMMA_D64(C), TANDEM_WGMMA_D4(C, 8), TANDEM_WGMMA_D4(C, 9), TANDEM_WGMMA_D4(C, 10), \
      TANDEM_WGMMA_D4(C, 11), TANDEM_WGMMA_D4(C, 12), TANDEM_WGMMA_D4(C, 13),                \
      TANDEM_WGMMA_D4(C, 14), TANDEM_WGMMA_D4(C, 15)
#define TANDEM_WGMMA_D64_REGS                                                                   \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24," \
  "%25,%26,%27,%28,%29,%30,%31}"
#define TANDEM_WGMMA_D128_REGS                                                                  \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24," \
  "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,"    \
  "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
// One wgmma of SHAPE with accumulator registers D_REGS / operands D_OPS, A and B operands AB
// (the inputs after the colons), then scale-d (1 with kAccumulate, else 0) and the remaining
// immediates IMM (scale-a, scale-b, transpose bits).
#define TANDEM_WGMMA_ISSUE(SHAPE, D_REGS, D_OPS, AB, IMM, ...)                          \
  if constexpr (kAccumulate)                                                            \
    asm volatile("wgmma.mma_async.sync.aligned." SHAPE ".f32.bf16.bf16 " D_REGS ", " AB \
                 ", 1, " IMM ";\n"                                                      \
                 : D_OPS(TANDEM_WGMMA_RW)                                               \
                 : __VA_ARGS__);                                                        \
  else                                                                                  \
    asm volatile("wgmma.mma_async.sync.aligned." SHAPE ".f32.bf16.bf16 " D_REGS ", " AB \
                 ", 0, " IMM ";\n"                                                      \
                 : D_OPS(TANDEM_WGMMA_WO)                                               \
                 : __VA_ARGS__)

// D[64 x 64] (+)= A[64 x 16] B[16 x 64], both K-major in shared memory (A's rows and B's
// columns are the tiles' rows: S = Q K^T).
template <bool kAccumulate>
__device__ inline void MmaSS64(float (&d)[8][4], uint64_t a, uint64_t b) {
  TANDEM_WGMMA_ISSUE("m64n64k16", TANDEM_WGMMA_D64_REGS, TANDEM_WGMMA_D64, "%32, %33", "1, 1, 0, 0",
                     "l"(a), "l"(b));
}

// MmaSS64 with the accumulate flag a run-time predicate: D is read and written either way.
// The query-major backward issues S and dP through it (with the immediate flag ptxas
// schedules that kernel differently; not measured).
__device__ inline void MmaSS64(float (&d)[8][4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " TANDEM_WGMMA_D64_REGS
      ", %32, %33, p, 1, 1, 0, 0;\n}\n"
      : TANDEM_WGMMA_D64(TANDEM_WGMMA_RW)
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// D[64 x N] (+)= A[64 x 16] B[16 x N], N = 64 or 128: A from registers (mma.sync's A fragment
// per warp), B MN-major in shared memory, read through the transpose bit (dQ += dS K).
template <int N, bool kAccumulate = true>
__device__ inline void MmaRSTransB(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b) {
  static_assert(N == 64 || N == 128, "m64n64k16 or m64n128k16");
  if constexpr (N == 64) {
    TANDEM_WGMMA_ISSUE("m64n64k16", TANDEM_WGMMA_D64_REGS, TANDEM_WGMMA_D64,
                       "{%32,%33,%34,%35}, %36", "1, 1, 1", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                       "r"(a[3]), "l"(b));
  } else {
    TANDEM_WGMMA_ISSUE("m64n128k16", TANDEM_WGMMA_D128_REGS, TANDEM_WGMMA_D128,
                       "{%64,%65,%66,%67}, %68", "1, 1, 1", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                       "r"(a[3]), "l"(b));
  }
}

#undef TANDEM_WGMMA_ISSUE
#undef TANDEM_WGMMA_D128_REGS
#undef TANDEM_WGMMA_D64_REGS
#undef TANDEM_WGMMA_D128
#undef TANDEM_WGMMA_D64
#undef TANDEM_WGMMA_D4
#undef TANDEM_WGMMA_WO
#undef TANDEM_WGMMA_RW

}  // namespace tandem::kernels::wgmma
