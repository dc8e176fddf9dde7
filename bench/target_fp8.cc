#include "bench/target_fp8.h"

#include <algorithm>
#include <cmath>

#ifdef TANDEM_HAVE_CUDA
#include "bench/bench_util.h"
#include "kernels/core/device_pools.h"
#include "kernels/gemm/fp8.h"
#endif

namespace tandem::bench {

CaptureFidelity CompareCapture(const std::vector<kernels::bf16>& got,
                               const std::vector<kernels::bf16>& want, int64_t t, int64_t h) {
  CaptureFidelity f;
  f.min_cos = 2;
  double err = 0, ref = 0, sum_cos = 0;
  for (int64_t r = 0; r < t; ++r) {
    double dot = 0, gg = 0, ww = 0;
    for (int64_t c = 0; c < h; ++c) {
      const double g = got[r * h + c].f(), w = want[r * h + c].f();
      dot += g * w, gg += g * g, ww += w * w;
      err += (g - w) * (g - w), ref += w * w;
    }
    const double cos = dot / std::sqrt(std::max(gg * ww, 1e-300));
    sum_cos += cos;
    f.min_cos = std::min(f.min_cos, cos);
  }
  f.mean_cos = sum_cos / static_cast<double>(t);
  f.rel_l2 = std::sqrt(err / std::max(ref, 1e-300));
  return f;
}

#ifdef TANDEM_HAVE_CUDA
namespace {

struct Operands {
  kernels::Tensor x, w, c, xq, xs, wq, ws;
};

Result<Operands> MakeOperands(kernels::DevicePools& pools, int64_t m, int64_t n, int64_t k,
                              bool fp8, kernels::Stream stream) {
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  Operands o;
  ASSIGN_OR_RETURN(o.x, RandomBf16(*pool, {m, k}, 1.f, 71, stream));
  ASSIGN_OR_RETURN(o.w, RandomBf16(*pool, {n, k}, 0.02f, 72, stream));
  ASSIGN_OR_RETURN(o.c, kernels::Tensor::Empty(*pool, kernels::DType::kBF16, {m, n}, stream));
  if (!fp8) return o;
  using kernels::DType;
  ASSIGN_OR_RETURN(o.xq, kernels::Tensor::Empty(*pool, DType::kF8E4M3, {m, k}, stream));
  ASSIGN_OR_RETURN(o.xs, kernels::Tensor::Empty(*pool, DType::kF32, {kernels::Fp8ActScaleElems(m, k)}, stream));
  ASSIGN_OR_RETURN(o.wq, kernels::Tensor::Empty(*pool, DType::kF8E4M3, {n, k}, stream));
  ASSIGN_OR_RETURN(o.ws, kernels::Tensor::Empty(*pool, DType::kF32,
                                                {kernels::Fp8Blocks(n), kernels::Fp8WeightScaleLd(k)}, stream));
  RETURN_IF_ERROR(kernels::QuantizeFp8Activation(o.x.view(), {o.xq.view(), o.xs.view()}, stream));
  RETURN_IF_ERROR(kernels::QuantizeFp8Weight(o.w.view(), {o.wq.view(), o.ws.view()}, stream));
  return o;
}

}  // namespace

Result<double> Fp8GemmTflops(kernels::GemmContext* ctx, int64_t m, int64_t n, int64_t k,
                             kernels::Stream stream, int iters) {
  kernels::DevicePools pools;  // outlives the operands
  ASSIGN_OR_RETURN(Operands o, MakeOperands(pools, m, n, k, true, stream));
  kernels::GemmOptions opt;
  opt.trans_b = true;
  const kernels::Fp8GroupActivation a{o.xq.view(), o.xs.view()};
  const kernels::Fp8BlockWeight w{o.wq.view(), o.ws.view()};
  ASSIGN_OR_RETURN(double ms, TimeMs(stream, iters, 3, [&] {
                     return kernels::Fp8Gemm(ctx, a, w, o.c.view(), opt, stream);
                   }));
  return 2.0 * m * n * k / ms / 1e9;
}

Result<double> Bf16GemmTflops(kernels::GemmContext* ctx, int64_t m, int64_t n, int64_t k,
                              kernels::Stream stream, int iters) {
  kernels::DevicePools pools;  // outlives the operands
  ASSIGN_OR_RETURN(Operands o, MakeOperands(pools, m, n, k, false, stream));
  kernels::GemmOptions opt;
  opt.trans_b = true;
  ASSIGN_OR_RETURN(double ms, TimeMs(stream, iters, 3, [&] {
                     return kernels::Gemm(ctx, o.x.view(), o.w.view(), o.c.view(), opt, stream);
                   }));
  return 2.0 * m * n * k / ms / 1e9;
}
#endif

}  // namespace tandem::bench
