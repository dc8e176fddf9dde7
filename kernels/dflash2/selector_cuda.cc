// cuda:: selector ops (selector.h): argument checks, the CUDA kernels' limits, NVTX range,
// launch (selector.cu, selector_backward.cu, selector_walk.cu).
#include <cmath>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/dflash2/selector.h"
#include "kernels/dflash2/selector_kernels.h"

namespace tandem::kernels::dflash2::cuda {
namespace {

using internal::SelectorDims;

// The rank limit of the kernels' shared memory; returns the launch dims.
Result<SelectorLaunchDims> LaunchDims(const char* op, const SelectorDims& d) {
  if (d.rank > kSelectorMaxRank)
    return InvalidArgumentError("{}: rank {} exceeds the CUDA kernels' maximum {}", op, d.rank,
                                kSelectorMaxRank);
  return SelectorLaunchDims{.rows = d.rows,
                            .k = static_cast<int>(d.top_k),
                            .rank = static_cast<int>(d.rank),
                            .vocab = d.vocab};
}

bool IsBf16(const TensorView& t) { return t.dtype() == DType::kBF16; }

}  // namespace

Status SelectorScoresForward(const TensorView& scores, const TensorView& proj,
                             const TensorView& pred, const TensorView& succ,
                             const TensorView& prev, const TensorView& ids,
                             const TensorView& unary, Stream s) {
  constexpr const char* kOp = "SelectorScoresForward";
  SelectorDims d;
  RETURN_IF_ERROR(
      internal::CheckSelectorScoresForward(scores, proj, pred, succ, prev, ids, unary, &d));
  ASSIGN_OR_RETURN(SelectorLaunchDims ld, LaunchDims(kOp, d));
  if (d.rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchSelectorScores(
      scores.data_as<float>(), proj.data(), IsBf16(proj), pred.data(), succ.data(),
      prev.data_as<const int32_t>(), ids.data_as<const int32_t>(), unary.data_as<const float>(),
      ld, s));
  return Status::Ok();
}

Status SelectorLoss(const TensorView& loss, const TensorView& stats, const TensorView& dscores,
                    const TensorView& scores, const TensorView& ids, const TensorView& targets,
                    const TensorView& weights, float scale, Stream s) {
  constexpr const char* kOp = "SelectorLoss";
  SelectorDims d;
  RETURN_IF_ERROR(
      internal::CheckSelectorLoss(loss, stats, dscores, scores, ids, targets, weights, &d));
  NvtxRange range(kOp);
  // R == 0 still writes loss = 0 and stats = {0, 0} (one CTA with no rows).
  CUDA_RETURN_IF_ERROR(LaunchSelectorLoss(
      loss.data_as<float>(), stats.data_as<int32_t>(), dscores.data_as<float>(),
      scores.data_as<const float>(), ids.data_as<const int32_t>(),
      targets.data_as<const int32_t>(), weights.data_as<const float>(), scale, d.rows,
      static_cast<int>(d.top_k), s));
  return Status::Ok();
}

Status SelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                              const TensorView& dsucc, const TensorView& dscores,
                              const TensorView& proj, const TensorView& pred,
                              const TensorView& succ, const TensorView& prev,
                              const TensorView& ids, Stream s) {
  constexpr const char* kOp = "SelectorScoresBackward";
  SelectorDims d;
  RETURN_IF_ERROR(internal::CheckSelectorScoresBackward(dproj, dpred, dsucc, dscores, proj, pred,
                                                        succ, prev, ids, &d));
  ASSIGN_OR_RETURN(SelectorLaunchDims ld, LaunchDims(kOp, d));
  if (d.rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchSelectorScoresBackward(
      dproj.data(), IsBf16(dproj), dpred.data_as<float>(), dsucc.data_as<float>(),
      dscores.data_as<const float>(), proj.data(), IsBf16(proj), pred.data(), succ.data(),
      prev.data_as<const int32_t>(), ids.data_as<const int32_t>(), ld, s));
  return Status::Ok();
}

Status CandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                             const TensorView& values, const TensorView& ids,
                             const TensorView& lm_head, float multiplier, float softcap,
                             Stream s) {
  constexpr const char* kOp = "CandidateHeadBackward";
  SelectorDims d;
  RETURN_IF_ERROR(internal::CheckCandidateHeadBackward(dhidden, dunary, values, ids, lm_head,
                                                       multiplier, softcap, &d));
  if (d.rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchCandidateHeadBackward(
      dhidden.data(), dunary.data_as<const float>(), values.data_as<const float>(),
      ids.data_as<const int32_t>(), lm_head.data(), multiplier, softcap, d.rows,
      static_cast<int>(d.top_k), d.hidden, s));
  return Status::Ok();
}

namespace {

Status Walk(const char* op, const TensorView& path, const TensorView& probs,
            const TensorView& proj, const TensorView& pred, const TensorView& succ,
            const TensorView& ids, const TensorView& unary, const TensorView& anchors,
            int64_t block_rows, float temperature, uint64_t seed, uint64_t offset, Stream s) {
  SelectorDims d;
  RETURN_IF_ERROR(internal::CheckSelectorWalk(op, path, probs, proj, pred, succ, ids, unary,
                                              anchors, block_rows, &d));
  ASSIGN_OR_RETURN(SelectorLaunchDims ld, LaunchDims(op, d));
  if (d.rows == 0) return Status::Ok();
  NvtxRange range(op);
  const SelectorWalkArgs a{.path = path.data_as<int32_t>(),
                           .probs = probs.empty() ? nullptr : probs.data_as<float>(),
                           .proj = proj.data(),
                           .proj_bf16 = IsBf16(proj),
                           .pred = pred.data(),
                           .succ = succ.data(),
                           .ids = ids.data_as<const int32_t>(),
                           .unary = unary.data_as<const float>(),
                           .anchors = anchors.data_as<const int32_t>(),
                           .block_rows = block_rows,
                           .temperature = temperature,
                           .seed = seed,
                           .offset = offset};
  CUDA_RETURN_IF_ERROR(LaunchSelectorWalk(a, ld, s));
  return Status::Ok();
}

}  // namespace

Status SelectorGreedyWalk(const TensorView& path, const TensorView& proj, const TensorView& pred,
                          const TensorView& succ, const TensorView& ids, const TensorView& unary,
                          const TensorView& anchors, int64_t block_rows, Stream s) {
  return Walk("SelectorGreedyWalk", path, TensorView(), proj, pred, succ, ids, unary, anchors,
              block_rows, 1.f, 0, 0, s);
}

Status SelectorSampleWalk(const TensorView& path, const TensorView& probs, const TensorView& proj,
                          const TensorView& pred, const TensorView& succ, const TensorView& ids,
                          const TensorView& unary, const TensorView& anchors, int64_t block_rows,
                          float temperature, uint64_t seed, uint64_t offset, Stream s) {
  constexpr const char* kOp = "SelectorSampleWalk";
  if (probs.empty()) return InvalidArgumentError("{}: probs must be f32 [R, k]", kOp);
  if (!(temperature > 0.f) || !std::isfinite(temperature))
    return InvalidArgumentError("{}: temperature must be finite and > 0, got {}", kOp,
                                temperature);
  return Walk(kOp, path, probs, proj, pred, succ, ids, unary, anchors, block_rows, temperature,
              seed, offset, s);
}

}  // namespace tandem::kernels::dflash2::cuda
