// CPU RMSNorm -> e4m3: RmsNormForward into a bf16 scratch, then QuantizeFp8Activation.
#include <vector>

#include "kernels/norm/rmsnorm.h"
#include "kernels/norm/rmsnorm_fp8.h"

namespace tandem::kernels {

namespace internal {
Status CheckRmsNormFp8(const char* op, const Fp8GroupActivation& out, const TensorView& x,
                       const TensorView& w) {
  RETURN_IF_ERROR(CheckFp8Activation(op, out));
  RETURN_IF_ERROR(ExpectDType(op, "x", x, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "w", w, DType::kBF16));
  if (x.ndim() != 2 || x.stride(1) != 1 || x.dim(1) != out.data.dim(1) ||
      Fp8PaddedRows(x.dim(0)) != out.data.dim(0))
    return InvalidArgumentError("{}: x {} does not match the fp8 output {}", op, x.ToString(),
                                out.data.ToString());
  RETURN_IF_ERROR(ExpectShape(op, "w", w, Shape{x.dim(1)}));
  RETURN_IF_ERROR(ExpectSameDevice(op, x, w));
  return ExpectSameDevice(op, x, out.data);
}
}  // namespace internal

namespace cpu {
Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s) {
  RETURN_IF_ERROR(internal::CheckRmsNormFp8("cpu::RmsNormFp8Forward", out, x, w));
  const int64_t m = x.dim(0), h = x.dim(1);
  std::vector<bf16> y(static_cast<size_t>(m * h));
  std::vector<bf16> xc(static_cast<size_t>(m * h));  // RmsNormForward takes contiguous rows
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < h; ++c) xc[r * h + c] = x.data_as<const bf16>()[r * x.stride(0) + c];
  const TensorView yv(y.data(), DType::kBF16, {m, h});
  RETURN_IF_ERROR(cpu::RmsNormForward(yv, {}, TensorView(xc.data(), DType::kBF16, {m, h}), w, eps, s));
  return cpu::QuantizeFp8Activation(yv, out, s);
}
}  // namespace cpu

Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s) {
  if (x.device().is_cpu()) return cpu::RmsNormFp8Forward(out, x, w, eps, s);
#ifdef TANDEM_HAVE_CUDA
  return cuda::RmsNormFp8Forward(out, x, w, eps, s);
#else
  return UnavailableError("RmsNormFp8Forward: CUDA tensors but tandem was built without CUDA");
#endif
}

}  // namespace tandem::kernels
