// Argument checks of the selector ops (selector.h), shared by the CPU and CUDA versions.
#include "kernels/dflash2/selector.h"

namespace tandem::kernels::dflash2::internal {
namespace {

// t: `dtype`, contiguous, `shape`, on ref's device.
Status ExpectTensor(const char* op, const char* what, const TensorView& t, DType dtype,
                    const Shape& shape, const TensorView& ref) {
  RETURN_IF_ERROR(ExpectDType(op, what, t, dtype));
  RETURN_IF_ERROR(ExpectShape(op, what, t, shape));
  RETURN_IF_ERROR(ExpectContiguous(op, what, t));
  return ExpectSameDevice(op, t, ref);
}

// proj-like: f32 or bf16, contiguous, [rows, rank], on ref's device.
Status ExpectProj(const char* op, const char* what, const TensorView& t, int64_t rows,
                  int64_t rank, const TensorView& ref) {
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16)
    return InvalidArgumentError("{}: {} must be f32 or bf16, got {}", op, what, t.ToString());
  return ExpectTensor(op, what, t, t.dtype(), {rows, rank}, ref);
}

// ids: i32 [R, k] with 1 <= k <= kSelectorMaxTopK; sets rows and top_k.
Status CheckIds(const char* op, const TensorView& ids, SelectorDims* d) {
  RETURN_IF_ERROR(ExpectDType(op, "ids", ids, DType::kI32));
  RETURN_IF_ERROR(ExpectContiguous(op, "ids", ids));
  if (ids.ndim() != 2 || ids.dim(1) < 1 || ids.dim(1) > kSelectorMaxTopK)
    return InvalidArgumentError("{}: ids must be i32 [R, k] with 1 <= k <= {}, got {}", op,
                                kSelectorMaxTopK, ids.ToString());
  d->rows = ids.dim(0);
  d->top_k = ids.dim(1);
  return Status::Ok();
}

// pred and succ: bf16 [V, Rk], V, Rk >= 1; sets vocab and rank.
Status CheckCodebooks(const char* op, const TensorView& pred, const TensorView& succ,
                      const TensorView& ref, SelectorDims* d) {
  RETURN_IF_ERROR(ExpectDType(op, "pred", pred, DType::kBF16));
  if (pred.ndim() != 2 || pred.dim(0) < 1 || pred.dim(1) < 1)
    return InvalidArgumentError("{}: pred must be bf16 [V, Rk] with V, Rk >= 1, got {}", op,
                                pred.ToString());
  d->vocab = pred.dim(0);
  d->rank = pred.dim(1);
  RETURN_IF_ERROR(ExpectTensor(op, "pred", pred, DType::kBF16, {d->vocab, d->rank}, ref));
  return ExpectTensor(op, "succ", succ, DType::kBF16, {d->vocab, d->rank}, ref);
}

}  // namespace

Status CheckSelectorScoresForward(const TensorView& scores, const TensorView& proj,
                                  const TensorView& pred, const TensorView& succ,
                                  const TensorView& prev, const TensorView& ids,
                                  const TensorView& unary, SelectorDims* d) {
  constexpr const char* kOp = "SelectorScoresForward";
  RETURN_IF_ERROR(CheckIds(kOp, ids, d));
  RETURN_IF_ERROR(CheckCodebooks(kOp, pred, succ, ids, d));
  const Shape rk{d->rows, d->top_k};
  RETURN_IF_ERROR(ExpectTensor(kOp, "scores", scores, DType::kF32, rk, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "unary", unary, DType::kF32, rk, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "prev", prev, DType::kI32, {d->rows}, ids));
  return ExpectProj(kOp, "proj", proj, d->rows, d->rank, ids);
}

Status CheckSelectorLoss(const TensorView& loss, const TensorView& stats,
                         const TensorView& dscores, const TensorView& scores,
                         const TensorView& ids, const TensorView& targets,
                         const TensorView& weights, SelectorDims* d) {
  constexpr const char* kOp = "SelectorLoss";
  RETURN_IF_ERROR(CheckIds(kOp, ids, d));
  const Shape rk{d->rows, d->top_k};
  RETURN_IF_ERROR(ExpectTensor(kOp, "scores", scores, DType::kF32, rk, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "dscores", dscores, DType::kF32, rk, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "targets", targets, DType::kI32, {d->rows}, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "weights", weights, DType::kF32, {d->rows}, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "loss", loss, DType::kF32, {1}, ids));
  return ExpectTensor(kOp, "stats", stats, DType::kI32, {2}, ids);
}

Status CheckSelectorScoresBackward(const TensorView& dproj, const TensorView& dpred,
                                   const TensorView& dsucc, const TensorView& dscores,
                                   const TensorView& proj, const TensorView& pred,
                                   const TensorView& succ, const TensorView& prev,
                                   const TensorView& ids, SelectorDims* d) {
  constexpr const char* kOp = "SelectorScoresBackward";
  RETURN_IF_ERROR(CheckIds(kOp, ids, d));
  RETURN_IF_ERROR(CheckCodebooks(kOp, pred, succ, ids, d));
  RETURN_IF_ERROR(ExpectTensor(kOp, "dscores", dscores, DType::kF32, {d->rows, d->top_k}, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "prev", prev, DType::kI32, {d->rows}, ids));
  RETURN_IF_ERROR(ExpectProj(kOp, "proj", proj, d->rows, d->rank, ids));
  RETURN_IF_ERROR(ExpectProj(kOp, "dproj", dproj, d->rows, d->rank, ids));
  const Shape vr{d->vocab, d->rank};
  RETURN_IF_ERROR(ExpectTensor(kOp, "dpred", dpred, DType::kF32, vr, ids));
  return ExpectTensor(kOp, "dsucc", dsucc, DType::kF32, vr, ids);
}

Status CheckCandidateHeadBackward(const TensorView& dhidden, const TensorView& dunary,
                                  const TensorView& values, const TensorView& ids,
                                  const TensorView& lm_head, float multiplier, float softcap,
                                  SelectorDims* d) {
  constexpr const char* kOp = "CandidateHeadBackward";
  RETURN_IF_ERROR(CheckIds(kOp, ids, d));
  RETURN_IF_ERROR(ExpectDType(kOp, "lm_head", lm_head, DType::kBF16));
  if (lm_head.ndim() != 2 || lm_head.dim(0) < 1 || lm_head.dim(1) < 1)
    return InvalidArgumentError("{}: lm_head must be bf16 [V, H], got {}", kOp,
                                lm_head.ToString());
  d->vocab = lm_head.dim(0);
  d->hidden = lm_head.dim(1);
  RETURN_IF_ERROR(ExpectTensor(kOp, "lm_head", lm_head, DType::kBF16, {d->vocab, d->hidden}, ids));
  const Shape rk{d->rows, d->top_k};
  RETURN_IF_ERROR(ExpectTensor(kOp, "dunary", dunary, DType::kF32, rk, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "values", values, DType::kF32, rk, ids));
  RETURN_IF_ERROR(ExpectTensor(kOp, "dhidden", dhidden, DType::kBF16, {d->rows, d->hidden}, ids));
  if (!(multiplier > 0.f) || !(softcap >= 0.f))
    return InvalidArgumentError("{}: need multiplier > 0 and softcap >= 0, got {} and {}", kOp,
                                multiplier, softcap);
  return Status::Ok();
}

Status CheckSelectorWalk(const char* op, const TensorView& path, const TensorView& probs,
                         const TensorView& proj, const TensorView& pred, const TensorView& succ,
                         const TensorView& ids, const TensorView& unary,
                         const TensorView& anchors, int64_t block_rows, SelectorDims* d) {
  RETURN_IF_ERROR(CheckIds(op, ids, d));
  RETURN_IF_ERROR(CheckCodebooks(op, pred, succ, ids, d));
  const Shape rk{d->rows, d->top_k};
  RETURN_IF_ERROR(ExpectTensor(op, "unary", unary, DType::kF32, rk, ids));
  if (!probs.empty()) RETURN_IF_ERROR(ExpectTensor(op, "probs", probs, DType::kF32, rk, ids));
  RETURN_IF_ERROR(ExpectTensor(op, "path", path, DType::kI32, {d->rows}, ids));
  RETURN_IF_ERROR(ExpectProj(op, "proj", proj, d->rows, d->rank, ids));
  if (block_rows < 1 || d->rows % block_rows != 0)
    return InvalidArgumentError("{}: block_rows = {} must be >= 1 and divide R = {}", op,
                                block_rows, d->rows);
  d->blocks = d->rows / block_rows;
  return ExpectTensor(op, "anchors", anchors, DType::kI32, {d->blocks}, ids);
}

}  // namespace tandem::kernels::dflash2::internal
