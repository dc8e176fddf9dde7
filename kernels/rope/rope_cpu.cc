// CPU reference for kernels/rope/rope.h (fp32 through rope_ref.h), checks, and dispatchers.
#include <cmath>
#include <vector>

#include "kernels/rope/rope.h"
#include "kernels/rope/rope_ref.h"

namespace tandem::kernels {

void RopeInvFreq(int64_t rotary_dim, double theta, float* inv_freq) {
  for (int64_t i = 0; i < rotary_dim / 2; ++i)
    inv_freq[i] =
        static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / rotary_dim));
}

namespace internal {

Status CheckRope(const char* op, const TensorView& out, const TensorView& x, const TensorView& pos,
                 const RopeConfig& cfg, RopeDims* d) {
  RETURN_IF_ERROR(ExpectDType(op, "x", x, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "out", out, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "pos", pos, DType::kI32));
  if (x.ndim() != 3)
    return InvalidArgumentError("{}: x must be [T, heads, head_dim], got {}", op, x.ToString());
  RETURN_IF_ERROR(ExpectShape(op, "out", out, x.shape()));
  RETURN_IF_ERROR(ExpectShape(op, "pos", pos, {x.dim(0)}));
  for (const TensorView* t : {&out, &x, &pos}) RETURN_IF_ERROR(ExpectContiguous(op, "tensor", *t));
  RETURN_IF_ERROR(ExpectSameDevice(op, out, x));
  RETURN_IF_ERROR(ExpectSameDevice(op, pos, x));
  *d = RopeDims{x.dim(0), x.dim(1), x.dim(2), cfg.rotary_dim == 0 ? x.dim(2) : cfg.rotary_dim};
  if (d->rotary_dim <= 0 || d->rotary_dim % 2 != 0 || d->rotary_dim > d->head_dim)
    return InvalidArgumentError("{}: rotary_dim {} must be even and in (0, head_dim = {}]", op,
                                d->rotary_dim, d->head_dim);
  if (!(cfg.theta > 0)) return InvalidArgumentError("{}: rope_theta {} must be > 0", op, cfg.theta);
  return Status::Ok();
}

}  // namespace internal

namespace cpu {
namespace {

Status Apply(const char* op, TensorView out, TensorView x, TensorView pos, RopeConfig cfg,
             float sign) {
  internal::RopeDims d;
  RETURN_IF_ERROR(internal::CheckRope(op, out, x, pos, cfg, &d));
  std::vector<float> xf(x.numel()), of(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) xf[i] = x.data_as<bf16>()[i].f();
  std::vector<float> inv(d.rotary_dim / 2);
  RopeInvFreq(d.rotary_dim, cfg.theta, inv.data());
  ref::RopeApply<float>(of.data(), xf.data(), pos.data_as<const int32_t>(), inv.data(), d.tokens,
                        d.heads, d.head_dim, d.rotary_dim, sign);
  for (int64_t i = 0; i < x.numel(); ++i) out.data_as<bf16>()[i] = bf16(of[i]);
  return Status::Ok();
}

}  // namespace

Status RopeForward(TensorView out, TensorView x, TensorView pos, RopeConfig cfg, Stream) {
  return Apply("RopeForward", out, x, pos, cfg, 1.f);
}

Status RopeBackward(TensorView dx, TensorView dout, TensorView pos, RopeConfig cfg, Stream) {
  return Apply("RopeBackward", dx, dout, pos, cfg, -1.f);
}

}  // namespace cpu

Status RopeForward(TensorView out, TensorView x, TensorView pos, RopeConfig cfg, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("RopeForward", {out, x, pos}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::RopeForward(out, x, pos, cfg, s);
#endif
  return cpu::RopeForward(out, x, pos, cfg, s);
}

Status RopeBackward(TensorView dx, TensorView dout, TensorView pos, RopeConfig cfg, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("RopeBackward", {dx, dout, pos}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::RopeBackward(dx, dout, pos, cfg, s);
#endif
  return cpu::RopeBackward(dx, dout, pos, cfg, s);
}

}  // namespace tandem::kernels
