// cuda::SwiGluRecomputeBackward: argument checks, NVTX range, launch (swiglu_fused.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fused.h"
#include "kernels/mlp/swiglu_fused_kernels.h"

namespace tandem::kernels::cuda {

Status SwiGluRecomputeBackward(TensorView act, TensorView dgate, TensorView dup, TensorView dout,
                               TensorView gate, TensorView up, Stream s) {
  RETURN_IF_ERROR(internal::CheckSwiGlu("SwiGluRecomputeBackward",
                                        {&act, &dgate, &dup, &dout, &gate, &up}));
  if (dout.numel() == 0) return Status::Ok();
  auto m = [](const TensorView& t) { return Bf16Rows{t.data(), t.stride(0)}; };
  NvtxRange range("SwiGluRecomputeBackward");
  CUDA_RETURN_IF_ERROR(LaunchSwiGluRecomputeBackward(m(act), m(dgate), m(dup), m(dout), m(gate),
                                                     m(up), dout.dim(0), dout.dim(1), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
