// cuda::DynamicConvForward/Backward: argument checks, NVTX range, launch (dynamic_conv.cu,
// dynamic_conv_bwd.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/dflash2/dynamic_conv.h"
#include "kernels/dflash2/dynamic_conv_kernels.h"

namespace tandem::kernels::dflash2::cuda {
namespace {

ConvRows Rows(const TensorView& t) { return ConvRows{t.data(), t.dim(0) > 1 ? t.stride(0) : 0}; }

bool Aligned(const TensorView& t) {
  return reinterpret_cast<uintptr_t>(t.data()) % 16 == 0 && (t.dim(0) <= 1 || t.stride(0) % 8 == 0);
}

Status MakeArgs(const char* op, const internal::DynamicConvDims& n, int64_t group,
                int64_t block_size, std::initializer_list<TensorView> vector_views, ConvArgs* a) {
  if (n.taps > kDynamicConvMaxTaps)
    return InvalidArgumentError("{}: K = {} taps exceeds the CUDA kernels' maximum {}", op, n.taps,
                                kDynamicConvMaxTaps);
  if (n.hidden > (int64_t{1} << 30) || block_size > (int64_t{1} << 30))
    return InvalidArgumentError("{}: H = {} or block_size = {} is too large", op, n.hidden,
                                block_size);
  bool vectorized = n.hidden % 8 == 0;
  for (const TensorView& t : vector_views) vectorized = vectorized && Aligned(t);
  *a = ConvArgs{n.rows,
                static_cast<int>(n.hidden),
                static_cast<int>(n.taps),
                static_cast<int>(group),
                static_cast<int>(n.groups),
                static_cast<int>(block_size),
                vectorized};
  return Status::Ok();
}

}  // namespace

Status DynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                          const TensorView& d, int64_t group, int64_t block_size, bool accumulate,
                          Stream s) {
  constexpr const char* kOp = "cuda::DynamicConvForward";
  internal::DynamicConvDims n;
  RETURN_IF_ERROR(internal::CheckDynamicConvForward(y, x, base, d, group, block_size, &n));
  if (!x.device().is_cuda()) return InvalidArgumentError("{}: views must be on CUDA", kOp);
  ConvArgs a;
  RETURN_IF_ERROR(MakeArgs(kOp, n, group, block_size, {y, x, base}, &a));
  if (n.rows == 0) return Status::Ok();
  NvtxRange range("DynamicConvForward");
  CUDA_RETURN_IF_ERROR(
      LaunchDynamicConvForward(a, Rows(y), Rows(x), base.data(), Rows(d), accumulate, s));
  return Status::Ok();
}

Status DynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                           const TensorView& dy, const TensorView& x, const TensorView& base,
                           const TensorView& d, int64_t group, int64_t block_size,
                           const TensorView& workspace, Stream s) {
  constexpr const char* kOp = "cuda::DynamicConvBackward";
  internal::DynamicConvDims n;
  RETURN_IF_ERROR(
      internal::CheckDynamicConvBackward(dx, dbase, dd, dy, x, base, d, group, block_size, &n));
  if (!x.device().is_cuda()) return InvalidArgumentError("{}: views must be on CUDA", kOp);
  ConvArgs a;
  RETURN_IF_ERROR(MakeArgs(kOp, n, group, block_size, {dx, dy, x, base}, &a));
  if (n.rows == 0) return Status::Ok();
  const int64_t need = DynamicConvBackwardWorkspaceBytes(n.rows, n.hidden, n.taps);
  const int64_t tiles = (n.rows + kDynamicConvRowsPerBlock - 1) / kDynamicConvRowsPerBlock;
  if (need != tiles * n.taps * n.hidden * static_cast<int64_t>(sizeof(float)))
    return InternalError("{}: workspace size function disagrees with the kernels' tiles", kOp);
  RETURN_IF_ERROR(ExpectSameDevice(kOp, x, workspace));
  if (!workspace.is_contiguous() || workspace.nbytes() < need ||
      reinterpret_cast<uintptr_t>(workspace.data()) % 256 != 0)
    return InvalidArgumentError(
        "{}: workspace {}: need {} contiguous bytes, 256-byte aligned "
        "(DynamicConvBackwardWorkspaceBytes({}, {}, {}))",
        kOp, workspace.ToString(), need, n.rows, n.hidden, n.taps);
  NvtxRange range("DynamicConvBackward");
  CUDA_RETURN_IF_ERROR(LaunchDynamicConvBackward(a, Rows(dx), dbase.data_as<float>(), Rows(dd),
                                                 Rows(dy), Rows(x), base.data(), Rows(d),
                                                 workspace.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::dflash2::cuda
