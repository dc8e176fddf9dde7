#include "models/speculative/dflash_batch_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "kernels/core/stream.h"
#include "models/speculative/spec_pick.h"

namespace tandem::models {

using kernels::DType;
using kernels::TensorView;
using Clock = std::chrono::steady_clock;

int64_t DrafterBlocksForBatch(int64_t batch, kernels::Device device) {
  if (!device.is_cuda()) return batch;
  return (batch + kDrafterBlocksCuda - 1) / kDrafterBlocksCuda * kDrafterBlocksCuda;
}

// One sequence in flight.
struct DFlashBatchDecoder::Slot {
  int64_t prompt = -1;  // index into the prompts, -1: free
  SpecDecodeResult result;
  DrawKey key;  // sampling: (seed, prompt index, step)
  Clock::time_point start;
};

Result<std::unique_ptr<DFlashBatchDecoder>> DFlashBatchDecoder::Create(
    Qwen3Target* target, DFlashDrafter* drafter, int64_t batch, int64_t max_context,
    kernels::Stream stream) {
  if (target == nullptr) return InvalidArgumentError("DFlashBatchDecoder: no target");
  if (batch < 1) return InvalidArgumentError("DFlashBatchDecoder: batch {} < 1", batch);
  const TransformerConfig& tc = target->config();
  std::unique_ptr<DFlashBatchDecoder> d(new DFlashBatchDecoder());
  d->target_ = target;
  d->drafter_ = drafter;
  d->max_context_ = max_context;
  d->stream_ = stream;
  const kernels::Device dev = target->device();
  int64_t block = 1;
  if (drafter != nullptr) {
    const DFlashConfig& dc = drafter->config();
    RETURN_IF_ERROR(CheckDrafterFitsTarget(dc, tc));
    if (!(drafter->device() == dev) || drafter->stream() != stream)
      return InvalidArgumentError("DFlashBatchDecoder: the drafter and the target are on "
                                  "different devices or streams");
    if (drafter->options().num_blocks < batch ||
        drafter->options().max_tokens < batch * max_context)
      return InvalidArgumentError(
          "DFlashBatchDecoder: batch {} needs a drafter with num_blocks >= {} and max_tokens "
          ">= {} (has {}, {})", batch, batch, batch * max_context,
          drafter->options().num_blocks, drafter->options().max_tokens);
    block = dc.block_size;
    for (int64_t id : dc.target_layer_ids) d->capture_layers_.push_back(static_cast<int>(id));
    if (dc.dflash2) {
      ASSIGN_OR_RETURN(d->proposer_,
                       DFlash2Proposer::Create(dc, batch * block, target->weights().allocator(),
                                               dev, stream));
    }
  }
  // The caches and buffers come from where the target's weights came from.
  kernels::Allocator* alloc = &target->weights().allocator();
  ASSIGN_OR_RETURN(d->cache_, Qwen3BatchKvCache::Create(tc, batch, max_context, *alloc, stream));
  if (dev.is_cuda()) {
#ifdef TANDEM_HAVE_CUDA
    kernels::DeviceGuard guard(dev.index);
    ASSIGN_OR_RETURN(d->gemm_, kernels::GemmContext::Create(dev.index));
#endif
  }
  const int64_t h = tc.hidden_size;
  for (size_t i = 0; i < d->capture_layers_.size(); ++i) {
    for (auto* list : {&d->features_, &d->packed_}) {
      ASSIGN_OR_RETURN(kernels::Tensor f, kernels::Tensor::Empty(*alloc, DType::kBF16,
                                                                 {batch * max_context, h}, stream));
      list->push_back(std::move(f));
    }
    ASSIGN_OR_RETURN(kernels::Tensor c,
                     kernels::Tensor::Empty(*alloc, DType::kBF16, {batch * block, h}, stream));
    d->captured_.push_back(std::move(c));
  }
  ASSIGN_OR_RETURN(d->logits_, kernels::Tensor::Empty(*alloc, DType::kF32,
                                                      {batch * block, tc.vocab_size}, stream));
  return d;
}

Status DFlashBatchDecoder::CheckRequest(std::span<const std::vector<int32_t>> prompts,
                                        const SpecDecodeOptions& o) const {
  const int64_t max_b = drafter_ != nullptr ? drafter_->config().block_size : 1;
  if (o.block_size < 1 || o.block_size > max_b)
    return InvalidArgumentError("block_size {} not in [1, {}]{}", o.block_size, max_b,
                                drafter_ == nullptr ? " (no drafter)" : " (the drafter's block)");
  if (o.max_new_tokens < 1)
    return InvalidArgumentError("max_new_tokens must be positive, got {}", o.max_new_tokens);
  RETURN_IF_ERROR(CheckSamplingParams(o.sampling()));
  const int64_t rows = std::min<int64_t>(batch(), static_cast<int64_t>(prompts.size()));
  if (rows * o.block_size > target_->max_tokens())
    return InvalidArgumentError("batch {} x block {} rows exceed the target's max_tokens {}",
                                rows, o.block_size, target_->max_tokens());
  const int64_t v = target_->config().vocab_size;
  for (size_t k = 0; k < prompts.size(); ++k) {
    const int64_t p = static_cast<int64_t>(prompts[k].size());
    Status st = Status::Ok();
    if (p < 1)
      st = InvalidArgumentError("empty prompt");
    else if (p + o.max_new_tokens + o.block_size > max_context_)
      st = InvalidArgumentError(
          "prompt of {} tokens + max_new_tokens {} + block {} exceed the context limit {}", p,
          o.max_new_tokens, o.block_size, max_context_);
    else if (p > target_->max_tokens())
      st = InvalidArgumentError("prompt of {} tokens exceeds the target's max_tokens {}", p,
                                target_->max_tokens());
    for (int64_t i = 0; st.ok() && i < p; ++i)
      if (prompts[k][i] < 0 || prompts[k][i] >= v)
        st = InvalidArgumentError("prompt token {} is id {}, not in [0, {})", i, prompts[k][i],
                                  v);
    if (!st.ok()) return st.WithContext(fmt::format("prompt {}", k));
  }
  return Status::Ok();
}

Result<int32_t> DFlashBatchDecoder::Prefill(int64_t s, std::span<const int32_t> prompt,
                                            const SamplingParams& sp, const DrawKey& key) {
  Qwen3KvCache& cache = cache_.sequence(s);
  RETURN_IF_ERROR(cache.Crop(0));
  const int64_t n = static_cast<int64_t>(prompt.size()), row0 = s * max_context_;
  const int64_t v = target_->config().vocab_size;
  std::vector<LayerCapture> caps;
  for (size_t i = 0; i < capture_layers_.size(); ++i)
    caps.push_back({capture_layers_[i], features_[i].view().Narrow(0, row0, n)});
  // Only the last row needs logits (as DFlashDecoder::TargetStep).
  if (n > 1) {
    std::vector<LayerCapture> head = caps;
    for (LayerCapture& c : head) c.out = c.out.Narrow(0, 0, n - 1);
    RETURN_IF_ERROR(target_->Extend(cache, prompt.first(n - 1), head));
    for (LayerCapture& c : caps) c.out = c.out.Narrow(0, n - 1, 1);
  }
  const TensorView logits = logits_.view().Narrow(0, 0, 1);
  RETURN_IF_ERROR(target_->Extend(cache, prompt.last(1), caps, logits));
  host_logits_.resize(static_cast<size_t>(v));
  RETURN_IF_ERROR(kernels::CopyToHost(host_logits_.data(), logits, stream_));
  RETURN_IF_ERROR(kernels::SynchronizeStream(target_->device(), stream_));
  if (sp.temperature == 0.0f) return ArgmaxRows(host_logits_.data(), 1, v)[0];
  return SampleDist(FilterLogits(host_logits_.data(), v, sp),
                    KeyedUniform(key, 0, DrawKind::kRedraw));
}

Result<std::vector<std::vector<int32_t>>> DFlashBatchDecoder::Draft(
    std::span<const int64_t> live, std::span<const int32_t> last, int64_t n,
    const SamplingParams& sp, bool sample_drafts, std::span<const DrawKey> keys,
    std::vector<std::vector<TokenDist>>* q) {
  const DFlashConfig& c = drafter_->config();
  const int64_t bs = c.block_size, v = c.layers.vocab_size, nb = drafter_->options().num_blocks;
  const int64_t live_n = static_cast<int64_t>(live.size());
  DFlashBlockPlan plan;
  plan.num_blocks = nb;
  plan.block_size = bs;
  plan.anchors.assign(nb, 0);  // blocks past the live ones are padding: an empty context
  plan.doc_start.assign(nb, 0);
  plan.block_ids.assign(nb * bs, static_cast<int32_t>(c.mask_token_id));
  plan.targets.assign(nb * bs, -1);
  plan.weights.assign(nb * bs, 0.0f);
  plan.block_pos.assign(nb * bs, 0);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t j = 0; j < bs; ++j) plan.block_pos[b * bs + j] = static_cast<int32_t>(j);
  int64_t offset = 0;
  for (int64_t b = 0; b < live_n; ++b) {
    const int64_t s = live[b], t = cache_.sequence(s).length();
    for (size_t l = 0; l < features_.size(); ++l)
      RETURN_IF_ERROR(kernels::Copy(packed_[l].view().Narrow(0, offset, t),
                                    features_[l].view().Narrow(0, s * max_context_, t), stream_));
    plan.doc_start[b] = static_cast<int32_t>(offset);
    plan.anchors[b] = static_cast<int32_t>(offset + t);
    plan.block_ids[b * bs] = last[b];
    for (int64_t j = 0; j < bs; ++j) plan.block_pos[b * bs + j] = static_cast<int32_t>(t + j);
    for (int64_t i = 0; i < t; ++i) plan.ctx_pos.push_back(static_cast<int32_t>(i));
    offset += t;
  }
  plan.tokens = offset;
  RETURN_IF_ERROR(drafter_->SetPlan(plan));
  std::vector<TensorView> ctx;
  for (const kernels::Tensor& f : packed_) ctx.push_back(f.view().Narrow(0, 0, offset));
  const DFlashTargetHead head{target_->weights().embed(), target_->weights().lm_head()};
  RETURN_IF_ERROR(drafter_->ForwardBackward(head, ctx, 0.0f, 0, 0, /*backward=*/false));
  if (proposer_ != nullptr) return ProposeDFlash2(last, n, sp, sample_drafts, keys, q);
  // One LM-head GEMM over every live block's rows (slot 0's row is computed and unused).
  kernels::GemmOptions linear;
  linear.trans_b = true;
  const TensorView logits = logits_.view().Narrow(0, 0, live_n * bs);
  RETURN_IF_ERROR(kernels::Gemm(gemm_.get(), drafter_->final_hidden().Narrow(0, 0, live_n * bs),
                                head.lm_head, logits, linear, stream_));
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(live_n));
  q->assign(static_cast<size_t>(live_n), {});
  if (sp.temperature == 0.0f || !sample_drafts) {
    host_logits_.resize(static_cast<size_t>(live_n * bs * v));
    RETURN_IF_ERROR(kernels::CopyToHost(host_logits_.data(), logits, stream_));
    RETURN_IF_ERROR(kernels::SynchronizeStream(drafter_->device(), stream_));
    for (int64_t b = 0; b < live_n; ++b) {
      out[b] = ArgmaxRows(host_logits_.data() + (b * bs + 1) * v, n, v);
      if (sp.temperature > 0.0f) (*q)[b] = OneHot(out[b]);
    }
    return out;
  }
  // Every row of the blocks is read (slot 0's too): one RowTopK over them all.
  ASSIGN_OR_RETURN(
      std::vector<TokenDist> all,
      reader_.Read(logits, sp, target_->weights().allocator(), drafter_->device(), stream_));
  for (int64_t b = 0; b < live_n; ++b)
    for (int64_t i = 0; i < n; ++i) {
      (*q)[b].push_back(std::move(all[b * bs + 1 + i]));
      out[b].push_back(SampleDist(
          (*q)[b].back(), KeyedUniform(keys[b], static_cast<uint32_t>(i + 1), DrawKind::kPropose)));
    }
  return out;
}

Result<std::vector<std::vector<int32_t>>> DFlashBatchDecoder::ProposeDFlash2(
    std::span<const int32_t> last, int64_t n, const SamplingParams& sp, bool sample_drafts,
    std::span<const DrawKey> keys, std::vector<std::vector<TokenDist>>* q) {
  const int64_t bs = drafter_->config().block_size;
  const DFlashParamViews& w = drafter_->params().w;
  const DFlash2ProposalWeights weights{target_->weights().lm_head(), w.sel_proj, w.sel_pred,
                                       w.sel_succ};
  std::vector<DFlash2Block> blocks;
  for (size_t b = 0; b < last.size(); ++b)
    blocks.push_back({drafter_->final_hidden().Narrow(0, static_cast<int64_t>(b) * bs + 1, n),
                      last[b], keys[b]});
  const bool sample = sp.temperature > 0.0f && sample_drafts;
  ASSIGN_OR_RETURN(DFlash2Proposal p, proposer_->Propose(blocks, weights,
                                                         sample ? sp.temperature : 0.0f,
                                                         gemm_.get()));
  q->assign(last.size(), {});
  for (size_t b = 0; b < last.size(); ++b) {
    if (sample)
      (*q)[b] = std::move(p.q[b]);
    else if (sp.temperature > 0.0f)
      (*q)[b] = OneHot(p.drafts[b]);
  }
  return std::move(p.drafts);
}

Result<std::vector<TokenDist>> DFlashBatchDecoder::Verify(
    std::span<const int64_t> live, std::span<const std::vector<int32_t>> blocks,
    const SamplingParams& sp) {
  std::vector<BatchExtendPart> parts;
  std::vector<int64_t> base;
  int64_t rows = 0;
  for (size_t b = 0; b < live.size(); ++b) {
    parts.push_back({live[b], blocks[b]});
    base.push_back(cache_.sequence(live[b]).length());
    rows += static_cast<int64_t>(blocks[b].size());
  }
  std::vector<LayerCapture> caps;
  for (size_t i = 0; i < capture_layers_.size(); ++i)
    caps.push_back({capture_layers_[i], captured_[i].view().Narrow(0, 0, rows)});
  const TensorView logits = logits_.view().Narrow(0, 0, rows);
  RETURN_IF_ERROR(target_->ExtendBatch(cache_, parts, caps, logits));
  int64_t row = 0;
  for (size_t b = 0; b < live.size(); ++b) {
    const int64_t n = static_cast<int64_t>(blocks[b].size());
    for (size_t l = 0; l < captured_.size(); ++l)
      RETURN_IF_ERROR(kernels::Copy(
          features_[l].view().Narrow(0, live[b] * max_context_ + base[b], n),
          captured_[l].view().Narrow(0, row, n), stream_));
    row += n;
  }
  if (sp.temperature > 0.0f)
    return reader_.Read(logits, sp, target_->weights().allocator(), target_->device(), stream_);
  host_logits_.resize(static_cast<size_t>(logits.numel()));
  RETURN_IF_ERROR(kernels::CopyToHost(host_logits_.data(), logits, stream_));
  RETURN_IF_ERROR(kernels::SynchronizeStream(target_->device(), stream_));
  return std::vector<TokenDist>();
}

SampledVerify DFlashBatchDecoder::Pick(std::span<const int32_t> block, const float* logits,
                                       std::span<const TokenDist> q, std::span<const TokenDist> p,
                                       const SamplingParams& sp, const DrawKey& key) const {
  const int64_t n = static_cast<int64_t>(block.size()), v = target_->config().vocab_size;
  SampledVerify out;
  if (sp.temperature == 0.0f) {
    const std::vector<int32_t> post = ArgmaxRows(logits, n, v);
    while (out.accepted + 1 < n && block[out.accepted + 1] == post[out.accepted]) ++out.accepted;
    out.next = post[out.accepted];
    return out;
  }
  return VerifyBySampling(q, p, block.subspan(1), key);
}

Result<std::vector<SpecDecodeResult>> DFlashBatchDecoder::GenerateAll(
    std::span<const std::vector<int32_t>> prompts, const SpecDecodeOptions& o) {
  RETURN_IF_ERROR(CheckRequest(prompts, o));
  std::optional<kernels::DeviceGuard> guard;
  if (target_->device().is_cuda()) guard.emplace(target_->device().index);
  const int64_t v = target_->config().vocab_size;
  const SamplingParams sp = o.sampling();
  auto stop = [&](int32_t tok) {
    return std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), tok) !=
           o.stop_token_ids.end();
  };
  std::vector<SpecDecodeResult> results(prompts.size());
  std::vector<Slot> slots(static_cast<size_t>(batch()));
  auto finish = [&](Slot& s) {
    s.result.seconds = std::chrono::duration<double>(Clock::now() - s.start).count();
    results[static_cast<size_t>(s.prompt)] = std::move(s.result);
    s = Slot();
  };
  size_t next = 0;
  while (true) {
    // Free slots take the next prompts; a prompt may end at its prefill pick.
    for (size_t s = 0; s < slots.size(); ++s) {
      while (slots[s].prompt < 0 && next < prompts.size()) {
        Slot& slot = slots[s];
        slot.prompt = static_cast<int64_t>(next);
        slot.key = {o.seed, o.prompt_index + next, 0};
        slot.start = Clock::now();
        slot.result.prefill_tokens = static_cast<int64_t>(prompts[next].size());
        auto first = Prefill(static_cast<int64_t>(s), prompts[next], sp, slot.key);
        if (!first.ok()) return first.status().WithContext(fmt::format("prompt {}", next));
        ++next;
        slot.result.tokens.push_back(*first);
        if (stop(*first) || o.max_new_tokens <= 1) finish(slot);
      }
    }
    std::vector<int64_t> live;
    std::vector<int32_t> last;
    std::vector<DrawKey> keys;
    for (size_t s = 0; s < slots.size(); ++s)
      if (slots[s].prompt >= 0) {
        ++slots[s].key.step;
        live.push_back(static_cast<int64_t>(s));
        last.push_back(slots[s].result.tokens.back());
        keys.push_back(slots[s].key);
      }
    if (live.empty()) break;
    // Invariant: each live cache holds its prompt and every generated token but the last.
    std::vector<std::vector<int32_t>> blocks;
    std::vector<std::vector<TokenDist>> q(live.size());  // sampling: the drafter's
    for (int32_t t : last) blocks.push_back({t});
    if (o.block_size > 1) {
      ASSIGN_OR_RETURN(auto drafts,
                       Draft(live, last, o.block_size - 1, sp, o.sample_drafts, keys, &q));
      for (size_t b = 0; b < live.size(); ++b)
        blocks[b].insert(blocks[b].end(), drafts[b].begin(), drafts[b].end());
    }
    std::vector<int64_t> base;
    for (int64_t s : live) base.push_back(cache_.sequence(s).length());
    ASSIGN_OR_RETURN(const std::vector<TokenDist> p, Verify(live, blocks, sp));
    int64_t row = 0;
    for (size_t b = 0; b < live.size(); ++b) {
      Slot& slot = slots[static_cast<size_t>(live[b])];
      const std::vector<int32_t>& block = blocks[b];
      const int64_t n = static_cast<int64_t>(block.size());
      const bool greedy = sp.temperature == 0.0f;
      const SampledVerify picked = Pick(
          block, greedy ? host_logits_.data() + row * v : nullptr, q[b],
          greedy ? std::span<const TokenDist>() : std::span<const TokenDist>(p).subspan(row, n), sp,
          keys[b]);
      row += n;
      const int64_t acc = picked.accepted;
      RETURN_IF_ERROR(cache_.sequence(live[b]).Crop(base[b] + acc + 1));
      slot.result.accept_lengths.push_back(static_cast<int32_t>(acc + 1));
      bool done = false;
      for (int64_t j = 1; j <= acc + 1 && !done; ++j) {
        const int32_t tok = j <= acc ? block[j] : picked.next;
        slot.result.tokens.push_back(tok);
        done = stop(tok) ||
               static_cast<int64_t>(slot.result.tokens.size()) >= o.max_new_tokens;
      }
      if (done) finish(slot);
    }
  }
  return results;
}

}  // namespace tandem::models
