// MoeExpertsForward (kernels/moe/experts.h): the per-expert GEMM loop, on either device;
// MoeExperts' path choice and dispatch (its CUDA paths: experts_cuda.cc).
#include "kernels/moe/experts.h"

#include <algorithm>
#include <bit>

#include "kernels/moe/experts_internal.h"

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

namespace internal {
namespace {

Status CheckMoeExpertWeights(const char* op, const MoeExpertWeights& w,
                             std::span<const int32_t> offsets) {
  for (const TensorView* v : {&w.gate_up, &w.down}) {
    RETURN_IF_ERROR(ExpectDType(op, "expert weights", *v, DType::kBF16));
    RETURN_IF_ERROR(ExpectContiguous(op, "expert weights", *v));
  }
  if (w.gate_up.ndim() != 3 || w.down.ndim() != 3)
    return InvalidArgumentError("{}: expert weights must be [E, 2I, H] and [E, H, I], got {} "
                                "and {}", op, w.gate_up.ToString(), w.down.ToString());
  const int64_t e = w.gate_up.dim(0), i2 = w.gate_up.dim(1), h = w.gate_up.dim(2);
  if (i2 % 2 != 0 || !(w.down.shape() == Shape{e, h, i2 / 2}))
    return InvalidArgumentError("{}: gate_up {} and down {} disagree", op,
                                w.gate_up.ToString(), w.down.ToString());
  if (static_cast<int64_t>(offsets.size()) != e + 1 || offsets[0] != 0)
    return InvalidArgumentError("{}: {} offsets for {} experts (need E + 1, starting at 0)", op,
                                offsets.size(), e);
  for (int64_t x_e = 0; x_e < e; ++x_e)
    if (offsets[x_e + 1] < offsets[x_e])
      return InvalidArgumentError("{}: offsets decrease at expert {}", op, x_e);
  return Status::Ok();
}

// x, gate_up, act, y: bf16 with >= `rows` rows of H, 2I, I and H (w's widths).
Status CheckMoeExpertBuffers(const char* op, const MoeExpertWeights& w, int64_t rows,
                             const TensorView& x, const TensorView& gate_up,
                             const TensorView& act, const TensorView& y) {
  const int64_t i2 = w.gate_up.dim(1), h = w.gate_up.dim(2);
  for (const TensorView* v : {&x, &gate_up, &act, &y})
    RETURN_IF_ERROR(ExpectDType(op, "buffer", *v, DType::kBF16));
  if (x.ndim() != 2 || x.dim(1) != h || x.dim(0) < rows || !(y.shape() == x.shape()) ||
      gate_up.ndim() != 2 || gate_up.dim(1) != i2 || gate_up.dim(0) < rows || act.ndim() != 2 ||
      act.dim(1) != i2 / 2 || act.dim(0) < rows)
    return InvalidArgumentError("{}: buffers x {}, gate_up {}, act {}, y {} must have >= {} rows "
                                "of H {}, 2I {}, I {}, H", op, x.ToString(),
                                gate_up.ToString(), act.ToString(), y.ToString(), rows, h, i2,
                                i2 / 2);
  return Status::Ok();
}

}  // namespace

Status CheckMoeExperts(const MoeExpertWeights& w, std::span<const int32_t> offsets,
                       const TensorView& x, const TensorView& gate_up, const TensorView& act,
                       const TensorView& y) {
  constexpr const char* kOp = "MoeExpertsForward";
  RETURN_IF_ERROR(CheckMoeExpertWeights(kOp, w, offsets));
  const int64_t n = offsets.back();
  return CheckMoeExpertBuffers(kOp, w, x.device().is_cuda() ? MoePaddedRows(n) : n, x, gate_up,
                               act, y);
}

Status CheckMoeExpertsPadded(const MoeExpertWeights& w, std::span<const int32_t> offsets,
                             int64_t cap, const TensorView& x, const TensorView& gate_up,
                             const TensorView& act, const TensorView& y) {
  constexpr const char* kOp = "MoeExperts::ForwardPadded";
  RETURN_IF_ERROR(CheckMoeExpertWeights(kOp, w, offsets));
  int64_t most = 0;
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    most = std::max<int64_t>(most, offsets[e + 1] - offsets[e]);
  if (cap < std::max<int64_t>(most, 1))
    return InvalidArgumentError("{}: cap {} is below the most rows of an expert ({})", kOp, cap,
                                most);
  return CheckMoeExpertBuffers(kOp, w, w.gate_up.dim(0) * cap, x, gate_up, act, y);
}

}  // namespace internal

Status MoeExpertsForward(GemmContext* gemm, const MoeExpertWeights& w,
                         std::span<const int32_t> offsets, const TensorView& x,
                         const TensorView& gate_up, const TensorView& act, const TensorView& y,
                         Stream s) {
  RETURN_IF_ERROR(internal::CheckMoeExperts(w, offsets, x, gate_up, act, y));
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

const char* MoeExpertsPathName(MoeExpertsPath path) {
  switch (path) {
    case MoeExpertsPath::kAuto: return "auto";
    case MoeExpertsPath::kLoop: return "loop";
    case MoeExpertsPath::kGrouped: return "grouped";
    case MoeExpertsPath::kPadded: return "padded";
  }
  return "?";
}

int64_t MoeExpertCapacity(std::span<const int32_t> offsets) {
  int64_t most = 0;
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    most = std::max<int64_t>(most, offsets[e + 1] - offsets[e]);
  return (most + 15) / 16 * 16;
}

int64_t MoeExpertBufferRows(int64_t assignments) { return assignments + assignments / 2 + 64; }

MoeExpertsPath MoeChooseExpertsPath(std::span<const int32_t> offsets) {
  const int64_t e = static_cast<int64_t>(offsets.size()) - 1;
  int64_t active = 0;
  for (int64_t x = 0; x < e; ++x) active += offsets[x + 1] > offsets[x];
  // One expert with tokens: one GEMM per projection whatever the path.
  if (active <= 1) return MoeExpertsPath::kLoop;
  if (e * MoeExpertCapacity(offsets) <= MoeExpertBufferRows(offsets[e]))
    return MoeExpertsPath::kPadded;
  return MoeExpertsPath::kGrouped;
}

#ifndef TANDEM_HAVE_CUDA
MoeExperts::Impl::~Impl() = default;
#endif

MoeExperts::MoeExperts(MoeExpertsPath path, int64_t max_experts)
    : path_(path), max_experts_(max_experts) {}
MoeExperts::~MoeExperts() = default;

Result<std::unique_ptr<MoeExperts>> MoeExperts::Create(Allocator& alloc, int64_t max_experts,
                                                       MoeExpertsPath path) {
  if (max_experts < 1)
    return InvalidArgumentError("MoeExperts: max_experts must be positive, got {}", max_experts);
  std::unique_ptr<MoeExperts> m(new MoeExperts(path, max_experts));
  if (alloc.device().is_cuda()) {
#ifdef TANDEM_HAVE_CUDA
    m->cuda_ = true;
    ASSIGN_OR_RETURN(m->impl_, internal::CreateMoeExpertsImpl(alloc, max_experts));
#else
    return UnavailableError("MoeExperts: a CUDA device in a build without CUDA");
#endif
  }
  return m;
}

MoeExpertsPath MoeExperts::Resolve(std::span<const int32_t> offsets) const {
  const MoeExpertsPath rule = MoeChooseExpertsPath(offsets);
  MoeExpertsPath p = path_ == MoeExpertsPath::kAuto ? rule : path_;
  if (p == MoeExpertsPath::kPadded && rule != MoeExpertsPath::kPadded)
    p = MoeExpertsPath::kGrouped;
  if (!cuda_ && p == MoeExpertsPath::kGrouped) p = MoeExpertsPath::kLoop;
  return p;
}

Status MoeExperts::Forward(GemmContext* gemm, const MoeExpertWeights& w,
                           std::span<const int32_t> offsets, const TensorView& x,
                           const TensorView& gate_up, const TensorView& act, const TensorView& y,
                           Stream s) {
  RETURN_IF_ERROR(internal::CheckMoeExperts(w, offsets, x, gate_up, act, y));
  if (w.gate_up.dim(0) > max_experts_)
    return InvalidArgumentError("MoeExperts: {} experts, made for at most {}", w.gate_up.dim(0),
                                max_experts_);
  MoeExpertsPath p = Resolve(offsets);
  if (p == MoeExpertsPath::kPadded) p = cuda_ ? MoeExpertsPath::kGrouped : MoeExpertsPath::kLoop;
  last_path_ = p;
#ifdef TANDEM_HAVE_CUDA
  const internal::MoeExpertsArgs a{w, offsets, x, gate_up, act, y, s};
  if (p == MoeExpertsPath::kGrouped) return internal::MoeExpertsGrouped(impl_.get(), a);
#endif
  return MoeExpertsForward(gemm, w, offsets, x, gate_up, act, y, s);
}

Status MoeExperts::ForwardPadded(GemmContext* gemm, const MoeExpertWeights& w,
                                 std::span<const int32_t> offsets, int64_t cap,
                                 const TensorView& x, const TensorView& gate_up,
                                 const TensorView& act, const TensorView& y, Stream s) {
  RETURN_IF_ERROR(internal::CheckMoeExpertsPadded(w, offsets, cap, x, gate_up, act, y));
  const int64_t e = w.gate_up.dim(0), h = w.gate_up.dim(2), i = w.down.dim(2);
  if (e > max_experts_)
    return InvalidArgumentError("MoeExperts: {} experts, made for at most {}", e, max_experts_);
  last_path_ = MoeExpertsPath::kPadded;
  if (offsets[e] == 0) return Status::Ok();
#ifdef TANDEM_HAVE_CUDA
  if (cuda_) return internal::MoeExpertsPadded(impl_.get(), w, cap, x, gate_up, act, y, s);
#endif
  // The CPU version: each expert's rows only (the padding's outputs are never read).
  GemmOptions linear;
  linear.trans_b = true;
  for (int64_t x_e = 0; x_e < e; ++x_e) {
    const int64_t r = offsets[x_e + 1] - offsets[x_e];
    if (r == 0) continue;
    const TensorView gu = gate_up.Narrow(0, x_e * cap, r), a = act.Narrow(0, x_e * cap, r);
    RETURN_IF_ERROR(Gemm(gemm, x.Narrow(0, x_e * cap, r),
                         w.gate_up.Narrow(0, x_e, 1).Reshape({2 * i, h}), gu, linear, s));
    const auto [gate, up] = SplitGateUp(gu);
    RETURN_IF_ERROR(SwiGluForward(a, gate, up, s));
    RETURN_IF_ERROR(Gemm(gemm, a, w.down.Narrow(0, x_e, 1).Reshape({h, i}),
                         y.Narrow(0, x_e * cap, r), linear, s));
  }
  return Status::Ok();
}

}  // namespace tandem::kernels
