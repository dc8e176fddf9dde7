// CPU reference for kernels/norm/fused_norm.h: the rmsnorm_ref.h and rope_ref.h math in fp32 on
// whole tensors with no rounding between the fused steps; argument checks; dispatchers.
#include <vector>

#include "kernels/elementwise/elementwise.h"
#include "kernels/norm/fused_norm.h"
#include "kernels/norm/fused_norm_internal.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/norm/rmsnorm_ref.h"
#include "kernels/rope/rope_ref.h"

namespace tandem::kernels {
namespace internal {

Status CheckRmsNormRope(const char* op, const TensorView& out, const TensorView& in,
                        const TensorView& pos, double theta) {
  RopeDims dims;
  return CheckRope(op, out, in, pos, RopeConfig{0, theta}, &dims);
}

Status CheckAddRmsNormForward(const TensorView& h, const TensorView& y, const TensorView& rstd,
                              const TensorView& a, const TensorView& b, const TensorView& w,
                              int64_t* rows, int64_t* hd) {
  if (b.empty() != h.empty())
    return InvalidArgumentError("AddRmsNormForward: b and h must both be given or both empty");
  if (!b.empty()) {
    RETURN_IF_ERROR(ExpectDType("AddRmsNormForward", "h", h, DType::kBF16));
    RETURN_IF_ERROR(CheckResidualAdd(h, a, b));
  }
  return CheckRmsNormForward(y, rstd, a, w, rows, hd);
}

Status CheckRmsNormBackwardAdd(const TensorView& dres, const TensorView& dw, const TensorView& dy,
                               const TensorView& x, const TensorView& w, const TensorView& rstd,
                               int64_t* rows, int64_t* h) {
  constexpr const char* kOp = "RmsNormBackwardAdd";
  // dres stands in for dy in the shared check (same shape); dy is checked here (bf16 or f32).
  RETURN_IF_ERROR(CheckRmsNormBackward(dres, dw, dres, x, w, rstd, rows, h));
  if (dy.dtype() != DType::kBF16 && dy.dtype() != DType::kF32)
    return InvalidArgumentError("{}: dy must be bf16 or f32, got {}", kOp, dy.ToString());
  RETURN_IF_ERROR(ExpectShape(kOp, "dy", dy, x.shape()));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "dy", dy));
  return ExpectSameDevice(kOp, dy, x);
}

}  // namespace internal

namespace cpu {
namespace {

std::vector<float> Widen(const TensorView& t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == DType::kF32 ? t.data_as<float>()[i] : t.data_as<bf16>()[i].f();
  return v;
}

void Narrow(const std::vector<float>& v, const TensorView& t) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<bf16>()[i] = bf16(v[i]);
}

std::vector<float> InvFreq(int64_t d, double theta) {
  std::vector<float> inv(d / 2);
  RopeInvFreq(d, theta, inv.data());
  return inv;
}

}  // namespace

Status RmsNormRopeForward(TensorView y, TensorView rstd, TensorView x, TensorView w,
                          TensorView pos, float eps, double theta, Stream) {
  int64_t rows, d;
  RETURN_IF_ERROR(internal::CheckRmsNormForward(y, rstd, x, w, &rows, &d));
  RETURN_IF_ERROR(internal::CheckRmsNormRope("RmsNormRopeForward", y, x, pos, theta));
  std::vector<float> xf = Widen(x), wf = Widen(w), nf(xf.size()), yf(xf.size()), rf(rows);
  ref::RmsNormForward<float>(nf.data(), rf.data(), xf.data(), wf.data(), rows, d, eps);
  const std::vector<float> inv = InvFreq(d, theta);
  ref::RopeApply<float>(yf.data(), nf.data(), pos.data_as<const int32_t>(), inv.data(), x.dim(0),
                        x.dim(1), d, d, 1.f);
  Narrow(yf, y);
  if (!rstd.empty())
    for (int64_t r = 0; r < rows; ++r) rstd.data_as<float>()[r] = rf[r];
  return Status::Ok();
}

Status RopeRmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x,
                           TensorView w, TensorView rstd, TensorView pos, double theta,
                           TensorView, Stream) {
  int64_t rows, d;
  RETURN_IF_ERROR(internal::CheckRmsNormBackward(dx, dw, dy, x, w, rstd, &rows, &d));
  RETURN_IF_ERROR(internal::CheckRmsNormRope("RopeRmsNormBackward", dx, dy, pos, theta));
  std::vector<float> dyf = Widen(dy), xf = Widen(x), wf = Widen(w), gf(xf.size()), dxf(xf.size());
  const std::vector<float> inv = InvFreq(d, theta);
  ref::RopeApply<float>(gf.data(), dyf.data(), pos.data_as<const int32_t>(), inv.data(),
                        x.dim(0), x.dim(1), d, d, -1.f);
  ref::RmsNormBackward<float>(dxf.data(), dw.data_as<float>(), gf.data(), xf.data(), wf.data(),
                              rstd.data_as<const float>(), rows, d);
  Narrow(dxf, dx);
  return Status::Ok();
}

Status AddRmsNormForward(TensorView h, TensorView y, TensorView rstd, TensorView a, TensorView b,
                         TensorView w, float eps, Stream s) {
  int64_t rows, hd;
  RETURN_IF_ERROR(internal::CheckAddRmsNormForward(h, y, rstd, a, b, w, &rows, &hd));
  if (b.empty()) return cpu::RmsNormForward(y, rstd, a, w, eps, s);
  RETURN_IF_ERROR(cpu::ResidualAdd(h, a, b, s));
  return cpu::RmsNormForward(y, rstd, h, w, eps, s);
}

Status RmsNormBackwardAdd(TensorView dres, TensorView dw, TensorView dy, TensorView x,
                          TensorView w, TensorView rstd, TensorView, Stream) {
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckRmsNormBackwardAdd(dres, dw, dy, x, w, rstd, &rows, &h));
  std::vector<float> dyf = Widen(dy), xf = Widen(x), wf = Widen(w), dxf(xf.size());
  ref::RmsNormBackward<float>(dxf.data(), dw.data_as<float>(), dyf.data(), xf.data(), wf.data(),
                              rstd.data_as<const float>(), rows, h);
  for (int64_t i = 0; i < dres.numel(); ++i)
    dres.data_as<bf16>()[i] = bf16(dres.data_as<bf16>()[i].f() + dxf[i]);
  return Status::Ok();
}

}  // namespace cpu

#ifdef TANDEM_HAVE_CUDA
#define TANDEM_FUSED_DISPATCH(name, ...) \
  if (d.is_cuda()) return cuda::name(__VA_ARGS__)
#else
#define TANDEM_FUSED_DISPATCH(name, ...)
#endif

Status RmsNormRopeForward(TensorView y, TensorView rstd, TensorView x, TensorView w,
                          TensorView pos, float eps, double theta, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("RmsNormRopeForward", {y, rstd, x, w, pos}));
  TANDEM_FUSED_DISPATCH(RmsNormRopeForward, y, rstd, x, w, pos, eps, theta, s);
  return cpu::RmsNormRopeForward(y, rstd, x, w, pos, eps, theta, s);
}

Status RopeRmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x,
                           TensorView w, TensorView rstd, TensorView pos, double theta,
                           TensorView workspace, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("RopeRmsNormBackward", {dx, dw, dy, x, w, rstd, pos}));
  TANDEM_FUSED_DISPATCH(RopeRmsNormBackward, dx, dw, dy, x, w, rstd, pos, theta, workspace, s);
  return cpu::RopeRmsNormBackward(dx, dw, dy, x, w, rstd, pos, theta, workspace, s);
}

Status AddRmsNormForward(TensorView h, TensorView y, TensorView rstd, TensorView a, TensorView b,
                         TensorView w, float eps, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("AddRmsNormForward", {h, y, rstd, a, b, w}));
  TANDEM_FUSED_DISPATCH(AddRmsNormForward, h, y, rstd, a, b, w, eps, s);
  return cpu::AddRmsNormForward(h, y, rstd, a, b, w, eps, s);
}

Status RmsNormBackwardAdd(TensorView dres, TensorView dw, TensorView dy, TensorView x,
                          TensorView w, TensorView rstd, TensorView workspace, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("RmsNormBackwardAdd", {dres, dw, dy, x, w, rstd}));
  TANDEM_FUSED_DISPATCH(RmsNormBackwardAdd, dres, dw, dy, x, w, rstd, workspace, s);
  return cpu::RmsNormBackwardAdd(dres, dw, dy, x, w, rstd, workspace, s);
}

#undef TANDEM_FUSED_DISPATCH

}  // namespace tandem::kernels
