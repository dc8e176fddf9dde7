// cuda::RowTopK (dflash2, transformed logits): argument checks, NVTX range, launch
// (row_topk.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/dflash2/row_topk.h"
#include "kernels/dflash2/row_topk_kernels.h"

namespace tandem::kernels::dflash2::cuda {

Status RowTopK(const TensorView& ids, const TensorView& values, const TensorView& logits,
               float multiplier, float softcap, Stream s) {
  constexpr const char* kOp = "cuda::RowTopK";
  int64_t rows, v, k;
  RETURN_IF_ERROR(
      internal::CheckRowTopK(kOp, ids, values, logits, multiplier, softcap, &rows, &v, &k));
  if (!logits.device().is_cuda()) return InvalidArgumentError("{}: views must be on CUDA", kOp);
  if (rows > 0x7fffffff)
    return InvalidArgumentError("{}: {} rows exceed one launch's grid", kOp, rows);
  if (rows == 0) return Status::Ok();
  NvtxRange range("RowTopK");
  CUDA_RETURN_IF_ERROR(LaunchRowTopK(logits.data(), logits.dtype() == DType::kBF16, rows,
                                     rows > 1 ? logits.stride(0) : v, v, multiplier, softcap,
                                     static_cast<int>(k), ids.data_as<int32_t>(),
                                     values.empty() ? nullptr : values.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::dflash2::cuda
