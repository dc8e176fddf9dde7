// Internal to kernels/attention: Hopper warpgroup MMA (wgmma, sm_90a) wrappers for the
// key-major context kernel (dflash_wgmma_ctx.cu): 128-byte-swizzled shared-memory tiles,
// the chunk offsets of its tiles and the instruction shapes it uses (bf16 in, fp32
// accumulate; the forward, dflash_wgmma_fwd.cu, uses them too); the descriptor and ordering
// primitives come from dflash_wgmma_device.cuh.
//
// Tile layout (the hardware's 128-byte swizzle, the same one TMA's SWIZZLE_128B writes): a
// [rows][64] bf16 block is rows of 128 bytes; the 16-byte chunk c of row r sits at chunk
// c ^ (r % 8) of that row. Blocks start on 1024-byte boundaries. A [rows][128] tile is two such
// blocks, dims 0..63 then 64..127 (rows * 128 bytes apart).
// The same tile serves as a K-major operand (rows = M or N, dims = K: S^T = K Q^T) and as an
// MN-major B (rows = K, dims = N: dV = P^T dO, via the transpose bit).
// Accumulator layout of m64nNk16 (per warp w of the warpgroup, lane = 4 gid + tig): element
// [n][e] is row 16 w + gid + 8 (e / 2), column 8 n + 2 tig + (e % 2), as mma.sync's C; the
// register A fragment of m64nNk16 is mma.sync's A fragment per warp (ptx.cuh).
// Thread-safety: device functions only; nothing global.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/dflash_wgmma_device.cuh"

namespace tandem::kernels::attention_internal::wgmma {

// Byte offset of 16-byte chunk c (0 .. 2 * 8 - 1 over 128 dims) of row r in a swizzled
// [rows][128] bf16 tile.
__device__ inline uint32_t SwizzledChunk(int rows, int r, int c) {
  return static_cast<uint32_t>((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// The descriptor, fence, commit, wait and register-fence primitives are the query-major
// kernel's (dflash_wgmma_device.cuh; same instructions).
using wg::Commit;
using wg::Desc;
using wg::Fence;
using wg::FenceProxyAsync;
using wg::FenceRegs;
using wg::Wait;

// D[64 x 64] = A[64 x 16] B[16 x 64] (kAccumulate: D +=), both K-major in shared memory. The
// first k-step of a product uses kAccumulate = false: D is only written, so its registers
// need no earlier value (an earlier value would be a non-wgmma definition that ptxas must
// order against the MMAs in flight, and it then serializes them).
template <bool kAccumulate>
__device__ inline void MmaSS64x64(float (&d)[8][4], uint64_t a, uint64_t b) {
  if constexpr (kAccumulate) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%"
        "24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
          "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
          "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
          "+f"(d[7][2]), "+f"(d[7][3])
        : "l"(a), "l"(b));
  } else {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%"
        "24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 0, 1, 1, 0, 0;\n"
        : "=f"(d[0][0]), "=f"(d[0][1]), "=f"(d[0][2]), "=f"(d[0][3]), "=f"(d[1][0]), "=f"(d[1][1]),
          "=f"(d[1][2]), "=f"(d[1][3]), "=f"(d[2][0]), "=f"(d[2][1]), "=f"(d[2][2]), "=f"(d[2][3]),
          "=f"(d[3][0]), "=f"(d[3][1]), "=f"(d[3][2]), "=f"(d[3][3]), "=f"(d[4][0]), "=f"(d[4][1]),
          "=f"(d[4][2]), "=f"(d[4][3]), "=f"(d[5][0]), "=f"(d[5][1]), "=f"(d[5][2]), "=f"(d[5][3]),
          "=f"(d[6][0]), "=f"(d[6][1]), "=f"(d[6][2]), "=f"(d[6][3]), "=f"(d[7][0]), "=f"(d[7][1]),
          "=f"(d[7][2]), "=f"(d[7][3])
        : "l"(a), "l"(b));
  }
}

// D[64 x 64] = A[64 x 16] B[16 x 64] (kAccumulate: D +=): A from registers (mma.sync A
// fragment per warp), B K-major in shared memory. kAccumulate = false as in MmaSS64x64.
template <bool kAccumulate>
__device__ inline void MmaRS64x64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (kAccumulate) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%"
        "24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, 1, 1, 1, 0;\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
          "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
          "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
          "+f"(d[7][2]), "+f"(d[7][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
  } else {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%"
        "24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, 0, 1, 1, 0;\n"
        : "=f"(d[0][0]), "=f"(d[0][1]), "=f"(d[0][2]), "=f"(d[0][3]), "=f"(d[1][0]), "=f"(d[1][1]),
          "=f"(d[1][2]), "=f"(d[1][3]), "=f"(d[2][0]), "=f"(d[2][1]), "=f"(d[2][2]), "=f"(d[2][3]),
          "=f"(d[3][0]), "=f"(d[3][1]), "=f"(d[3][2]), "=f"(d[3][3]), "=f"(d[4][0]), "=f"(d[4][1]),
          "=f"(d[4][2]), "=f"(d[4][3]), "=f"(d[5][0]), "=f"(d[5][1]), "=f"(d[5][2]), "=f"(d[5][3]),
          "=f"(d[6][0]), "=f"(d[6][1]), "=f"(d[6][2]), "=f"(d[6][3]), "=f"(d[7][0]), "=f"(d[7][1]),
          "=f"(d[7][2]), "=f"(d[7][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
  }
}

// D[64 x 128] += A[64 x 16] B[16 x 128]: A from registers (mma.sync A fragment per warp), B
// MN-major in shared memory (transpose bit set).
__device__ inline void MmaRS64x128T(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) {
  wg::MmaRS128T(d, a, b);  // the same instruction (m64n128k16, A from registers, B transposed)
}

}  // namespace tandem::kernels::attention_internal::wgmma
