// CPU reference for kernels/norm/rmsnorm.h (fp32 math through rmsnorm_ref.h), the argument
// checks, and the dispatchers.
#include <vector>

#include "kernels/norm/rmsnorm.h"
#include "kernels/norm/rmsnorm_ref.h"

namespace tandem::kernels {
namespace internal {
namespace {

Status CheckRowsH(const char* op, const TensorView& x, const TensorView& w, int64_t* rows,
                  int64_t* h) {
  RETURN_IF_ERROR(ExpectDType(op, "x", x, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "w", w, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(op, "x", x));
  RETURN_IF_ERROR(ExpectContiguous(op, "w", w));
  RETURN_IF_ERROR(ExpectSameDevice(op, x, w));
  if (x.ndim() < 1 || x.dim(-1) < 1)
    return InvalidArgumentError("{}: x must have a non-empty last dim, got {}", op, x.ToString());
  *h = x.dim(-1);
  *rows = x.numel() / *h;
  return ExpectShape(op, "w", w, {*h});
}

Status CheckLike(const char* op, const char* what, const TensorView& t, const TensorView& x,
                 DType dtype) {
  RETURN_IF_ERROR(ExpectDType(op, what, t, dtype));
  RETURN_IF_ERROR(ExpectShape(op, what, t, x.shape()));
  RETURN_IF_ERROR(ExpectContiguous(op, what, t));
  return ExpectSameDevice(op, t, x);
}

Status CheckRstd(const char* op, const TensorView& rstd, const TensorView& x, int64_t rows) {
  RETURN_IF_ERROR(ExpectDType(op, "rstd", rstd, DType::kF32));
  if (rstd.numel() != rows || !rstd.is_contiguous())
    return InvalidArgumentError("{}: rstd: expected {} contiguous f32 values (one per row), got {}",
                                op, rows, rstd.ToString());
  return ExpectSameDevice(op, rstd, x);
}

}  // namespace

Status CheckRmsNormForward(const TensorView& y, const TensorView& rstd, const TensorView& x,
                           const TensorView& w, int64_t* rows, int64_t* h) {
  constexpr const char* kOp = "RmsNormForward";
  RETURN_IF_ERROR(CheckRowsH(kOp, x, w, rows, h));
  RETURN_IF_ERROR(CheckLike(kOp, "y", y, x, DType::kBF16));
  if (!rstd.empty()) RETURN_IF_ERROR(CheckRstd(kOp, rstd, x, *rows));
  return Status::Ok();
}

Status CheckRmsNormBackward(const TensorView& dx, const TensorView& dw, const TensorView& dy,
                            const TensorView& x, const TensorView& w, const TensorView& rstd,
                            int64_t* rows, int64_t* h) {
  constexpr const char* kOp = "RmsNormBackward";
  RETURN_IF_ERROR(CheckRowsH(kOp, x, w, rows, h));
  RETURN_IF_ERROR(CheckLike(kOp, "dx", dx, x, DType::kBF16));
  RETURN_IF_ERROR(CheckLike(kOp, "dy", dy, x, DType::kBF16));
  RETURN_IF_ERROR(CheckRstd(kOp, rstd, x, *rows));
  RETURN_IF_ERROR(ExpectDType(kOp, "dw", dw, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(kOp, "dw", dw, {*h}));
  return ExpectSameDevice(kOp, dw, x);
}

Status CheckRmsNormCudaWidth(const char* op, int64_t h) {
  if (h > kRmsNormMaxH)
    return InvalidArgumentError("{}: H = {} exceeds the CUDA kernel's maximum {}", op, h,
                                kRmsNormMaxH);
  return Status::Ok();
}

Status CheckRmsNormWorkspace(const char* op, const TensorView& workspace, const TensorView& x,
                             int64_t h) {
  RETURN_IF_ERROR(ExpectDType(op, "workspace", workspace, DType::kF32));
  RETURN_IF_ERROR(ExpectContiguous(op, "workspace", workspace));
  RETURN_IF_ERROR(ExpectSameDevice(op, workspace, x));
  if (workspace.numel() < RmsNormBackwardWorkspaceRows() * h)
    return InvalidArgumentError("{}: workspace: need f32 [{}, {}], got {}", op,
                                RmsNormBackwardWorkspaceRows(), h, workspace.ToString());
  return Status::Ok();
}

}  // namespace internal

namespace cpu {
namespace {

std::vector<float> Widen(const TensorView& t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.data_as<bf16>()[i].f();
  return v;
}

void Narrow(const std::vector<float>& v, const TensorView& t) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<bf16>()[i] = bf16(v[i]);
}

}  // namespace

Status RmsNormForward(TensorView y, TensorView rstd, TensorView x, TensorView w, float eps,
                      Stream) {
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckRmsNormForward(y, rstd, x, w, &rows, &h));
  std::vector<float> xf = Widen(x), wf = Widen(w), yf(xf.size()), rf(rows);
  ref::RmsNormForward<float>(yf.data(), rf.data(), xf.data(), wf.data(), rows, h, eps);
  Narrow(yf, y);
  if (!rstd.empty())
    for (int64_t r = 0; r < rows; ++r) rstd.data_as<float>()[r] = rf[r];
  return Status::Ok();
}

Status RmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x, TensorView w,
                       TensorView rstd, TensorView, Stream) {
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckRmsNormBackward(dx, dw, dy, x, w, rstd, &rows, &h));
  std::vector<float> dyf = Widen(dy), xf = Widen(x), wf = Widen(w), dxf(xf.size());
  ref::RmsNormBackward<float>(dxf.data(), dw.data_as<float>(), dyf.data(), xf.data(), wf.data(),
                              rstd.data_as<const float>(), rows, h);
  Narrow(dxf, dx);
  return Status::Ok();
}

}  // namespace cpu

Status RmsNormForward(TensorView y, TensorView rstd, TensorView x, TensorView w, float eps,
                      Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("RmsNormForward", {y, rstd, x, w}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::RmsNormForward(y, rstd, x, w, eps, s);
#endif
  return cpu::RmsNormForward(y, rstd, x, w, eps, s);
}

Status RmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x, TensorView w,
                       TensorView rstd, TensorView workspace, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("RmsNormBackward", {dx, dw, dy, x, w, rstd}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::RmsNormBackward(dx, dw, dy, x, w, rstd, workspace, s);
#endif
  return cpu::RmsNormBackward(dx, dw, dy, x, w, rstd, workspace, s);
}

}  // namespace tandem::kernels
