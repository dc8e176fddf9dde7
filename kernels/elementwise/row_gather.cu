// CUDA row gather. Algorithm: a grid-stride loop over (row, copy unit); 16-byte units when
// the row size and both pointers allow, 4-byte or single bytes otherwise. Raw bits move.
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/elementwise/row_gather_kernels.h"

namespace tandem::kernels {
namespace {

// out: [n, units], rows: [n], table: [m, units]; Unit is the copy granule.
template <typename Unit>
__global__ void row_gather_kernel(Unit* out, const int32_t* rows, const Unit* table, int64_t n,
                                  int64_t m, int64_t units) {
  const int64_t items = n * units;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < items;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = idx / units, c = idx % units;
    const int64_t src = __ldg(rows + r);
    Unit v{};
    if (src >= 0 && src < m) v = __ldg(table + src * units + c);
    out[idx] = v;
  }
}

template <typename Unit>
cudaError_t Launch(void* out, const int32_t* rows, const void* table, int64_t n, int64_t m,
                   int64_t row_bytes, Stream s) {
  constexpr int kThreads = 256;
  const int64_t units = row_bytes / static_cast<int64_t>(sizeof(Unit));
  row_gather_kernel<Unit><<<cuda_detail::GridFor(n * units, kThreads), kThreads, 0, s>>>(
      static_cast<Unit*>(out), rows, static_cast<const Unit*>(table), n, m, units);
  return cudaGetLastError();
}

bool Aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

cudaError_t LaunchRowGather(void* out, const int32_t* rows, const void* table, int64_t n,
                            int64_t m, int64_t row_bytes, Stream s) {
  if (row_bytes % 16 == 0 && Aligned(out, 16) && Aligned(table, 16))
    return Launch<uint4>(out, rows, table, n, m, row_bytes, s);
  if (row_bytes % 4 == 0 && Aligned(out, 4) && Aligned(table, 4))
    return Launch<unsigned>(out, rows, table, n, m, row_bytes, s);
  return Launch<unsigned char>(out, rows, table, n, m, row_bytes, s);
}

}  // namespace tandem::kernels
