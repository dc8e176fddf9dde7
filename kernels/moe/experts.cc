// MoeExpertsForward (kernels/moe/experts.h): the per-expert GEMM loop, on either device.
#include "kernels/moe/experts.h"

#include <bit>

#include "kernels/core/stream.h"
#include "kernels/mlp/swiglu.h"

namespace tandem::kernels {

int64_t MoeBucketRows(int64_t n) {
  if (n <= 16) return 16;
  const int shift = std::max(4, static_cast<int>(std::bit_width(static_cast<uint64_t>(n))) - 4);
  const int64_t step = int64_t{1} << shift;
  return (n + step - 1) / step * step;
}

int64_t MoePaddedRows(int64_t assignments) { return assignments + assignments / 8 + 16; }

namespace {

Status CheckExperts(const MoeExpertWeights& w, std::span<const int32_t> offsets,
                    const TensorView& x, const TensorView& gate_up, const TensorView& act,
                    const TensorView& y) {
  constexpr const char* kOp = "MoeExpertsForward";
  for (const TensorView* v : {&w.gate_up, &w.down, &x, &gate_up, &act, &y})
    RETURN_IF_ERROR(ExpectDType(kOp, "tensor", *v, DType::kBF16));
  if (w.gate_up.ndim() != 3 || w.down.ndim() != 3)
    return InvalidArgumentError("{}: expert weights must be [E, 2I, H] and [E, H, I], got {} "
                                "and {}", kOp, w.gate_up.ToString(), w.down.ToString());
  const int64_t e = w.gate_up.dim(0), i2 = w.gate_up.dim(1), h = w.gate_up.dim(2);
  if (i2 % 2 != 0 || !(w.down.shape() == Shape{e, h, i2 / 2}))
    return InvalidArgumentError("{}: gate_up {} and down {} disagree", kOp,
                                w.gate_up.ToString(), w.down.ToString());
  if (static_cast<int64_t>(offsets.size()) != e + 1 || offsets[0] != 0)
    return InvalidArgumentError("{}: {} offsets for {} experts (need E + 1, starting at 0)", kOp,
                                offsets.size(), e);
  for (int64_t x_e = 0; x_e < e; ++x_e)
    if (offsets[x_e + 1] < offsets[x_e])
      return InvalidArgumentError("{}: offsets decrease at expert {}", kOp, x_e);
  const int64_t n = offsets[e];
  const int64_t rows = x.device().is_cuda() ? MoePaddedRows(n) : n;
  if (x.ndim() != 2 || x.dim(1) != h || x.dim(0) < rows || !(y.shape() == x.shape()) ||
      gate_up.ndim() != 2 || gate_up.dim(1) != i2 || gate_up.dim(0) < rows || act.ndim() != 2 ||
      act.dim(1) != i2 / 2 || act.dim(0) < rows)
    return InvalidArgumentError("{}: buffers x {}, gate_up {}, act {}, y {} must have >= {} rows "
                                "of H {}, 2I {}, I {}, H", kOp, x.ToString(),
                                gate_up.ToString(), act.ToString(), y.ToString(), rows, h, i2,
                                i2 / 2);
  return Status::Ok();
}

}  // namespace

Status MoeExpertsForward(GemmContext* gemm, const MoeExpertWeights& w,
                         std::span<const int32_t> offsets, const TensorView& x,
                         const TensorView& gate_up, const TensorView& act, const TensorView& y,
                         Stream s) {
  RETURN_IF_ERROR(CheckExperts(w, offsets, x, gate_up, act, y));
  const int64_t e = w.gate_up.dim(0), n = offsets[e];
  if (n == 0) return Status::Ok();
  NvtxRange range("MoeExpertsForward");
  const bool bucket = x.device().is_cuda();
  GemmOptions linear;
  linear.trans_b = true;
  auto rows_of = [&](int64_t x_e) {
    const int64_t count = offsets[x_e + 1] - offsets[x_e];
    return bucket ? MoeBucketRows(count) : count;
  };
  // Increasing expert order: a bucket's extra rows are overwritten by the experts after it.
  for (int64_t x_e = 0; x_e < e; ++x_e) {
    if (offsets[x_e + 1] == offsets[x_e]) continue;
    const int64_t r = rows_of(x_e);
    RETURN_IF_ERROR(Gemm(gemm, x.Narrow(0, offsets[x_e], r),
                         w.gate_up.Narrow(0, x_e, 1).Reshape({w.gate_up.dim(1), w.gate_up.dim(2)}),
                         gate_up.Narrow(0, offsets[x_e], r), linear, s));
  }
  const auto [gate, up] = SplitGateUp(gate_up.Narrow(0, 0, n));
  RETURN_IF_ERROR(SwiGluForward(act.Narrow(0, 0, n), gate, up, s));
  for (int64_t x_e = 0; x_e < e; ++x_e) {
    if (offsets[x_e + 1] == offsets[x_e]) continue;
    const int64_t r = rows_of(x_e);
    RETURN_IF_ERROR(Gemm(gemm, act.Narrow(0, offsets[x_e], r),
                         w.down.Narrow(0, x_e, 1).Reshape({w.down.dim(1), w.down.dim(2)}),
                         y.Narrow(0, offsets[x_e], r), linear, s));
  }
  return Status::Ok();
}

}  // namespace tandem::kernels
