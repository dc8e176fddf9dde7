// Device wrappers of the PTX instructions the tensor-core kernels share (attention's DFlash
// kernels, the chunked gated delta rule): cp.async (16 and 4 bytes), ldmatrix and mma.sync
// m16n8k16 (bf16 in, fp32 accumulate), and bf16x2 packing.
// Fragment layouts (PTX ISA, m16n8k16; lane = 4 * gid + tig):
//   A 16x16: a0 (gid, 2tig..+1), a1 (gid+8, 2tig..), a2 (gid, 2tig+8..), a3 (gid+8, 2tig+8..)
//   B 16x8:  b0 (k 2tig..+1, n gid), b1 (k 2tig+8..+1, n gid)
//   C 16x8:  c0,c1 (gid, 2tig..+1), c2,c3 (gid+8, 2tig..+1)
// ldmatrix x4 addressing used with these (lane l, mi = l / 8, r8 = l % 8):
//   A from row-major [m][k]:        row (l & 15), byte column (l >> 4) * 16        (Ldsm4)
//   A from [k][m] (A = X^T):         row (mi >> 1) * 8 + r8, byte column (mi & 1) * 16 (Ldsm4T)
//   B (two n8 tiles) from [n][k]:   row (mi >> 1) * 8 + r8, byte column (mi & 1) * 16 (Ldsm4)
//   B (two n8 tiles) from [k][n]:   row (mi & 1) * 8 + r8, byte column (mi >> 1) * 16 (Ldsm4T)
// Thread-safety: device functions only; nothing global.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::ptx {

__device__ inline uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; valid == false zero-fills the destination and reads nothing.
__device__ inline void CpAsync16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
// 4-byte async copy (through L1); valid == false zero-fills the destination.
__device__ inline void CpAsync4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ inline void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ inline void Ldsm4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}
__device__ inline void Ldsm4T(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}

__device__ inline void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as bf16x2, `lo` in the low half (the lower column / k index).
__device__ inline uint32_t Pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

}  // namespace tandem::kernels::ptx
