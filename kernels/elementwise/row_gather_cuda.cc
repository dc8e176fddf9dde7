// cuda::RowGather: argument checks, NVTX range, launch (row_gather.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/elementwise/row_gather.h"
#include "kernels/elementwise/row_gather_kernels.h"
#include "kernels/core/stream.h"

namespace tandem::kernels::cuda {

Status RowGather(TensorView out, TensorView rows, TensorView table, Stream s) {
  int64_t row_bytes = 0;
  RETURN_IF_ERROR(internal::CheckRowGather(out, rows, table, &row_bytes));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("RowGather");
  CUDA_RETURN_IF_ERROR(LaunchRowGather(out.data(), rows.data_as<const int32_t>(), table.data(),
                                       rows.dim(0), table.dim(0), row_bytes, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
