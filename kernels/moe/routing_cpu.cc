// CPU reference of kernels/moe/routing.h (router and permutation), checks, and dispatchers.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/moe/routing.h"

namespace tandem::kernels {
namespace internal {

Status CheckMoeRouter(const TensorView& topk_ids, const TensorView& topk_weights,
                      const TensorView& logits) {
  constexpr const char* kOp = "MoeRouterForward";
  if (logits.dtype() != DType::kBF16 && logits.dtype() != DType::kF32)
    return InvalidArgumentError("{}: logits must be bf16 or f32, got {}", kOp, logits.ToString());
  RETURN_IF_ERROR(ExpectDType(kOp, "topk_ids", topk_ids, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(kOp, "topk_weights", topk_weights, DType::kF32));
  if (logits.ndim() != 2 || topk_ids.ndim() != 2 || topk_ids.shape() != topk_weights.shape() ||
      topk_ids.dim(0) != logits.dim(0))
    return InvalidArgumentError("{}: expected logits [T, E], topk_ids and topk_weights [T, k], "
                                "got {}, {} and {}", kOp, logits.ToString(),
                                topk_ids.ToString(), topk_weights.ToString());
  const int64_t e = logits.dim(1), k = topk_ids.dim(1);
  if (e < 1 || e > kMoeMaxExperts)
    return InvalidArgumentError("{}: {} experts; 1..{} are supported", kOp, e, kMoeMaxExperts);
  if (k < 1 || k > e || k > kMoeMaxTopK)
    return InvalidArgumentError("{}: top-k {} must be in 1..min(experts {}, {})", kOp, k, e,
                                kMoeMaxTopK);
  for (const TensorView* t : {&topk_ids, &topk_weights, &logits})
    RETURN_IF_ERROR(ExpectContiguous(kOp, "tensor", *t));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, logits, topk_ids));
  return ExpectSameDevice(kOp, logits, topk_weights);
}

Status CheckMoePermute(const TensorView& expert_offsets, const TensorView& perm_token,
                       const TensorView& assign_row, const TensorView& topk_ids) {
  constexpr const char* kOp = "MoePermute";
  for (const TensorView* t : {&expert_offsets, &perm_token, &assign_row, &topk_ids}) {
    RETURN_IF_ERROR(ExpectDType(kOp, "index tensor", *t, DType::kI32));
    RETURN_IF_ERROR(ExpectContiguous(kOp, "index tensor", *t));
    RETURN_IF_ERROR(ExpectSameDevice(kOp, *t, topk_ids));
  }
  const int64_t n = topk_ids.numel();
  if (topk_ids.ndim() != 2 || expert_offsets.ndim() != 1 || expert_offsets.dim(0) < 2 ||
      expert_offsets.dim(0) > kMoeMaxExperts + 1 || !(perm_token.shape() == Shape{n}) ||
      !(assign_row.shape() == Shape{n}))
    return InvalidArgumentError("{}: expected topk_ids [T, k], expert_offsets [E + 1] with E in "
                                "1..{}, perm_token and assign_row [T * k], got {}, {}, {} and {}",
                                kOp, kMoeMaxExperts, topk_ids.ToString(),
                                expert_offsets.ToString(), perm_token.ToString(),
                                assign_row.ToString());
  if (n > (int64_t{1} << 31) - 1)
    return InvalidArgumentError("{}: {} assignments exceed the i32 row index", kOp, n);
  return Status::Ok();
}

Status CheckMoePadLayout(const TensorView& padded_token, const TensorView& padded_row,
                         const TensorView& expert_offsets, const TensorView& perm_token,
                         const TensorView& assign_row, const TensorView& topk_ids, int64_t cap) {
  constexpr const char* kOp = "MoePadLayout";
  RETURN_IF_ERROR(CheckMoePermute(expert_offsets, perm_token, assign_row, topk_ids));
  for (const TensorView* t : {&padded_token, &padded_row}) {
    RETURN_IF_ERROR(ExpectDType(kOp, "index tensor", *t, DType::kI32));
    RETURN_IF_ERROR(ExpectContiguous(kOp, "index tensor", *t));
    RETURN_IF_ERROR(ExpectSameDevice(kOp, *t, topk_ids));
  }
  const int64_t e = expert_offsets.dim(0) - 1;
  if (cap < 1 || e * cap > (int64_t{1} << 31) - 1 || !(padded_token.shape() == Shape{e * cap}) ||
      !(padded_row.shape() == assign_row.shape()))
    return InvalidArgumentError("{}: {} experts of {} rows need padded_token [E * cap] (i32 "
                                "rows) and padded_row like assign_row {}, got {} and {}", kOp, e,
                                cap, assign_row.ToString(), padded_token.ToString(),
                                padded_row.ToString());
  return Status::Ok();
}

}  // namespace internal

namespace cpu {

Status MoeRouterForward(TensorView topk_ids, TensorView topk_weights, TensorView logits,
                        bool normalize, Stream) {
  RETURN_IF_ERROR(internal::CheckMoeRouter(topk_ids, topk_weights, logits));
  const int64_t t_count = logits.dim(0), e = logits.dim(1), k = topk_ids.dim(1);
  std::vector<float> l(static_cast<size_t>(e));
  std::vector<bool> taken(static_cast<size_t>(e));
  for (int64_t t = 0; t < t_count; ++t) {
    for (int64_t i = 0; i < e; ++i)
      l[i] = logits.dtype() == DType::kF32 ? logits.data_as<const float>()[t * e + i]
                                           : logits.data_as<const bf16>()[t * e + i].f();
    const float mx = *std::max_element(l.begin(), l.end());
    float sum = 0.f;
    for (int64_t i = 0; i < e; ++i) sum += std::exp(l[i] - mx);
    std::fill(taken.begin(), taken.end(), false);
    int32_t* ids = topk_ids.data_as<int32_t>() + t * k;
    float* w = topk_weights.data_as<float>() + t * k;
    float picked = 0.f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t i = 0; i < e; ++i)
        if (!taken[i] && (best < 0 || l[i] > l[best])) best = i;
      taken[best] = true;
      ids[j] = static_cast<int32_t>(best);
      w[j] = std::exp(l[best] - mx) / sum;
      picked += w[j];
    }
    if (normalize)
      for (int64_t j = 0; j < k; ++j) w[j] /= picked;
  }
  return Status::Ok();
}

Status MoePermute(TensorView expert_offsets, TensorView perm_token, TensorView assign_row,
                  TensorView topk_ids, Stream) {
  RETURN_IF_ERROR(internal::CheckMoePermute(expert_offsets, perm_token, assign_row, topk_ids));
  const int64_t e = expert_offsets.dim(0) - 1, n = topk_ids.numel(), k = topk_ids.dim(1);
  const int32_t* ids = topk_ids.data_as<const int32_t>();
  int32_t* off = expert_offsets.data_as<int32_t>();
  std::fill(off, off + e + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= e)
      return InvalidArgumentError("MoePermute: token {} slot {} names expert {}, not in [0, {})",
                                  i / k, i % k, ids[i], e);
    ++off[ids[i] + 1];
  }
  for (int64_t x = 0; x < e; ++x) off[x + 1] += off[x];
  std::vector<int32_t> next(off, off + e);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = next[ids[i]]++;
    assign_row.data_as<int32_t>()[i] = r;
    perm_token.data_as<int32_t>()[r] = static_cast<int32_t>(i / k);
  }
  return Status::Ok();
}

Status MoePadLayout(TensorView padded_token, TensorView padded_row, TensorView expert_offsets,
                    TensorView perm_token, TensorView assign_row, TensorView topk_ids,
                    int64_t cap, Stream) {
  RETURN_IF_ERROR(internal::CheckMoePadLayout(padded_token, padded_row, expert_offsets,
                                              perm_token, assign_row, topk_ids, cap));
  const int64_t e = expert_offsets.dim(0) - 1, n = topk_ids.numel();
  const int32_t* off = expert_offsets.data_as<const int32_t>();
  const int32_t* ids = topk_ids.data_as<const int32_t>();
  for (int64_t x = 0; x < e; ++x) {
    const int64_t count = off[x + 1] - off[x];
    if (count > cap)
      return InvalidArgumentError("MoePadLayout: expert {} has {} rows, more than cap {}", x,
                                  count, cap);
    for (int64_t j = 0; j < cap; ++j)
      padded_token.data_as<int32_t>()[x * cap + j] =
          j < count ? perm_token.data_as<const int32_t>()[off[x] + j] : 0;
  }
  for (int64_t i = 0; i < n; ++i)
    padded_row.data_as<int32_t>()[i] = static_cast<int32_t>(
        ids[i] * cap + assign_row.data_as<const int32_t>()[i] - off[ids[i]]);
  return Status::Ok();
}

}  // namespace cpu

Status MoeRouterForward(TensorView topk_ids, TensorView topk_weights, TensorView logits,
                        bool normalize, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("MoeRouterForward", {topk_ids, topk_weights, logits}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::MoeRouterForward(topk_ids, topk_weights, logits, normalize, s);
#endif
  return cpu::MoeRouterForward(topk_ids, topk_weights, logits, normalize, s);
}

Status MoePermute(TensorView expert_offsets, TensorView perm_token, TensorView assign_row,
                  TensorView topk_ids, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("MoePermute", {expert_offsets, perm_token, assign_row, topk_ids}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::MoePermute(expert_offsets, perm_token, assign_row, topk_ids, s);
#endif
  return cpu::MoePermute(expert_offsets, perm_token, assign_row, topk_ids, s);
}

Status MoePadLayout(TensorView padded_token, TensorView padded_row, TensorView expert_offsets,
                    TensorView perm_token, TensorView assign_row, TensorView topk_ids,
                    int64_t cap, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("MoePadLayout", {padded_token, padded_row, expert_offsets,
                                                   perm_token, assign_row, topk_ids}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda())
    return cuda::MoePadLayout(padded_token, padded_row, expert_offsets, perm_token, assign_row,
                              topk_ids, cap, s);
#endif
  return cpu::MoePadLayout(padded_token, padded_row, expert_offsets, perm_token, assign_row,
                           topk_ids, cap, s);
}

}  // namespace tandem::kernels
