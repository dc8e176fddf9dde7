// CPU reference of kernels/moe/combine.h, its checks, and the dispatcher.
#include <cmath>
#include <vector>

#include "kernels/moe/combine.h"

namespace tandem::kernels {
namespace internal {

Status CheckMoeCombine(const MoeCombineArgs& a) {
  constexpr const char* kOp = "MoeCombine";
  RETURN_IF_ERROR(ExpectDType(kOp, "out", a.out, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(kOp, "residual", a.residual, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(kOp, "y", a.y, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(kOp, "assign_row", a.assign_row, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(kOp, "weights", a.weights, DType::kF32));
  if (a.out.ndim() != 2 || a.y.ndim() != 2 || a.weights.ndim() != 2)
    return InvalidArgumentError("{}: expected out [T, H], y [P, H] and weights [T, k], got {}, "
                                "{} and {}", kOp, a.out.ToString(), a.y.ToString(),
                                a.weights.ToString());
  const int64_t t = a.out.dim(0), h = a.out.dim(1), k = a.weights.dim(1);
  if (!(a.residual.shape() == a.out.shape()) || a.y.dim(1) != h || a.weights.dim(0) != t ||
      !(a.assign_row.shape() == Shape{t * k}) || a.y.dim(0) < t * k)
    return InvalidArgumentError("{}: shapes disagree: out {}, residual {}, y {}, assign_row {}, "
                                "weights {} (y needs at least T * k rows)", kOp,
                                a.out.ToString(), a.residual.ToString(), a.y.ToString(),
                                a.assign_row.ToString(), a.weights.ToString());
  if (a.shared.empty() != a.shared_gate.empty())
    return InvalidArgumentError("{}: shared and shared_gate go together", kOp);
  if (!a.shared.empty()) {
    RETURN_IF_ERROR(ExpectDType(kOp, "shared", a.shared, DType::kBF16));
    RETURN_IF_ERROR(ExpectDType(kOp, "shared_gate", a.shared_gate, DType::kF32));
    if (!(a.shared.shape() == a.out.shape()) || a.shared_gate.numel() != t)
      return InvalidArgumentError("{}: shared {} must be [{}, {}] and shared_gate {} [{}]", kOp,
                                  a.shared.ToString(), t, h, a.shared_gate.ToString(), t);
  }
  for (const TensorView* v : {&a.out, &a.residual, &a.y, &a.assign_row, &a.weights, &a.shared,
                              &a.shared_gate}) {
    if (v->empty()) continue;
    RETURN_IF_ERROR(ExpectContiguous(kOp, "tensor", *v));
    RETURN_IF_ERROR(ExpectSameDevice(kOp, a.out, *v));
  }
  return Status::Ok();
}

}  // namespace internal

namespace cpu {

Status MoeCombine(const MoeCombineArgs& a, Stream) {
  RETURN_IF_ERROR(internal::CheckMoeCombine(a));
  const int64_t t_count = a.out.dim(0), h = a.out.dim(1), k = a.weights.dim(1),
                p = a.y.dim(0);
  const int32_t* rows = a.assign_row.data_as<const int32_t>();
  for (int64_t i = 0; i < t_count * k; ++i)
    if (rows[i] < 0 || rows[i] >= p)
      return InvalidArgumentError("MoeCombine: assignment {} reads row {}, not in [0, {})", i,
                                  rows[i], p);
  const bf16* y = a.y.data_as<const bf16>();
  const float* w = a.weights.data_as<const float>();
  std::vector<float> acc(static_cast<size_t>(h));
  for (int64_t t = 0; t < t_count; ++t) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t j = 0; j < k; ++j) {
      const bf16* row = y + int64_t{rows[t * k + j]} * h;
      for (int64_t c = 0; c < h; ++c) acc[c] += w[t * k + j] * row[c].f();
    }
    if (!a.shared.empty()) {
      const float g = 1.f / (1.f + std::exp(-a.shared_gate.data_as<const float>()[t]));
      const bf16* s = a.shared.data_as<const bf16>() + t * h;
      for (int64_t c = 0; c < h; ++c) acc[c] += g * s[c].f();
    }
    const bf16* res = a.residual.data_as<const bf16>() + t * h;
    bf16* out = a.out.data_as<bf16>() + t * h;
    for (int64_t c = 0; c < h; ++c) out[c] = bf16(res[c].f() + acc[c]);
  }
  return Status::Ok();
}

}  // namespace cpu

Status MoeCombine(const MoeCombineArgs& a, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("MoeCombine", {a.out, a.residual, a.y, a.assign_row, a.weights}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::MoeCombine(a, s);
#endif
  return cpu::MoeCombine(a, s);
}

}  // namespace tandem::kernels
