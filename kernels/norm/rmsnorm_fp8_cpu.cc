// CPU RMSNorm -> e4m3: the fp32 reference norm rounded to bf16, then QuantizeFp8Activation.
#include <vector>

#include "kernels/norm/rmsnorm.h"
#include "kernels/norm/rmsnorm_ref.h"
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
                         Stream s, float weight_offset) {
  RETURN_IF_ERROR(internal::CheckRmsNormFp8("cpu::RmsNormFp8Forward", out, x, w));
  const int64_t m = x.dim(0), h = x.dim(1);
  // The norm in fp32 on contiguous rows (ref::RmsNormForward), rounded to bf16 once.
  std::vector<float> xf(static_cast<size_t>(m * h)), wf(static_cast<size_t>(h)),
      yf(static_cast<size_t>(m * h)), rstd(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < h; ++c) xf[r * h + c] = x.data_as<const bf16>()[r * x.stride(0) + c].f();
  for (int64_t c = 0; c < h; ++c) wf[c] = weight_offset + w.data_as<const bf16>()[c].f();
  ref::RmsNormForward<float>(yf.data(), rstd.data(), xf.data(), wf.data(), m, h, eps);
  std::vector<bf16> y(yf.size());
  for (size_t i = 0; i < yf.size(); ++i) y[i] = bf16(yf[i]);
  return cpu::QuantizeFp8Activation(TensorView(y.data(), DType::kBF16, {m, h}), out, s);
}
}  // namespace cpu

Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s, float weight_offset) {
  if (x.device().is_cpu()) return cpu::RmsNormFp8Forward(out, x, w, eps, s, weight_offset);
#ifdef TANDEM_HAVE_CUDA
  return cuda::RmsNormFp8Forward(out, x, w, eps, s, weight_offset);
#else
  return UnavailableError("RmsNormFp8Forward: CUDA tensors but tandem was built without CUDA");
#endif
}

}  // namespace tandem::kernels
