// cuda:: FP8 quantize / dequantize launchers: argument checks, NVTX range, launch
// (fp8.cu); and the sm_90 check for FP8 tensor cores.
#include <cuda_runtime_api.h>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/fp8_kernels.h"

namespace tandem::kernels::cuda {

Status CheckFp8Device(int device) {
  int major = 0, minor = 0;
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major < 9)
    return InvalidArgumentError(
        "precision = \"fp8\" needs FP8 tensor cores (compute capability 9.0 or newer, e.g. "
        "H100/H200); cuda:{} is sm_{}{}. Use precision = \"bf16\" on this GPU",
        device, major, minor);
  return Status::Ok();
}

Status QuantizeFp8Weight(const TensorView& w, const Fp8BlockWeight& out, Stream s) {
  constexpr const char* kOp = "cuda::QuantizeFp8Weight";
  RETURN_IF_ERROR(CheckFp8Weight(kOp, out));
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "w", w, out.rows(), out.cols()));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, w, out.data));
  if (out.data.numel() == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchQuantizeFp8Weight(
      w.data(), w.dtype() == DType::kF32, w.stride(0), out.rows(), out.cols(),
      out.data.data_as<uint8_t>(), out.scale.data_as<float>(), out.scale.dim(1), s));
  return Status::Ok();
}

Status QuantizeFp8Activation(const TensorView& x, const Fp8GroupActivation& out, Stream s) {
  constexpr const char* kOp = "cuda::QuantizeFp8Activation";
  RETURN_IF_ERROR(CheckFp8Activation(kOp, out));
  const int64_t mp = out.data.dim(0), k = out.data.dim(1), m = x.dim(0);
  if (x.ndim() != 2 || Fp8PaddedRows(m) != mp)
    return InvalidArgumentError("{}: x {} does not fill fp8 rows [{}] (needs {} < M <= {})", kOp,
                                x.ToString(), mp, mp - 4, mp);
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "x", x, m, k));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, x, out.data));
  if (out.data.numel() == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchQuantizeFp8Activation(x.data(), x.dtype() == DType::kF32,
                                                   x.stride(0), m, mp, k,
                                                   out.data.data_as<uint8_t>(),
                                                   out.scale.data_as<float>(), s));
  return Status::Ok();
}

Status TransposeFp8Weight(const Fp8BlockWeight& w, const Fp8BlockWeight& wt, Stream s) {
  constexpr const char* kOp = "cuda::TransposeFp8Weight";
  RETURN_IF_ERROR(internal::CheckFp8Transpose(kOp, w, wt));
  if (w.data.numel() == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchTransposeFp8Weight(
      w.data.data_as<const uint8_t>(), w.scale.data_as<const float>(), w.scale.dim(1), w.rows(),
      w.cols(), wt.data.data_as<uint8_t>(), wt.scale.data_as<float>(), wt.scale.dim(1), s));
  return Status::Ok();
}

Status DequantizeFp8Weight(const Fp8BlockWeight& w, const TensorView& out, Stream s) {
  constexpr const char* kOp = "cuda::DequantizeFp8Weight";
  RETURN_IF_ERROR(CheckFp8Weight(kOp, w));
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "out", out, w.rows(), w.cols()));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "out", out));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, out, w.data));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchDequantizeFp8Weight(w.data.data_as<const uint8_t>(),
                                                 w.scale.data_as<const float>(), w.scale.dim(1),
                                                 w.rows(), w.cols(), out.data(),
                                                 out.dtype() == DType::kF32, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
