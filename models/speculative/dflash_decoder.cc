#include "models/speculative/dflash_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include "kernels/core/stream.h"
#include "kernels/elementwise/row_argmax.h"
#include "models/speculative/spec_pick.h"

namespace tandem::models {

using kernels::DType;
using kernels::TensorView;

Status CheckDrafterFitsTarget(const DFlashConfig& d, const TransformerConfig& t) {
  return CheckDrafterFitsTarget(
      d, DecodeTargetShape{t.model_type, t.hidden_size, t.vocab_size, t.num_hidden_layers, {}});
}

Status CheckDrafterFitsTarget(const DFlashConfig& d, const DecodeTargetShape& t) {
  if (d.layers.hidden_size != t.hidden_size)
    return InvalidArgumentError("drafter hidden_size {} does not match the target's {}",
                                d.layers.hidden_size, t.hidden_size);
  if (d.layers.vocab_size != t.vocab_size)
    return InvalidArgumentError("drafter vocab_size {} does not match the target's {}",
                                d.layers.vocab_size, t.vocab_size);
  if (d.num_target_layers != t.num_hidden_layers)
    return InvalidArgumentError(
        "drafter num_target_layers {} does not match the target's num_hidden_layers {}",
        d.num_target_layers, t.num_hidden_layers);
  for (int64_t id : d.target_layer_ids)
    if (id < 0 || id >= t.num_hidden_layers)
      return InvalidArgumentError(
          "drafter target_layer_ids has {}, outside the target's layers [0, {})", id,
          t.num_hidden_layers);
  if (d.mask_token_id < 0 || d.mask_token_id >= t.vocab_size)
    return InvalidArgumentError("drafter mask_token_id {} is outside the target's vocab [0, {})",
                                d.mask_token_id, t.vocab_size);
  return Status::Ok();
}

Result<std::unique_ptr<DFlashDecoder>> DFlashDecoder::Create(Qwen3Target* target,
                                                             DFlashDrafter* drafter,
                                                             int64_t max_context,
                                                             kernels::Stream stream) {
  if (target == nullptr) return InvalidArgumentError("DFlashDecoder: no target");
  ASSIGN_OR_RETURN(std::unique_ptr<DecodeTarget> t, MakeDecodeTarget(target, max_context, stream));
  return Create(std::move(t), drafter, max_context, stream);
}

Result<std::unique_ptr<DFlashDecoder>> DFlashDecoder::Create(Qwen35Target* target,
                                                             DFlashDrafter* drafter,
                                                             int64_t max_context,
                                                             kernels::Stream stream) {
  if (target == nullptr) return InvalidArgumentError("DFlashDecoder: no target");
  const int64_t block = drafter != nullptr ? drafter->config().block_size : 1;
  ASSIGN_OR_RETURN(std::unique_ptr<DecodeTarget> t,
                   MakeDecodeTarget(target, max_context, block, stream));
  return Create(std::move(t), drafter, max_context, stream);
}

Result<std::unique_ptr<DFlashDecoder>> DFlashDecoder::Create(std::unique_ptr<DecodeTarget> target,
                                                             DFlashDrafter* drafter,
                                                             int64_t max_context,
                                                             kernels::Stream stream) {
  if (target == nullptr) return InvalidArgumentError("DFlashDecoder: no target");
  const DecodeTargetShape& tc = target->shape();
  if (target->capacity() < max_context)
    return InvalidArgumentError("DFlashDecoder: the target's cache holds {} tokens, below "
                                "max_context {}", target->capacity(), max_context);
  std::unique_ptr<DFlashDecoder> d(new DFlashDecoder());
  d->target_ = std::move(target);
  d->drafter_ = drafter;
  d->max_context_ = max_context;
  const kernels::Device dev = d->target_->device();
  const kernels::Stream s = stream;
  d->stream_ = stream;
  int64_t rows = 1;
  if (drafter != nullptr) {
    const DFlashConfig& dc = drafter->config();
    RETURN_IF_ERROR(CheckDrafterFitsTarget(dc, tc));
    if (!(drafter->device() == dev) || drafter->stream() != stream)
      return InvalidArgumentError("DFlashDecoder: the drafter and the target are on different "
                                  "devices or streams");
    if (drafter->options().num_blocks < 1 || drafter->options().max_tokens < max_context)
      return InvalidArgumentError(
          "DFlashDecoder: the drafter must have num_blocks >= 1 and max_tokens >= {} (has {}, "
          "{})", max_context, drafter->options().num_blocks, drafter->options().max_tokens);
    rows = dc.block_size;
    if (d->target_->max_rollback() < rows)
      return InvalidArgumentError("DFlashDecoder: the target rolls back blocks of up to {} "
                                  "tokens, below the drafter's block size {}",
                                  d->target_->max_rollback(), rows);
    for (int64_t id : dc.target_layer_ids) d->capture_layers_.push_back(static_cast<int>(id));
    if (dc.dflash2) {
      ASSIGN_OR_RETURN(d->proposer_, DFlash2Proposer::Create(dc, rows, d->target_->allocator(),
                                                            dev, stream));
    }
  }
  // The buffers come from where the target's weights came from.
  kernels::Allocator* alloc = &d->target_->allocator();
  if (dev.is_cuda()) {
#ifdef TANDEM_HAVE_CUDA
    kernels::DeviceGuard guard(dev.index);
    ASSIGN_OR_RETURN(d->gemm_, kernels::GemmContext::Create(dev.index));
#endif
  }
  for (size_t i = 0; i < d->capture_layers_.size(); ++i) {
    ASSIGN_OR_RETURN(kernels::Tensor f, kernels::Tensor::Empty(*alloc, DType::kBF16,
                                                               {max_context, tc.hidden_size}, s));
    d->features_.push_back(std::move(f));
  }
  ASSIGN_OR_RETURN(d->logits_,
                   kernels::Tensor::Empty(*alloc, DType::kF32, {rows, tc.vocab_size}, s));
  ASSIGN_OR_RETURN(d->picks_, kernels::Tensor::Empty(*alloc, DType::kI32, {rows}, s));
  return d;
}

Status DFlashDecoder::CheckRequest(std::span<const int32_t> prompt,
                                   const SpecDecodeOptions& o) const {
  const int64_t p = static_cast<int64_t>(prompt.size());
  const int64_t max_b = drafter_ != nullptr ? drafter_->config().block_size : 1;
  if (o.block_size < 1 || o.block_size > max_b)
    return InvalidArgumentError("block_size {} not in [1, {}]{}", o.block_size, max_b,
                                drafter_ == nullptr ? " (no drafter)" : " (the drafter's block)");
  if (o.max_new_tokens < 1)
    return InvalidArgumentError("max_new_tokens must be positive, got {}", o.max_new_tokens);
  RETURN_IF_ERROR(CheckSamplingParams(o.sampling()));
  if (p < 1) return InvalidArgumentError("empty prompt");
  if (p + o.max_new_tokens + o.block_size > max_context_)
    return InvalidArgumentError(
        "prompt of {} tokens + max_new_tokens {} + block {} exceed the context limit {}", p,
        o.max_new_tokens, o.block_size, max_context_);
  if (p > target_->max_tokens())
    return InvalidArgumentError("prompt of {} tokens exceeds the target's max_tokens {}", p,
                                target_->max_tokens());
  const int64_t v = target_->shape().vocab_size;
  for (int64_t i = 0; i < p; ++i)
    if (prompt[i] < 0 || prompt[i] >= v)
      return InvalidArgumentError("prompt token {} is id {}, not in [0, {})", i, prompt[i], v);
  return Status::Ok();
}

Result<TensorView> DFlashDecoder::TargetStep(std::span<const int32_t> tokens, int64_t picks) {
  const int64_t n = static_cast<int64_t>(tokens.size()), t0 = target_->length();
  std::vector<LayerCapture> caps;
  for (size_t i = 0; i < capture_layers_.size(); ++i)
    caps.push_back({capture_layers_[i], features_[i].view().Narrow(0, t0, n)});
  // Only the last `picks` rows need logits: the rows before them go in without.
  if (n > picks) {
    std::vector<LayerCapture> head = caps;
    for (LayerCapture& c : head) c.out = c.out.Narrow(0, 0, n - picks);
    RETURN_IF_ERROR(target_->Extend(tokens.first(n - picks), head, {}));
    for (LayerCapture& c : caps) c.out = c.out.Narrow(0, n - picks, picks);
  }
  const TensorView logits = logits_.view().Narrow(0, 0, picks);
  RETURN_IF_ERROR(target_->Extend(tokens.last(picks), caps, logits));
  return logits;
}

Result<std::vector<int32_t>> DFlashDecoder::Greedy(const TensorView& logits) {
  const int64_t rows = logits.dim(0);
  std::vector<int32_t> out(static_cast<size_t>(rows));
  const TensorView ids = picks_.view().Narrow(0, 0, rows);
  RETURN_IF_ERROR(kernels::RowArgmax(ids, logits, stream_));
  RETURN_IF_ERROR(kernels::CopyToHost(out.data(), ids, stream_));
  RETURN_IF_ERROR(kernels::SynchronizeStream(target_->device(), stream_));
  return out;
}

Result<std::vector<TokenDist>> DFlashDecoder::Dists(const TensorView& logits,
                                                    const SamplingParams& p) {
  return reader_.Read(logits, p, target_->allocator(), target_->device(), stream_);
}

Status DFlashDecoder::DrafterForward(int32_t last_token) {
  const DFlashConfig& c = drafter_->config();
  const int64_t t = target_->length(), bs = c.block_size;
  DFlashBlockPlan plan;
  // Block 0 drafts; any further blocks (kDrafterBlocks on CUDA) are padding: anchor 0, an
  // empty context, no loss weight.
  const int64_t nb = drafter_->options().num_blocks;
  plan.num_blocks = nb;
  plan.block_size = bs;
  plan.tokens = t;
  plan.anchors.assign(nb, 0);
  plan.anchors[0] = static_cast<int32_t>(t);
  plan.doc_start.assign(nb, 0);
  plan.block_ids.assign(nb * bs, static_cast<int32_t>(c.mask_token_id));
  plan.block_ids[0] = last_token;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t j = 0; j < bs; ++j)
      plan.block_pos.push_back(static_cast<int32_t>((b == 0 ? t : 0) + j));
  plan.targets.assign(nb * bs, -1);
  plan.weights.assign(nb * bs, 0.0f);
  for (int64_t i = 0; i < t; ++i) plan.ctx_pos.push_back(static_cast<int32_t>(i));
  RETURN_IF_ERROR(drafter_->SetPlan(plan));
  std::vector<TensorView> ctx;
  for (const kernels::Tensor& f : features_) ctx.push_back(f.view().Narrow(0, 0, t));
  const DFlashTargetHead head{target_->embed(), target_->lm_head()};
  return drafter_->ForwardBackward(head, ctx, 0.0f, 0, 0, /*backward=*/false);
}

Result<TensorView> DFlashDecoder::Draft(int32_t last_token, int64_t n) {
  RETURN_IF_ERROR(DrafterForward(last_token));
  kernels::GemmOptions linear;
  linear.trans_b = true;
  const TensorView logits = logits_.view().Narrow(0, 0, n);
  RETURN_IF_ERROR(kernels::Gemm(gemm_.get(), drafter_->final_hidden().Narrow(0, 1, n),
                                target_->lm_head(), logits, linear, stream_));
  return logits;
}

Result<std::vector<int32_t>> DFlashDecoder::ProposeDFlash2(int32_t last_token, int64_t n,
                                                           const SpecDecodeOptions& o,
                                                           const DrawKey& key,
                                                           std::vector<TokenDist>* q) {
  RETURN_IF_ERROR(DrafterForward(last_token));
  const DFlashParamViews& w = drafter_->params().w;
  const DFlash2ProposalWeights weights{target_->lm_head(), w.sel_proj, w.sel_pred, w.sel_succ};
  const bool sample = o.temperature > 0.0f && o.sample_drafts;
  const DFlash2Block block{drafter_->final_hidden().Narrow(0, 1, n), last_token, key};
  ASSIGN_OR_RETURN(DFlash2Proposal p,
                   proposer_->Propose({&block, 1}, weights, sample ? o.temperature : 0.0f,
                                      gemm_.get()));
  if (sample)
    *q = std::move(p.q[0]);
  else if (o.temperature > 0.0f)
    *q = OneHot(p.drafts[0]);
  return std::move(p.drafts[0]);
}

Result<SpecDecodeResult> DFlashDecoder::Generate(std::span<const int32_t> prompt,
                                                 const SpecDecodeOptions& o) {
  RETURN_IF_ERROR(CheckRequest(prompt, o));
  const auto start = std::chrono::steady_clock::now();
  std::optional<kernels::DeviceGuard> guard;
  if (target_->device().is_cuda()) guard.emplace(target_->device().index);
  RETURN_IF_ERROR(target_->Reset());
  SpecDecodeResult r;
  r.prefill_tokens = static_cast<int64_t>(prompt.size());
  auto stop = [&](int32_t tok) {
    return std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), tok) !=
           o.stop_token_ids.end();
  };
  const SamplingParams sp = o.sampling();
  const bool greedy = sp.temperature == 0.0f;
  DrawKey key{o.seed, o.prompt_index, 0};
  ASSIGN_OR_RETURN(TensorView prefill, TargetStep(prompt, 1));
  if (greedy) {
    ASSIGN_OR_RETURN(std::vector<int32_t> first, Greedy(prefill));
    r.tokens.push_back(first[0]);
  } else {
    ASSIGN_OR_RETURN(std::vector<TokenDist> first, Dists(prefill, sp));
    r.tokens.push_back(SampleDist(first[0], KeyedUniform(key, 0, DrawKind::kRedraw)));
  }
  bool done = stop(r.tokens.back());
  while (!done && static_cast<int64_t>(r.tokens.size()) < o.max_new_tokens) {
    // Invariant: the cache holds the prompt and every generated token but the last one.
    ++key.step;
    const int32_t last = r.tokens.back();
    std::vector<int32_t> block = {last};
    std::vector<TokenDist> q;  // sampling: the drafter's distributions of slots 1 ..
    if (o.block_size > 1 && proposer_ != nullptr) {
      ASSIGN_OR_RETURN(std::vector<int32_t> drafts,
                       ProposeDFlash2(last, o.block_size - 1, o, key, &q));
      block.insert(block.end(), drafts.begin(), drafts.end());
    } else if (o.block_size > 1) {
      ASSIGN_OR_RETURN(TensorView draft_logits, Draft(last, o.block_size - 1));
      if (greedy || !o.sample_drafts) {
        ASSIGN_OR_RETURN(std::vector<int32_t> drafts, Greedy(draft_logits));
        block.insert(block.end(), drafts.begin(), drafts.end());
        if (!greedy) q = OneHot(drafts);
      } else {
        ASSIGN_OR_RETURN(q, Dists(draft_logits, sp));
        for (size_t i = 0; i < q.size(); ++i)
          block.push_back(SampleDist(
              q[i], KeyedUniform(key, static_cast<uint32_t>(i + 1), DrawKind::kPropose)));
      }
    }
    const int64_t base = target_->length();
    ASSIGN_OR_RETURN(TensorView verify, TargetStep(block, static_cast<int64_t>(block.size())));
    SampledVerify v;
    if (greedy) {
      ASSIGN_OR_RETURN(std::vector<int32_t> post, Greedy(verify));
      while (v.accepted + 1 < static_cast<int64_t>(block.size()) &&
             block[v.accepted + 1] == post[v.accepted])
        ++v.accepted;
      v.next = post[v.accepted];
    } else {
      ASSIGN_OR_RETURN(std::vector<TokenDist> p, Dists(verify, sp));
      v = VerifyBySampling(q, p, std::span<const int32_t>(block).subspan(1), key);
    }
    const int64_t acc = v.accepted;
    RETURN_IF_ERROR(target_->Crop(base + acc + 1));
    r.accept_lengths.push_back(static_cast<int32_t>(acc + 1));
    for (int64_t j = 1; j <= acc + 1 && !done; ++j) {
      const int32_t tok = j <= acc ? block[j] : v.next;
      r.tokens.push_back(tok);
      done = stop(tok) || static_cast<int64_t>(r.tokens.size()) >= o.max_new_tokens;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tandem::models
