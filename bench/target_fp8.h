// Pieces of `tandem-bench target --precision fp8`: the block-scaled FP8 GEMM rate (the
// Qwen3-8B projections and an 8192^3 ceiling, through kernels::Fp8Gemm) and the fidelity of
// captured hidden states (per-token cosine, relative L2) of one forward against another.
// Thread-safety: stateless; CUDA work on device 0 and the given stream.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/core/dtype.h"
#include "runtime/core/status.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/gemm/gemm.h"
#endif

namespace tandem::bench {

struct CaptureFidelity {
  double mean_cos = 0, min_cos = 0, rel_l2 = 0;
};
// got, want: [t, h] row-major; cosine per row (token), relative L2 over the whole matrix.
CaptureFidelity CompareCapture(const std::vector<kernels::bf16>& got,
                               const std::vector<kernels::bf16>& want, int64_t t, int64_t h);

#ifdef TANDEM_HAVE_CUDA
// TFLOP/s of y[m, n] = x[m, k] W[n, k]^T as a block-scaled e4m3 GEMM (1x128 / 128x128 scales,
// bf16 out) on random data, mean over `iters` back-to-back calls.
Result<double> Fp8GemmTflops(kernels::GemmContext* ctx, int64_t m, int64_t n, int64_t k,
                             kernels::Stream stream, int iters);
// Same shape through the bf16 cuBLASLt GEMM, for the side-by-side table.
Result<double> Bf16GemmTflops(kernels::GemmContext* ctx, int64_t m, int64_t n, int64_t k,
                              kernels::Stream stream, int iters);
#endif

}  // namespace tandem::bench
