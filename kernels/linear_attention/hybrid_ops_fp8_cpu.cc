// CPU FP8 producers of hybrid_ops_fp8.h: the bf16 CPU reference into a host buffer, then
// cpu::QuantizeFp8Activation (the composition the fused CUDA kernels must reproduce). Also
// the shared checks and the device dispatch.
#include <vector>

#include "kernels/linear_attention/hybrid_ops.h"
#include "kernels/linear_attention/hybrid_ops_fp8.h"

namespace tandem::kernels {
namespace internal {
namespace {
// out: an FP8 activation of Fp8PaddedRows(t) rows and `cols` columns on x's device.
Status CheckFp8Out(const char* op, const Fp8GroupActivation& out, const TensorView& x,
                   int64_t t, int64_t cols) {
  RETURN_IF_ERROR(CheckFp8Activation(op, out));
  if (out.data.dim(0) != Fp8PaddedRows(t) || out.data.dim(1) != cols)
    return InvalidArgumentError("{}: out {} must be [{}, {}] (Fp8PaddedRows({}) rows)", op,
                                out.data.ToString(), Fp8PaddedRows(t), cols, t);
  return ExpectSameDevice(op, x, out.data);
}
}  // namespace

Status CheckGatedNormFp8(const Fp8GroupActivation& out, const TensorView& x, const TensorView& z,
                         const TensorView& w) {
  constexpr const char* kOp = "GatedRmsNormFp8Forward";
  // The bf16 op's checks with `x` standing in for its output (same shape and dtype).
  RETURN_IF_ERROR(CheckGatedNorm(x, x, z, w));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, x, z));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, x, w));
  return CheckFp8Out(kOp, out, x, x.dim(0), x.dim(1));
}

Status CheckSigmoidGateFp8(const Fp8GroupActivation& out, const TensorView& x,
                           const TensorView& gate, int64_t* heads) {
  constexpr const char* kOp = "SigmoidGateFp8Forward";
  RETURN_IF_ERROR(CheckSigmoidGate(x, x, gate));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, x, gate));
  const int64_t d = x.dim(1), cols = out.data.ndim() == 2 ? out.data.dim(1) : 0;
  if (cols < d || cols % d != 0 || x.dim(0) % (cols / d) != 0)
    return InvalidArgumentError(
        "{}: out {} must have heads * {} columns with heads dividing x's {} rows", kOp,
        out.data.ToString(), d, x.dim(0));
  *heads = cols / d;
  return CheckFp8Out(kOp, out, x, x.dim(0) / *heads, cols);
}
}  // namespace internal

namespace cpu {

Status GatedRmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView z,
                              TensorView w, float eps, Stream s) {
  RETURN_IF_ERROR(internal::CheckGatedNormFp8(out, x, z, w));
  const int64_t t = x.dim(0), cols = x.dim(1);
  std::vector<bf16> y(static_cast<size_t>(t * cols));
  const TensorView yv(y.data(), DType::kBF16, {t, cols});
  RETURN_IF_ERROR(cpu::GatedRmsNormForward(yv, x, z, w, eps, s));
  return cpu::QuantizeFp8Activation(yv, out, s);
}

Status SigmoidGateFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView gate,
                             Stream s) {
  int64_t heads = 0;
  RETURN_IF_ERROR(internal::CheckSigmoidGateFp8(out, x, gate, &heads));
  const int64_t rows = x.dim(0), d = x.dim(1);
  std::vector<bf16> y(static_cast<size_t>(rows * d));
  const TensorView yv(y.data(), DType::kBF16, {rows, d});
  RETURN_IF_ERROR(cpu::SigmoidGateForward(yv, x, gate, s));
  return cpu::QuantizeFp8Activation(yv.Reshape({rows / heads, heads * d}), out, s);
}

}  // namespace cpu

#ifndef TANDEM_HAVE_CUDA
namespace {
Status NoCuda(const char* op) {
  return UnavailableError("{}: CUDA tensors but tandem was built without CUDA", op);
}
}  // namespace
#endif

Status GatedRmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView z,
                              TensorView w, float eps, Stream s) {
  if (x.device().is_cpu()) return cpu::GatedRmsNormFp8Forward(out, x, z, w, eps, s);
#ifdef TANDEM_HAVE_CUDA
  return cuda::GatedRmsNormFp8Forward(out, x, z, w, eps, s);
#else
  return NoCuda("GatedRmsNormFp8Forward");
#endif
}

Status SigmoidGateFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView gate,
                             Stream s) {
  if (x.device().is_cpu()) return cpu::SigmoidGateFp8Forward(out, x, gate, s);
#ifdef TANDEM_HAVE_CUDA
  return cuda::SigmoidGateFp8Forward(out, x, gate, s);
#else
  return NoCuda("SigmoidGateFp8Forward");
#endif
}

}  // namespace tandem::kernels
