// cuda::RowTopK: argument checks, NVTX range, launch (row_topk.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/elementwise/row_topk.h"
#include "kernels/elementwise/row_topk_kernels.h"

namespace tandem::kernels::cuda {

Status RowTopK(TensorView ids, TensorView vals, TensorView x, Stream s) {
  RETURN_IF_ERROR(internal::CheckRowTopK(ids, vals, x));
  if (x.dim(0) == 0) return Status::Ok();
  NvtxRange range("RowTopK");
  CUDA_RETURN_IF_ERROR(LaunchRowTopK(ids.data_as<int32_t>(), vals.data_as<float>(),
                                     x.data_as<const float>(), x.dim(0), x.dim(1), ids.dim(1), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
