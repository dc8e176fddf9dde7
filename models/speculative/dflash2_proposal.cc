// DFlash2Proposer (dflash2_proposal.h): the LM head and selector projection GEMMs, RowTopK
// and the selector walks over the blocks' draft rows; the drafts (and q) back to the host.
#include "models/speculative/dflash2_proposal.h"

#include <algorithm>
#include <numeric>

#include "kernels/dflash2/row_topk.h"
#include "kernels/dflash2/selector.h"

namespace tandem::models {

using kernels::DType;
using kernels::TensorView;

Status CheckDFlash2ProposalLimits(const DFlashConfig& c, kernels::Device device) {
  if (!c.dflash2) return Status::Ok();
  const DFlash2Extension& e = *c.dflash2;
  const int64_t max_k = std::min(kernels::dflash2::kSelectorMaxTopK,
                                 kernels::dflash2::kLogitsTopKMax);
  if (e.selector_top_k < 1 || e.selector_top_k > max_k)
    return InvalidArgumentError("selector_top_k {}: the DFlash2 selector kernels take 1 .. {} "
                                "candidates per draft position", e.selector_top_k, max_k);
  if (e.selector_top_k > c.layers.vocab_size)
    return InvalidArgumentError("selector_top_k {} exceeds vocab_size {}", e.selector_top_k,
                                c.layers.vocab_size);
  if (e.selector_rank < 1)
    return InvalidArgumentError("selector_rank {} must be >= 1", e.selector_rank);
  if (device.is_cuda() && e.selector_rank > kernels::dflash2::kSelectorMaxRank)
    return InvalidArgumentError("selector_rank {} exceeds {}, the largest rank the CUDA "
                                "selector kernels take", e.selector_rank,
                                kernels::dflash2::kSelectorMaxRank);
  return Status::Ok();
}

uint64_t SampleOffset(const DrawKey& key) { return key.prompt << 32 | key.step; }

TokenDist SparseProposal(const int32_t* ids, const float* probs, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  TokenDist d;
  double sum = 0;
  for (int64_t j : order)
    if (probs[j] > 0) {
      d.ids.push_back(ids[j]);
      d.probs.push_back(probs[j]);
      sum += probs[j];
    }
  for (double& p : d.probs) p /= sum;
  return d;
}

int64_t DFlash2Proposer::WorkspaceBytes(const DFlashConfig& c, int64_t max_rows) {
  if (!c.dflash2) return 0;
  const int64_t k = c.dflash2->selector_top_k, rank = c.dflash2->selector_rank;
  const int64_t v = c.layers.vocab_size;
  // logits, ids, unary, probs, proj, path, anchors (one per row at most).
  return max_rows * (4 * v + 4 * k * 3 + 4 * rank + 4 + 4);
}

Result<std::unique_ptr<DFlash2Proposer>> DFlash2Proposer::Create(const DFlashConfig& c,
                                                                 int64_t max_rows,
                                                                 kernels::Allocator& alloc,
                                                                 kernels::Device device,
                                                                 kernels::Stream stream) {
  if (!c.dflash2) return InvalidArgumentError("DFlash2Proposer: not a DFlash2 config");
  if (max_rows < 1) return InvalidArgumentError("DFlash2Proposer: max_rows {} < 1", max_rows);
  RETURN_IF_ERROR(CheckDFlash2ProposalLimits(c, device));
  std::unique_ptr<DFlash2Proposer> p(new DFlash2Proposer());
  p->config_ = c;
  p->max_rows_ = max_rows;
  p->device_ = device;
  p->stream_ = stream;
  const int64_t k = c.dflash2->selector_top_k, rank = c.dflash2->selector_rank;
  auto make = [&](kernels::Tensor* t, DType dt, kernels::Shape shape) -> Status {
    ASSIGN_OR_RETURN(*t, kernels::Tensor::Empty(alloc, dt, shape, stream));
    p->bytes_ += t->nbytes();
    return Status::Ok();
  };
  RETURN_IF_ERROR(make(&p->logits_, DType::kF32, {max_rows, c.layers.vocab_size}));
  RETURN_IF_ERROR(make(&p->ids_, DType::kI32, {max_rows, k}));
  RETURN_IF_ERROR(make(&p->unary_, DType::kF32, {max_rows, k}));
  RETURN_IF_ERROR(make(&p->probs_, DType::kF32, {max_rows, k}));
  RETURN_IF_ERROR(make(&p->proj_, DType::kF32, {max_rows, rank}));
  RETURN_IF_ERROR(make(&p->path_, DType::kI32, {max_rows}));
  RETURN_IF_ERROR(make(&p->anchors_, DType::kI32, {max_rows}));
  return p;
}

Result<int64_t> DFlash2Proposer::Candidates(std::span<const DFlash2Block> blocks, int64_t n,
                                            const DFlash2ProposalWeights& w,
                                            kernels::GemmContext* gemm) {
  const int64_t rows = static_cast<int64_t>(blocks.size()) * n;
  kernels::GemmOptions linear;
  linear.trans_b = true;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const TensorView& h = blocks[b].hidden;
    if (h.ndim() != 2 || h.dim(0) != n || h.dim(1) != config_.layers.hidden_size)
      return InvalidArgumentError("DFlash2Proposer: block {} hidden is {}, expected [{}, {}]",
                                  b, h.ToString(), n, config_.layers.hidden_size);
    const int64_t r0 = static_cast<int64_t>(b) * n;
    RETURN_IF_ERROR(
        kernels::Gemm(gemm, h, w.lm_head, logits_.view().Narrow(0, r0, n), linear, stream_));
    RETURN_IF_ERROR(kernels::Gemm(gemm, h, w.hidden_projection, proj_.view().Narrow(0, r0, n),
                                  linear, stream_));
  }
  const DFlash2Extension& e = *config_.dflash2;
  RETURN_IF_ERROR(kernels::dflash2::RowTopK(
      ids_.view().Narrow(0, 0, rows), unary_.view().Narrow(0, 0, rows),
      logits_.view().Narrow(0, 0, rows), static_cast<float>(e.output_multiplier),
      static_cast<float>(e.final_logit_softcapping.value_or(0.0)), stream_));
  return rows;
}

Result<DFlash2Proposal> DFlash2Proposer::Propose(std::span<const DFlash2Block> blocks,
                                                 const DFlash2ProposalWeights& w,
                                                 float temperature,
                                                 kernels::GemmContext* gemm) {
  namespace k2 = kernels::dflash2;
  if (blocks.empty()) return DFlash2Proposal{};
  const int64_t n = blocks[0].hidden.ndim() == 2 ? blocks[0].hidden.dim(0) : 0;
  const int64_t nb = static_cast<int64_t>(blocks.size()), k = config_.dflash2->selector_top_k;
  if (n < 1 || nb * n > max_rows_)
    return InvalidArgumentError("DFlash2Proposer: {} blocks of {} rows; 1 .. {} rows fit", nb, n,
                                max_rows_);
  if (!(temperature >= 0.0f))
    return InvalidArgumentError("DFlash2Proposer: temperature {} < 0", temperature);
  ASSIGN_OR_RETURN(const int64_t rows, Candidates(blocks, n, w, gemm));
  std::vector<int32_t> anchors(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) anchors[b] = blocks[b].anchor;
  const TensorView dev_anchors = anchors_.view().Narrow(0, 0, nb);
  RETURN_IF_ERROR(kernels::CopyFromHost(dev_anchors, anchors.data(), stream_));
  const TensorView path = path_.view().Narrow(0, 0, rows), ids = ids_.view().Narrow(0, 0, rows);
  const TensorView unary = unary_.view().Narrow(0, 0, rows), proj = proj_.view().Narrow(0, 0, rows);
  const bool greedy = temperature == 0.0f;
  if (greedy) {
    RETURN_IF_ERROR(k2::SelectorGreedyWalk(path, proj, w.pred, w.succ, ids, unary, dev_anchors,
                                           n, stream_));
  } else {
    // One walk per block: its draws keyed by its own (seed, prompt, step), not by the batch.
    for (int64_t b = 0; b < nb; ++b) {
      const DrawKey& key = blocks[b].key;
      RETURN_IF_ERROR(k2::SelectorSampleWalk(
          path.Narrow(0, b * n, n), probs_.view().Narrow(0, b * n, n), proj.Narrow(0, b * n, n),
          w.pred, w.succ, ids.Narrow(0, b * n, n), unary.Narrow(0, b * n, n),
          dev_anchors.Narrow(0, b, 1), n, temperature, key.seed, SampleOffset(key), stream_));
    }
  }
  std::vector<int32_t> host_path(static_cast<size_t>(rows)), host_ids;
  std::vector<float> host_probs;
  RETURN_IF_ERROR(kernels::CopyToHost(host_path.data(), path, stream_));
  if (!greedy) {
    host_ids.resize(static_cast<size_t>(rows * k));
    host_probs.resize(static_cast<size_t>(rows * k));
    RETURN_IF_ERROR(kernels::CopyToHost(host_ids.data(), ids, stream_));
    RETURN_IF_ERROR(
        kernels::CopyToHost(host_probs.data(), probs_.view().Narrow(0, 0, rows), stream_));
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device_, stream_));
  DFlash2Proposal out;
  out.drafts.resize(static_cast<size_t>(nb));
  if (!greedy) out.q.resize(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = b * n + i;
      out.drafts[b].push_back(host_path[r]);
      if (!greedy) out.q[b].push_back(SparseProposal(&host_ids[r * k], &host_probs[r * k], k));
    }
  return out;
}

}  // namespace tandem::models
