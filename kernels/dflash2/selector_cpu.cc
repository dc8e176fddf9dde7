// CPU versions of the selector ops (selector.h), fp32 math reading bf16 in place, and the
// device dispatchers. The loss is candidate_selector.h's float reference.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dflash2/candidate_selector.h"
#include "kernels/dflash2/selector.h"
#include "kernels/random/philox.h"

namespace tandem::kernels::dflash2 {
namespace cpu {
namespace {

using internal::SelectorDims;

float ProjAt(const TensorView& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.data_as<const float>()[i] : t.data_as<const bf16>()[i].f();
}

void StoreProj(const TensorView& t, int64_t i, float v) {
  if (t.dtype() == DType::kF32)
    t.data_as<float>()[i] = v;
  else
    t.data_as<bf16>()[i] = bf16(v);
}

bool InVocab(int64_t id, int64_t vocab) { return id >= 0 && id < vocab; }

// Every id in [0, vocab): the ops index codebook or LM-head rows with them.
Status CheckIdRange(const char* op, const TensorView& ids, int64_t vocab) {
  const int32_t* p = ids.data_as<const int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (!InVocab(p[i], vocab))
      return InvalidArgumentError("{}: ids[{}] = {} is outside [0, {})", op, i, p[i], vocab);
  return Status::Ok();
}

// out[j] = unary[r, j] + sum_q pred[prev, q] * proj[r, q] * succ[ids[r, j], q] (no pair term
// when prev is outside the vocabulary).
void RowScores(const SelectorDims& d, const TensorView& proj, const TensorView& pred,
               const TensorView& succ, const TensorView& ids, const TensorView& unary, int64_t r,
               int64_t prev, float* out) {
  const int64_t K = d.top_k, Rk = d.rank;
  const bool pair = InVocab(prev, d.vocab);
  std::vector<float> ap(static_cast<size_t>(Rk));
  if (pair) {
    const bf16* a = pred.data_as<const bf16>() + prev * Rk;
    for (int64_t q = 0; q < Rk; ++q) ap[q] = a[q].f() * ProjAt(proj, r * Rk + q);
  }
  for (int64_t j = 0; j < K; ++j) {
    float acc = 0.f;
    if (pair) {
      const int64_t id = ids.data_as<const int32_t>()[r * K + j];
      const bf16* b = succ.data_as<const bf16>() + id * Rk;
      for (int64_t q = 0; q < Rk; ++q) acc += ap[q] * b[q].f();
    }
    out[j] = unary.data_as<const float>()[r * K + j] + acc;
  }
}

}  // namespace

Status SelectorScoresForward(const TensorView& scores, const TensorView& proj,
                             const TensorView& pred, const TensorView& succ,
                             const TensorView& prev, const TensorView& ids,
                             const TensorView& unary, Stream) {
  SelectorDims d;
  RETURN_IF_ERROR(
      internal::CheckSelectorScoresForward(scores, proj, pred, succ, prev, ids, unary, &d));
  RETURN_IF_ERROR(CheckIdRange("SelectorScoresForward", ids, d.vocab));
  for (int64_t r = 0; r < d.rows; ++r)
    RowScores(d, proj, pred, succ, ids, unary, r, prev.data_as<const int32_t>()[r],
              scores.data_as<float>() + r * d.top_k);
  return Status::Ok();
}

Status SelectorLoss(const TensorView& loss, const TensorView& stats, const TensorView& dscores,
                    const TensorView& scores, const TensorView& ids, const TensorView& targets,
                    const TensorView& weights, float scale, Stream) {
  SelectorDims d;
  RETURN_IF_ERROR(
      internal::CheckSelectorLoss(loss, stats, dscores, scores, ids, targets, weights, &d));
  const SelectorShape shape{.rows = d.rows, .top_k = d.top_k};
  float* ds = dscores.data_as<float>();
  const SelectorLossResult res = dflash2::SelectorLoss<float>(
      shape, scores.data_as<const float>(), ids.data_as<const int32_t>(),
      targets.data_as<const int32_t>(), weights.data_as<const float>(), ds);
  for (int64_t i = 0; i < d.rows * d.top_k; ++i) ds[i] *= scale;
  loss.data_as<float>()[0] = static_cast<float>(res.loss);
  stats.data_as<int32_t>()[0] = static_cast<int32_t>(res.covered);
  stats.data_as<int32_t>()[1] = static_cast<int32_t>(res.correct);
  return Status::Ok();
}

Status SelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                              const TensorView& dsucc, const TensorView& dscores,
                              const TensorView& proj, const TensorView& pred,
                              const TensorView& succ, const TensorView& prev,
                              const TensorView& ids, Stream) {
  SelectorDims d;
  RETURN_IF_ERROR(internal::CheckSelectorScoresBackward(dproj, dpred, dsucc, dscores, proj, pred,
                                                        succ, prev, ids, &d));
  RETURN_IF_ERROR(CheckIdRange("SelectorScoresBackward", ids, d.vocab));
  const int64_t K = d.top_k, Rk = d.rank;
  const int32_t* id = ids.data_as<const int32_t>();
  const float* g = dscores.data_as<const float>();
  float* dp = dpred.data_as<float>();
  float* dsu = dsucc.data_as<float>();
  std::vector<float> sum(static_cast<size_t>(Rk)), ap(static_cast<size_t>(Rk));
  for (int64_t r = 0; r < d.rows; ++r) {
    const int64_t pv = prev.data_as<const int32_t>()[r];
    if (!InVocab(pv, d.vocab)) {
      for (int64_t q = 0; q < Rk; ++q) StoreProj(dproj, r * Rk + q, 0.f);
      continue;
    }
    const bf16* a = pred.data_as<const bf16>() + pv * Rk;
    std::fill(sum.begin(), sum.end(), 0.f);
    for (int64_t q = 0; q < Rk; ++q) ap[q] = a[q].f() * ProjAt(proj, r * Rk + q);
    for (int64_t j = 0; j < K; ++j) {
      const float gj = g[r * K + j];
      const bf16* b = succ.data_as<const bf16>() + int64_t{id[r * K + j]} * Rk;
      float* db = dsu + int64_t{id[r * K + j]} * Rk;
      for (int64_t q = 0; q < Rk; ++q) {
        sum[q] += gj * b[q].f();
        db[q] += gj * ap[q];
      }
    }
    for (int64_t q = 0; q < Rk; ++q) {
      StoreProj(dproj, r * Rk + q, a[q].f() * sum[q]);
      dp[pv * Rk + q] += ProjAt(proj, r * Rk + q) * sum[q];
    }
  }
  return Status::Ok();
}

Status CandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                             const TensorView& values, const TensorView& ids,
                             const TensorView& lm_head, float multiplier, float softcap,
                             Stream) {
  SelectorDims d;
  RETURN_IF_ERROR(internal::CheckCandidateHeadBackward(dhidden, dunary, values, ids, lm_head,
                                                       multiplier, softcap, &d));
  RETURN_IF_ERROR(CheckIdRange("CandidateHeadBackward", ids, d.vocab));
  const int64_t K = d.top_k, H = d.hidden;
  std::vector<float> acc(static_cast<size_t>(H));
  bf16* dh = dhidden.data_as<bf16>();
  for (int64_t r = 0; r < d.rows; ++r) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t j = 0; j < K; ++j) {
      const float v = values.data_as<const float>()[r * K + j];
      const float slope = softcap > 0.f ? multiplier * (1.f - (v / softcap) * (v / softcap))
                                        : multiplier;
      const float c = dunary.data_as<const float>()[r * K + j] * slope;
      if (c == 0.f) continue;
      const int64_t id = ids.data_as<const int32_t>()[r * K + j];
      const bf16* w = lm_head.data_as<const bf16>() + id * H;
      for (int64_t h = 0; h < H; ++h) acc[h] += c * w[h].f();
    }
    for (int64_t h = 0; h < H; ++h) dh[r * H + h] = bf16(dh[r * H + h].f() + acc[h]);
  }
  return Status::Ok();
}

namespace {

// Both walks: choose(r, scores row) returns the slot taken at row r.
template <typename Choose>
void Walk(const SelectorDims& d, const TensorView& path, const TensorView& proj,
          const TensorView& pred, const TensorView& succ, const TensorView& ids,
          const TensorView& unary, const TensorView& anchors, int64_t block_rows,
          Choose choose) {
  std::vector<float> row(static_cast<size_t>(d.top_k));
  for (int64_t b = 0; b < d.blocks; ++b) {
    int64_t prev = anchors.data_as<const int32_t>()[b];
    for (int64_t i = 0; i < block_rows; ++i) {
      const int64_t r = b * block_rows + i;
      RowScores(d, proj, pred, succ, ids, unary, r, prev, row.data());
      prev = ids.data_as<const int32_t>()[r * d.top_k + choose(r, row.data())];
      path.data_as<int32_t>()[r] = static_cast<int32_t>(prev);
    }
  }
}

}  // namespace

Status SelectorGreedyWalk(const TensorView& path, const TensorView& proj, const TensorView& pred,
                          const TensorView& succ, const TensorView& ids, const TensorView& unary,
                          const TensorView& anchors, int64_t block_rows, Stream) {
  constexpr const char* kOp = "SelectorGreedyWalk";
  SelectorDims d;
  RETURN_IF_ERROR(internal::CheckSelectorWalk(kOp, path, TensorView(), proj, pred, succ, ids,
                                              unary, anchors, block_rows, &d));
  RETURN_IF_ERROR(CheckIdRange(kOp, ids, d.vocab));
  Walk(d, path, proj, pred, succ, ids, unary, anchors, block_rows,
       [&](int64_t, const float* s) {
         return std::max_element(s, s + d.top_k) - s;  // the first maximum
       });
  return Status::Ok();
}

Status SelectorSampleWalk(const TensorView& path, const TensorView& probs, const TensorView& proj,
                          const TensorView& pred, const TensorView& succ, const TensorView& ids,
                          const TensorView& unary, const TensorView& anchors, int64_t block_rows,
                          float temperature, uint64_t seed, uint64_t offset, Stream) {
  constexpr const char* kOp = "SelectorSampleWalk";
  SelectorDims d;
  if (probs.empty()) return InvalidArgumentError("{}: probs must be f32 [R, k]", kOp);
  RETURN_IF_ERROR(internal::CheckSelectorWalk(kOp, path, probs, proj, pred, succ, ids, unary,
                                              anchors, block_rows, &d));
  if (!(temperature > 0.f) || !std::isfinite(temperature))
    return InvalidArgumentError("{}: temperature must be finite and > 0, got {}", kOp,
                                temperature);
  RETURN_IF_ERROR(CheckIdRange(kOp, ids, d.vocab));
  const int64_t K = d.top_k;
  Walk(d, path, proj, pred, succ, ids, unary, anchors, block_rows,
       [&](int64_t r, const float* s) {
         float* q = probs.data_as<float>() + r * K;
         const float m = *std::max_element(s, s + K);
         float z = 0.f;
         for (int64_t j = 0; j < K; ++j) z += (q[j] = std::exp((s[j] - m) / temperature));
         int64_t last = 0;
         for (int64_t j = 0; j < K; ++j) {
           q[j] /= z;
           if (q[j] > 0.f) last = j;
         }
         const float u = PhiloxUniform(seed, offset, static_cast<uint64_t>(r));
         float cum = 0.f;
         for (int64_t j = 0; j < K; ++j)
           if (u < (cum += q[j])) return j;
         return last;
       });
  return Status::Ok();
}

}  // namespace cpu

Status SelectorScoresForward(const TensorView& scores, const TensorView& proj,
                             const TensorView& pred, const TensorView& succ,
                             const TensorView& prev, const TensorView& ids,
                             const TensorView& unary, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("SelectorScoresForward",
                                  {scores, proj, pred, succ, prev, ids, unary}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::SelectorScoresForward(scores, proj, pred, succ, prev, ids, unary, s);
#endif
  return cpu::SelectorScoresForward(scores, proj, pred, succ, prev, ids, unary, s);
}

Status SelectorLoss(const TensorView& loss, const TensorView& stats, const TensorView& dscores,
                    const TensorView& scores, const TensorView& ids, const TensorView& targets,
                    const TensorView& weights, float scale, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("SelectorLoss",
                                  {loss, stats, dscores, scores, ids, targets, weights}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda())
    return cuda::SelectorLoss(loss, stats, dscores, scores, ids, targets, weights, scale, s);
#endif
  return cpu::SelectorLoss(loss, stats, dscores, scores, ids, targets, weights, scale, s);
}

Status SelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                              const TensorView& dsucc, const TensorView& dscores,
                              const TensorView& proj, const TensorView& pred,
                              const TensorView& succ, const TensorView& prev,
                              const TensorView& ids, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("SelectorScoresBackward",
                                  {dproj, dpred, dsucc, dscores, proj, pred, succ, prev, ids}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda())
    return cuda::SelectorScoresBackward(dproj, dpred, dsucc, dscores, proj, pred, succ, prev, ids,
                                        s);
#endif
  return cpu::SelectorScoresBackward(dproj, dpred, dsucc, dscores, proj, pred, succ, prev, ids, s);
}

Status CandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                             const TensorView& values, const TensorView& ids,
                             const TensorView& lm_head, float multiplier, float softcap,
                             Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("CandidateHeadBackward", {dhidden, dunary, values, ids, lm_head}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda())
    return cuda::CandidateHeadBackward(dhidden, dunary, values, ids, lm_head, multiplier, softcap,
                                       s);
#endif
  return cpu::CandidateHeadBackward(dhidden, dunary, values, ids, lm_head, multiplier, softcap, s);
}

Status SelectorGreedyWalk(const TensorView& path, const TensorView& proj, const TensorView& pred,
                          const TensorView& succ, const TensorView& ids, const TensorView& unary,
                          const TensorView& anchors, int64_t block_rows, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("SelectorGreedyWalk",
                                  {path, proj, pred, succ, ids, unary, anchors}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda())
    return cuda::SelectorGreedyWalk(path, proj, pred, succ, ids, unary, anchors, block_rows, s);
#endif
  return cpu::SelectorGreedyWalk(path, proj, pred, succ, ids, unary, anchors, block_rows, s);
}

Status SelectorSampleWalk(const TensorView& path, const TensorView& probs, const TensorView& proj,
                          const TensorView& pred, const TensorView& succ, const TensorView& ids,
                          const TensorView& unary, const TensorView& anchors, int64_t block_rows,
                          float temperature, uint64_t seed, uint64_t offset, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("SelectorSampleWalk",
                                  {path, probs, proj, pred, succ, ids, unary, anchors}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda())
    return cuda::SelectorSampleWalk(path, probs, proj, pred, succ, ids, unary, anchors,
                                    block_rows, temperature, seed, offset, s);
#endif
  return cpu::SelectorSampleWalk(path, probs, proj, pred, succ, ids, unary, anchors, block_rows,
                                 temperature, seed, offset, s);
}

}  // namespace tandem::kernels::dflash2
