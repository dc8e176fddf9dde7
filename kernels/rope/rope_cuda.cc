// cuda::RopeForward/Backward: argument checks, NVTX range, launch (rope.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/rope/rope.h"
#include "kernels/rope/rope_kernels.h"
#include "kernels/core/stream.h"

namespace tandem::kernels::cuda {
namespace {

Status Apply(const char* op, TensorView out, TensorView x, TensorView pos, RopeConfig cfg,
             float sign, Stream s) {
  internal::RopeDims d;
  RETURN_IF_ERROR(internal::CheckRope(op, out, x, pos, cfg, &d));
  if (d.rotary_dim > kRopeMaxRotaryDim)
    return InvalidArgumentError("{}: rotary_dim {} exceeds the CUDA kernel's maximum {}", op,
                                d.rotary_dim, kRopeMaxRotaryDim);
  if (x.numel() == 0) return Status::Ok();
  NvtxRange range(op);
  float inv[kRopeMaxRotaryDim / 2];
  RopeInvFreq(d.rotary_dim, cfg.theta, inv);
  CUDA_RETURN_IF_ERROR(LaunchRope(out.data(), x.data(), pos.data_as<const int32_t>(), inv, d.tokens,
                                  d.heads, d.head_dim, d.rotary_dim, sign, s));
  return Status::Ok();
}

}  // namespace

Status RopeForward(TensorView out, TensorView x, TensorView pos, RopeConfig cfg, Stream s) {
  return Apply("RopeForward", out, x, pos, cfg, 1.f, s);
}

Status RopeBackward(TensorView dx, TensorView dout, TensorView pos, RopeConfig cfg, Stream s) {
  return Apply("RopeBackward", dx, dout, pos, cfg, -1.f, s);
}

}  // namespace tandem::kernels::cuda
