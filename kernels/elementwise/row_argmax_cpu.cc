// CPU reference for kernels/elementwise/row_argmax.h, checks, and the dispatcher.
#include <cmath>

#include "kernels/elementwise/row_argmax.h"

namespace tandem::kernels {
namespace internal {

Status CheckRowArgmax(const TensorView& out, const TensorView& x) {
  constexpr const char* kOp = "RowArgmax";
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kBF16)
    return InvalidArgumentError("{}: x must be f32 or bf16, got {}", kOp, x.ToString());
  RETURN_IF_ERROR(ExpectDType(kOp, "out", out, DType::kI32));
  if (x.ndim() != 2 || x.dim(1) < 1)
    return InvalidArgumentError("{}: x must be [R, V] with V >= 1, got {}", kOp, x.ToString());
  RETURN_IF_ERROR(ExpectShape(kOp, "out", out, Shape{x.dim(0)}));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "x", x));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "out", out));
  return ExpectSameDevice(kOp, out, x);
}

}  // namespace internal

namespace cpu {
namespace {

template <typename T>
void Argmax(int32_t* out, const T* x, int64_t rows, int64_t v) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * v;
    int64_t best = -1;
    float best_v = 0;
    for (int64_t j = 0; j < v; ++j) {
      const float f = static_cast<float>(row[j]);
      if (std::isnan(f)) continue;
      if (best < 0 || f > best_v) {
        best = j;
        best_v = f;
      }
    }
    out[r] = static_cast<int32_t>(best < 0 ? 0 : best);
  }
}

}  // namespace

Status RowArgmax(TensorView out, TensorView x, Stream) {
  RETURN_IF_ERROR(internal::CheckRowArgmax(out, x));
  if (x.dtype() == DType::kF32)
    Argmax(out.data_as<int32_t>(), x.data_as<const float>(), x.dim(0), x.dim(1));
  else
    Argmax(out.data_as<int32_t>(), x.data_as<const bf16>(), x.dim(0), x.dim(1));
  return Status::Ok();
}

}  // namespace cpu

Status RowArgmax(TensorView out, TensorView x, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("RowArgmax", {out, x}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::RowArgmax(out, x, s);
#endif
  return cpu::RowArgmax(out, x, s);
}

}  // namespace tandem::kernels
