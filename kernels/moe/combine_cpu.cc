// CPU reference of kernels/moe/combine.h, its checks, and the dispatcher.
#include <cmath>
#include <vector>

#include "kernels/moe/combine.h"

namespace tandem::kernels {
namespace internal {
namespace {

// The optional scales of raw FP8 expert rows: all or none, f32 row_scale [>= P], f32
// channel_scale [E, H], i32 ids [T, k].
Status CheckScales(const char* op, const MoeCombineArgs& a) {
  const bool any = !a.row_scale.empty() || !a.channel_scale.empty() || !a.ids.empty();
  if (!any) return Status::Ok();
  if (a.row_scale.empty() || a.channel_scale.empty() || a.ids.empty())
    return InvalidArgumentError("{}: row_scale, channel_scale and ids go together", op);
  RETURN_IF_ERROR(ExpectDType(op, "row_scale", a.row_scale, DType::kF32));
  RETURN_IF_ERROR(ExpectDType(op, "channel_scale", a.channel_scale, DType::kF32));
  RETURN_IF_ERROR(ExpectDType(op, "ids", a.ids, DType::kI32));
  if (a.row_scale.numel() < a.y.dim(0) || a.channel_scale.ndim() != 2 ||
      a.channel_scale.dim(1) != a.out.dim(1) || !(a.ids.shape() == a.weights.shape()))
    return InvalidArgumentError("{}: row_scale {} needs >= {} values, channel_scale {} [E, {}] "
                                "and ids {} the shape of weights {}", op,
                                a.row_scale.ToString(), a.y.dim(0), a.channel_scale.ToString(),
                                a.out.dim(1), a.ids.ToString(), a.weights.ToString());
  return Status::Ok();
}

}  // namespace

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
  RETURN_IF_ERROR(CheckScales(kOp, a));
  for (const TensorView* v : {&a.out, &a.residual, &a.y, &a.assign_row, &a.weights, &a.shared,
                              &a.shared_gate, &a.row_scale, &a.channel_scale, &a.ids}) {
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
  const bool scaled = !a.ids.empty();
  const int32_t* ids = scaled ? a.ids.data_as<const int32_t>() : nullptr;
  const int64_t experts = scaled ? a.channel_scale.dim(0) : 0;
  for (int64_t i = 0; scaled && i < t_count * k; ++i)
    if (ids[i] < 0 || ids[i] >= experts)
      return InvalidArgumentError("MoeCombine: assignment {} names expert {}, not in [0, {})", i,
                                  ids[i], experts);
  const bf16* y = a.y.data_as<const bf16>();
  const float* w = a.weights.data_as<const float>();
  std::vector<float> acc(static_cast<size_t>(h));
  for (int64_t t = 0; t < t_count; ++t) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = rows[t * k + j];
      const bf16* row = y + r * h;
      if (!scaled) {
        for (int64_t c = 0; c < h; ++c) acc[c] += w[t * k + j] * row[c].f();
        continue;
      }
      const float rs = a.row_scale.data_as<const float>()[r];
      const float* cs = a.channel_scale.data_as<const float>() + ids[t * k + j] * h;
      for (int64_t c = 0; c < h; ++c) acc[c] += w[t * k + j] * (row[c].f() * rs * cs[c]);
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
