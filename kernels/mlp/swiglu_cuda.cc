// cuda::SwiGluForward/Backward: argument checks, NVTX range, launch (swiglu.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_kernels.h"

namespace tandem::kernels::cuda {
namespace {

Bf16Rows M(const TensorView& t) { return Bf16Rows{t.data(), t.stride(0)}; }

}  // namespace

Status SwiGluForward(TensorView out, TensorView gate, TensorView up, Stream s) {
  RETURN_IF_ERROR(internal::CheckSwiGlu("SwiGluForward", {&out, &gate, &up}));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("SwiGluForward");
  CUDA_RETURN_IF_ERROR(LaunchSwiGluForward(M(out), M(gate), M(up), out.dim(0), out.dim(1), s));
  return Status::Ok();
}

Status SwiGluBackward(TensorView dgate, TensorView dup, TensorView dout, TensorView gate,
                      TensorView up, Stream s) {
  RETURN_IF_ERROR(internal::CheckSwiGlu("SwiGluBackward", {&dgate, &dup, &dout, &gate, &up}));
  if (dout.numel() == 0) return Status::Ok();
  NvtxRange range("SwiGluBackward");
  CUDA_RETURN_IF_ERROR(
      LaunchSwiGluBackward(M(dgate), M(dup), M(dout), M(gate), M(up), dout.dim(0), dout.dim(1), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
