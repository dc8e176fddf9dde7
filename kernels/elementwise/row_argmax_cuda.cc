// cuda::RowArgmax: argument checks, NVTX range, launch (row_argmax.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/elementwise/row_argmax.h"
#include "kernels/elementwise/row_argmax_kernels.h"

namespace tandem::kernels::cuda {

Status RowArgmax(TensorView out, TensorView x, Stream s) {
  RETURN_IF_ERROR(internal::CheckRowArgmax(out, x));
  if (x.dim(0) == 0) return Status::Ok();
  NvtxRange range("RowArgmax");
  CUDA_RETURN_IF_ERROR(
      LaunchRowArgmax(out.data_as<int32_t>(), x.data(), x.dtype(), x.dim(0), x.dim(1), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
