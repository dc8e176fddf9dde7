// CPU references for kernels/elementwise/elementwise.h, the argument checks, and the dispatchers.
// Thread-safety: stateless.
#include <cmath>
#include <cstring>

#include "kernels/elementwise/elementwise.h"

namespace tandem::kernels {
namespace internal {

Status CheckResidualAdd(const TensorView& out, const TensorView& a, const TensorView& b) {
  constexpr const char* kOp = "ResidualAdd";
  if (out.dtype() != DType::kBF16 && out.dtype() != DType::kF32)
    return InvalidArgumentError("{}: out: expected bf16 or f32, got {}", kOp, out.ToString());
  RETURN_IF_ERROR(ExpectDType(kOp, "a", a, out.dtype()));
  RETURN_IF_ERROR(ExpectDType(kOp, "b", b, out.dtype()));
  RETURN_IF_ERROR(ExpectShape(kOp, "a", a, out.shape()));
  RETURN_IF_ERROR(ExpectShape(kOp, "b", b, out.shape()));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "out", out));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "a", a));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "b", b));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, out, a));
  return ExpectSameDevice(kOp, out, b);
}

Status CheckCast(const TensorView& out, const TensorView& in) {
  constexpr const char* kOp = "Cast";
  for (const TensorView* t : {&out, &in})
    if (t->dtype() != DType::kBF16 && t->dtype() != DType::kF32)
      return InvalidArgumentError("{}: expected bf16 or f32, got {}", kOp, t->ToString());
  RETURN_IF_ERROR(ExpectShape(kOp, "in", in, out.shape()));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "out", out));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "in", in));
  return ExpectSameDevice(kOp, out, in);
}

Status CheckScale(const TensorView& out, const TensorView& in, float scale) {
  constexpr const char* kOp = "Scale";
  if (out.dtype() != DType::kBF16 && out.dtype() != DType::kF32)
    return InvalidArgumentError("{}: out: expected bf16 or f32, got {}", kOp, out.ToString());
  if (!std::isfinite(scale)) return InvalidArgumentError("{}: scale {} is not finite", kOp, scale);
  RETURN_IF_ERROR(ExpectDType(kOp, "in", in, out.dtype()));
  RETURN_IF_ERROR(ExpectShape(kOp, "in", in, out.shape()));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "out", out));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "in", in));
  return ExpectSameDevice(kOp, out, in);
}

}  // namespace internal

namespace cpu {
namespace {

float Load(const TensorView& t, int64_t i) {
  return t.dtype() == DType::kBF16 ? t.data_as<bf16>()[i].f() : t.data_as<float>()[i];
}
void Store(const TensorView& t, int64_t i, float v) {
  if (t.dtype() == DType::kBF16) {
    t.data_as<bf16>()[i] = bf16(v);
  } else {
    t.data_as<float>()[i] = v;
  }
}

}  // namespace

Status ResidualAdd(TensorView out, TensorView a, TensorView b, Stream) {
  RETURN_IF_ERROR(internal::CheckResidualAdd(out, a, b));
  for (int64_t i = 0; i < out.numel(); ++i) Store(out, i, Load(a, i) + Load(b, i));
  return Status::Ok();
}

Status Cast(TensorView out, TensorView in, Stream) {
  RETURN_IF_ERROR(internal::CheckCast(out, in));
  if (out.dtype() == in.dtype()) {
    std::memmove(out.data(), in.data(), out.nbytes());
    return Status::Ok();
  }
  for (int64_t i = 0; i < out.numel(); ++i) Store(out, i, Load(in, i));
  return Status::Ok();
}

Status Scale(TensorView out, TensorView in, float scale, Stream) {
  RETURN_IF_ERROR(internal::CheckScale(out, in, scale));
  for (int64_t i = 0; i < out.numel(); ++i) Store(out, i, Load(in, i) * scale);
  return Status::Ok();
}

}  // namespace cpu

Status ResidualAdd(TensorView out, TensorView a, TensorView b, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("ResidualAdd", {out, a, b}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::ResidualAdd(out, a, b, s);
#endif
  return cpu::ResidualAdd(out, a, b, s);
}

Status Cast(TensorView out, TensorView in, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("Cast", {out, in}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::Cast(out, in, s);
#endif
  return cpu::Cast(out, in, s);
}

Status Scale(TensorView out, TensorView in, float scale, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("Scale", {out, in}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::Scale(out, in, scale, s);
#endif
  return cpu::Scale(out, in, scale, s);
}

}  // namespace tandem::kernels
