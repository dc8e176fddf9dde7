// Fp8GemmRaw (kernels/gemm/fp8_raw.h): the shared checks, the CPU reference (float64 sums of
// the e4m3 codes' products) and the device dispatch (the CUDA version: gemm_cublaslt.cc).
// Thread-safety: stateless.
#include <array>

#include "kernels/gemm/fp8_format.h"
#include "kernels/gemm/fp8_raw.h"

namespace tandem::kernels {

namespace internal {
Status CheckFp8GemmRaw(const char* op, const TensorView& a, const TensorView& w,
                       const TensorView& c, int64_t batch) {
  RETURN_IF_ERROR(ExpectDType(op, "a", a, DType::kF8E4M3));
  RETURN_IF_ERROR(ExpectDType(op, "w", w, DType::kF8E4M3));
  RETURN_IF_ERROR(ExpectDType(op, "c", c, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(op, "w", w));
  if (batch < 1 || a.ndim() != 2 || w.ndim() != 3 || c.ndim() != 2 || w.dim(0) != batch ||
      a.dim(0) % batch != 0)
    return InvalidArgumentError("{}: a {} must be [batch M, K] and w {} [batch, N, K] with "
                                "batch {}", op, a.ToString(), w.ToString(), batch);
  const int64_t k = a.dim(1), n = w.dim(1);
  if (w.dim(2) != k || !(c.shape() == Shape{a.dim(0), n}))
    return InvalidArgumentError("{}: a {}, w {} and c {} disagree (c must be [batch M, N])", op,
                                a.ToString(), w.ToString(), c.ToString());
  if (a.stride(1) != 1 || c.stride(1) != 1 || a.stride(0) < k || c.stride(0) < n)
    return InvalidArgumentError("{}: a {} and c {} need unit column strides", op, a.ToString(),
                                c.ToString());
  RETURN_IF_ERROR(ExpectSameDevice(op, a, w));
  return ExpectSameDevice(op, a, c);
}
}  // namespace internal

namespace cpu {

Status Fp8GemmRaw(GemmContext*, const TensorView& a, const TensorView& w, const TensorView& c,
                  int64_t batch, Stream) {
  constexpr const char* kOp = "cpu::Fp8GemmRaw";
  RETURN_IF_ERROR(internal::CheckFp8GemmRaw(kOp, a, w, c, batch));
  std::array<double, 256> value{};
  for (int b = 0; b < 256; ++b) value[b] = E4m3ToFloat(static_cast<uint8_t>(b));
  const int64_t m = a.dim(0) / batch, k = a.dim(1), n = w.dim(1);
  const uint8_t* av = a.data_as<const uint8_t>();
  const uint8_t* wv = w.data_as<const uint8_t>();
  bf16* cv = c.data_as<bf16>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = b * m; r < (b + 1) * m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t* ar = av + r * a.stride(0);
        const uint8_t* wr = wv + (b * n + j) * k;
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) acc += value[ar[p]] * value[wr[p]];
        cv[r * c.stride(0) + j] = bf16(static_cast<float>(acc));
      }
  return Status::Ok();
}

}  // namespace cpu

#ifndef TANDEM_HAVE_CUDA
namespace cuda {
Status Fp8GemmRaw(GemmContext*, const TensorView&, const TensorView&, const TensorView&, int64_t,
                  Stream) {
  return UnavailableError("Fp8GemmRaw: CUDA tensors but tandem was built without CUDA");
}
}  // namespace cuda
#endif

Status Fp8GemmRaw(GemmContext* ctx, const TensorView& a, const TensorView& w,
                  const TensorView& c, int64_t batch, Stream s) {
  if (a.device().is_cpu()) return cpu::Fp8GemmRaw(ctx, a, w, c, batch, s);
  return cuda::Fp8GemmRaw(ctx, a, w, c, batch, s);
}

}  // namespace tandem::kernels
