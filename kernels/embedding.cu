// CUDA embedding gather. Algorithm: a grid-stride loop over (token, group of kVec columns);
// 16-byte copies when H % 8 == 0 and the pointers are aligned. Data moves as raw bits.
#include "kernels/elementwise_vec.cuh"
#include "kernels/embedding_kernels.h"

namespace tandem::kernels {
namespace {

// out: [tokens, h], ids: [tokens], weight: [vocab, h]; Unit is the copy granule.
template <typename Unit>
__global__ void embedding_fwd_kernel(Unit* out, const int32_t* ids, const Unit* weight,
                                     int64_t tokens, int64_t vocab, int64_t units_per_row) {
  const int64_t items = tokens * units_per_row;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < items;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = idx / units_per_row, c = idx % units_per_row;
    const int64_t id = __ldg(ids + t);
    Unit v{};
    if (id >= 0 && id < vocab) v = __ldg(weight + id * units_per_row + c);
    out[idx] = v;
  }
}

}  // namespace

cudaError_t LaunchEmbeddingForward(void* out, const int32_t* ids, const void* weight,
                                   int64_t tokens, int64_t vocab, int64_t h, Stream s) {
  constexpr int kThreads = 256;
  if (h % 8 == 0 && cuda_detail::Aligned16({out, weight})) {
    embedding_fwd_kernel<uint4><<<cuda_detail::GridFor(tokens * h / 8, kThreads), kThreads, 0, s>>>(
        static_cast<uint4*>(out), ids, static_cast<const uint4*>(weight), tokens, vocab, h / 8);
  } else {
    embedding_fwd_kernel<unsigned short>
        <<<cuda_detail::GridFor(tokens * h, kThreads), kThreads, 0, s>>>(
            static_cast<unsigned short*>(out), ids, static_cast<const unsigned short*>(weight),
            tokens, vocab, h);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels
