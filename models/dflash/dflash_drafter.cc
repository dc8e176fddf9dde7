// DFlash drafter: creation, workspace layout, plan upload, the forward's order. Each layer's
// forward and the LM head loss are in dflash_drafter_layers.cc, the backward in
// dflash_drafter_backward.cc, the optimizer step in dflash_drafter_optimizer.cc.
#include "models/dflash/dflash_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numbers>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/elementwise/concat_noise.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/norm/fused_norm.h"
#include "kernels/loss/lm_head_ce.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/elementwise/row_gather.h"
#include "kernels/core/stream.h"
#include "kernels/mlp/swiglu.h"
#include "models/dflash/dflash_drafter_internal.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

namespace {

Status CheckSupported(const DFlashConfig& c) {
  const TransformerConfig& t = c.layers;
  if (c.block_size != kernels::kDFlashBlockSize)
    return InvalidArgumentError("DFlash drafter: block_size {} is not supported (the block "
                                "attention kernel takes {})", c.block_size,
                                kernels::kDFlashBlockSize);
  if (t.family != ModelFamily::kQwen3 || !t.qk_norm)
    return InvalidArgumentError("DFlash drafter: layers must be qwen3 with q/k norms");
  if (t.rotary_dim != 0 && t.rotary_dim != t.head_dim)
    return InvalidArgumentError("DFlash drafter: partial rotary_dim {} (head_dim {}) is not "
                                "supported", t.rotary_dim, t.head_dim);
  if (static_cast<int64_t>(t.layer_types.size()) != t.num_hidden_layers)
    return InvalidArgumentError("DFlash drafter: {} layer_types for {} layers",
                                t.layer_types.size(), t.num_hidden_layers);
  for (LayerType lt : t.layer_types)
    if (lt == LayerType::kSlidingAttention && !t.sliding_window)
      return InvalidArgumentError("DFlash drafter: sliding layers need sliding_window");
  RETURN_IF_ERROR(CheckDFlashMask(c, "DFlash drafter"));
  RETURN_IF_ERROR(CheckDFlash2Supported(c));
  const size_t k = c.target_layer_ids.size();
  if (k < 1 || k > static_cast<size_t>(kernels::kMaxConcatInputs))
    return InvalidArgumentError("DFlash drafter: {} target layers (1..{} supported)", k,
                                kernels::kMaxConcatInputs);
  if (t.num_attention_heads % t.num_key_value_heads != 0 || t.vocab_size <= 0)
    return InvalidArgumentError("DFlash drafter: bad heads ({} / {}) or vocab ({})",
                                t.num_attention_heads, t.num_key_value_heads, t.vocab_size);
  return Status::Ok();
}

// The plan's i32/f32 tables share one buffer (plan_i32_); each starts on a 16-byte boundary,
// which the CUDA block-attention kernel checks for its anchor and doc-start tables, so any
// num_blocks works (one block, as a decoder drafts, included).
int64_t AlignedWords(int64_t n) { return (n + 3) / 4 * 4; }

// Words of plan_i32_: anchors and doc starts (nb each), seven row tables (r each), and the
// context positions (t).
int64_t PlanWords(int64_t nb, int64_t r, int64_t t) {
  return 2 * AlignedWords(nb) + 7 * AlignedWords(r) + AlignedWords(t);
}

}  // namespace

TensorView As2d(const TensorView& t, int64_t cols) { return t.Reshape(Shape{t.numel() / cols, cols}); }

Status DFlashAttentionFwd(const kernels::DFlashAttentionInputs& in,
                          const kernels::DFlashAttentionConfig& cfg, TensorView out,
                          TensorView lse, kernels::Stream s) {
  if (in.q_blk.device().is_cpu()) return kernels::DFlashAttentionForwardCpu(in, cfg, out, lse, s);
#ifdef TANDEM_HAVE_CUDA
  return kernels::DFlashAttentionForward(in, cfg, out, lse, s);
#else
  return InvalidArgumentError("DFlash attention: CUDA tensors in a build without CUDA");
#endif
}

Status DFlashAttentionBwd(const kernels::DFlashAttentionInputs& in,
                          const kernels::DFlashAttentionConfig& cfg, const TensorView& out,
                          const TensorView& lse, const TensorView& d_out,
                          const kernels::DFlashAttentionGrads& grads, kernels::Stream s) {
  if (in.q_blk.device().is_cpu())
    return kernels::DFlashAttentionBackwardCpu(in, cfg, out, lse, d_out, grads, s);
#ifdef TANDEM_HAVE_CUDA
  return kernels::DFlashAttentionBackward(in, cfg, out, lse, d_out, grads, s);
#else
  return InvalidArgumentError("DFlash attention: CUDA tensors in a build without CUDA");
#endif
}

Status LinearForward(kernels::GemmContext* ctx, const TensorView& x, const TensorView& w,
                     const TensorView& y, kernels::Stream s) {
  kernels::GemmOptions o;
  o.trans_b = true;
  return kernels::Gemm(ctx, As2d(x, w.dim(1)), w, As2d(y, w.dim(0)), o, s);
}

Status LinearWeightGrad(kernels::GemmContext* ctx, const TensorView& dy, const TensorView& x,
                        const TensorView& dw, bool accumulate, kernels::Stream s) {
  kernels::GemmOptions o;
  o.trans_a = true;
  o.beta = accumulate ? 1.f : 0.f;
  return kernels::Gemm(ctx, As2d(dy, dw.dim(0)), As2d(x, dw.dim(1)), dw, o, s);
}

Status LinearInputGrad(kernels::GemmContext* ctx, const TensorView& dy, const TensorView& w,
                       const TensorView& dx, bool accumulate, kernels::Stream s) {
  kernels::GemmOptions o;
  o.beta = accumulate ? 1.f : 0.f;
  return kernels::Gemm(ctx, As2d(dy, w.dim(0)), w, As2d(dx, w.dim(1)), o, s);
}


Result<std::unique_ptr<DFlashDrafter>> DFlashDrafter::Create(const DFlashConfig& config,
                                                             const DFlashDrafterOptions& options,
                                                             kernels::Allocator& alloc,
                                                             kernels::Stream stream) {
  const kernels::Device device = alloc.device();
  ASSIGN_OR_RETURN(std::unique_ptr<DFlashDrafter> d, Blank(config, options, device));
  d->stream_ = stream;
  d->alloc_ = &alloc;
  if (device.is_cuda()) {
    ASSIGN_OR_RETURN(d->gemm_, kernels::GemmContext::Create(device.index));
  }
  if (const DFlashParams* shared = options.shared_weights) {
    DFlashParamLayout layout = MakeDFlashParamLayout(config);
    if (layout.total != shared->layout.total || shared->compute.view().numel() != layout.total ||
        !(shared->compute.device() == device))
      return InvalidArgumentError("DFlash drafter: shared_weights hold {} parameters, this "
                                  "config needs {} (on the same device)", shared->layout.total,
                                  layout.total);
    d->params_.layout = std::move(layout);
    d->params_.w = shared->w;
  } else {
    ASSIGN_OR_RETURN(d->params_, DFlashParams::Create(config, *d->alloc_, stream));
  }
  RETURN_IF_ERROR(d->Carve(nullptr));  // measures
  ASSIGN_OR_RETURN(d->workspace_, kernels::Tensor::Empty(*d->alloc_, DType::kU8,
                                                         Shape{d->measured_bytes_}, stream));
  RETURN_IF_ERROR(d->Carve(static_cast<char*>(d->workspace_.data())));
  return d;
}

Result<std::unique_ptr<DFlashDrafter>> DFlashDrafter::Blank(const DFlashConfig& config,
                                                            const DFlashDrafterOptions& options,
                                                            kernels::Device device) {
  RETURN_IF_ERROR(CheckSupported(config));
  if (options.max_tokens < 1 || options.num_blocks < 1 || options.ce_chunk_rows < 1)
    return InvalidArgumentError("DFlash drafter: max_tokens ({}), num_blocks ({}) and "
                                "ce_chunk_rows ({}) must be positive", options.max_tokens,
                                options.num_blocks, options.ce_chunk_rows);
  std::unique_ptr<DFlashDrafter> d(new DFlashDrafter());
  d->config_ = config;
  d->options_ = options;
  d->device_ = device;
  d->acts_.resize(config.layers.num_hidden_layers);
  return d;
}

Result<int64_t> DFlashDrafter::WorkspaceBytes(const DFlashConfig& config,
                                              const DFlashDrafterOptions& options,
                                              kernels::Device device) {
  ASSIGN_OR_RETURN(std::unique_ptr<DFlashDrafter> d, Blank(config, options, device));
  RETURN_IF_ERROR(d->Carve(nullptr));  // measures, as Create does first
  return d->measured_bytes_;
}

Status DFlashDrafter::Carve(char* base) {
  const TransformerConfig& t = config_.layers;
  const int64_t h = t.hidden_size, d = t.head_dim, hq = t.num_attention_heads,
                hk = t.num_key_value_heads, inter = t.intermediate_size;
  const int64_t nb = options_.num_blocks, r = rows(), tmax = options_.max_tokens;
  const int64_t k = static_cast<int64_t>(config_.target_layer_ids.size());
  WorkspaceCarver c(base, device_);
  plan_i32_ = c.Take(DType::kI32, Shape{PlanWords(nb, r, tmax)});
  {
    int32_t* p = plan_i32_.data_as<int32_t>();
    auto slice = [&](DType dt, int64_t n) {
      TensorView v(p, dt, Shape{n}, device_);
      if (p) p += AlignedWords(n);
      return v;
    };
    anchors_ = slice(DType::kI32, nb);
    doc_start_ = slice(DType::kI32, nb);
    block_ids_ = slice(DType::kI32, r);
    block_pos_ = slice(DType::kI32, r);
    lm_rows_ = slice(DType::kI32, r);
    lm_slot_ = slice(DType::kI32, r);
    lm_targets_ = slice(DType::kI32, r);
    lm_weights_ = slice(DType::kF32, r);
    lm_prev_ = slice(DType::kI32, r);
    ctx_pos_ = slice(DType::kI32, tmax);
  }
  concat_ = c.Take(DType::kBF16, Shape{tmax, k * h});
  ctx_pre_ = c.Take(DType::kBF16, Shape{tmax, h});
  ctx_ = c.Take(DType::kBF16, Shape{tmax, h});
  ctx_rstd_ = c.Take(DType::kF32, Shape{tmax});
  x_.clear();
  for (int64_t l = 0; l <= t.num_hidden_layers; ++l) x_.push_back(c.Take(DType::kBF16, Shape{r, h}));
  final_hidden_ = c.Take(DType::kBF16, Shape{r, h});
  final_rstd_ = c.Take(DType::kF32, Shape{r});
  loss_ = c.Take(DType::kF32, Shape{1});
  correct_ = c.Take(DType::kU8, Shape{r});
  grad_stats_ = c.Take(DType::kF32, Shape{kernels::kGradStatsSize});
  norm_workspace_ = c.Take(DType::kF32, Shape{kernels::kGradNormWorkspaceSize});
  rms_workspace_ = c.Take(DType::kF32, Shape{kernels::RmsNormBackwardWorkspaceRows() * std::max(h, d)});
  for (DFlashLayerActs& a : acts_) {
    a.rstd1 = c.Take(DType::kF32, Shape{r});
    a.q_pre = c.Take(DType::kBF16, Shape{r, hq, d});
    a.q_rstd = c.Take(DType::kF32, Shape{r * hq});
    a.k_pre = c.Take(DType::kBF16, Shape{r, hk, d});
    a.k_rstd = c.Take(DType::kF32, Shape{r * hk});
    a.v = c.Take(DType::kBF16, Shape{r, hk, d});
    a.kc_pre = c.Take(DType::kBF16, Shape{tmax, hk, d});
    a.kc_rstd = c.Take(DType::kF32, Shape{tmax * hk});
    a.vc = c.Take(DType::kBF16, Shape{tmax, hk, d});
    a.q_s = c.Take(DType::kBF16, Shape{r, hq, d});
    a.k_s = c.Take(DType::kBF16, Shape{r, hk, d});
    a.kc_s = c.Take(DType::kBF16, Shape{tmax, hk, d});
    a.attn = c.Take(DType::kBF16, Shape{r, hq, d});
    a.lse = c.Take(DType::kF32, Shape{r, hq});
    a.h1 = c.Take(DType::kBF16, Shape{r, h});
    a.rstd2 = c.Take(DType::kF32, Shape{r});
    a.gu = c.Take(DType::kBF16, Shape{r, 2 * inter});
  }
  if (config_.dflash2) Carve2(c);
  d_res_ = c.Take(DType::kBF16, Shape{r, h});
  d_tmp_ = c.Take(DType::kBF16, Shape{r, h});
  d_tmp2_ = c.Take(DType::kBF16, Shape{r, h});
  // The LM head's compact rows live in buffers that are free at the end of the forward:
  // d_tmp2_ (h1n of a layer) and d_res_ (first written by the backward after the LM head).
  lm_hidden_ = d_tmp2_;
  lm_dhidden_ = d_res_;
  d_ctx_f32_ = c.Take(DType::kF32, Shape{tmax, h});
  // The shared region: each phase carves it from its start; phases never overlap in time.
  const int64_t ce_bytes =
      device_.is_cpu()       ? 0
      : options_.lm_head_fp8 ? kernels::LmHeadCeFp8WorkspaceBytes(r, t.vocab_size, h,
                                                                  options_.ce_chunk_rows)
                             : kernels::LmHeadCeWorkspaceBytes(r, t.vocab_size,
                                                               options_.ce_chunk_rows);
  const std::function<void(WorkspaceCarver&)> phases[] = {
      [&](WorkspaceCarver& o) {  // attention
        d_attn_ = o.Take(DType::kBF16, Shape{r, hq, d});
        d_q_ = o.Take(DType::kBF16, Shape{r, hq, d});
        d_k_ = o.Take(DType::kBF16, Shape{r, hk, d});
        d_v_ = o.Take(DType::kBF16, Shape{r, hk, d});
        d_kc_f32_ = o.Take(DType::kF32, Shape{tmax, hk, d});
        d_vc_f32_ = o.Take(DType::kF32, Shape{tmax, hk, d});
        d_kc_ = o.Take(DType::kBF16, Shape{tmax, hk, d});
        d_vc_ = o.Take(DType::kBF16, Shape{tmax, hk, d});
        d_xn_f32_ = o.Take(DType::kF32, Shape{r, h});
        attn_delta_ = o.Take(DType::kF32, Shape{r, hq});
      },
      [&](WorkspaceCarver& o) {  // MLP; the forward's SwiGLU output is dead before d_gu_
        d_gu_ = o.Take(DType::kBF16, Shape{r, 2 * inter});
        d_act_ = o.Take(DType::kBF16, Shape{r, inter});
        act_s_ = TensorView(d_gu_.data(), DType::kBF16, Shape{r, inter}, device_);
      },
      [&](WorkspaceCarver& o) {  // LM head + CE (its workspace on CUDA only)
        ce_workspace_ = device_.is_cpu() ? TensorView() : o.Take(DType::kU8, Shape{ce_bytes});
        lm_correct_ = o.Take(DType::kU8, Shape{r});
      },
      [&](WorkspaceCarver& o) {  // context gradient after the last layer
        d_ctx_ = o.Take(DType::kBF16, Shape{tmax, h});
        d_ctx_pre_ = o.Take(DType::kBF16, Shape{tmax, h});
      }};
  int64_t region_bytes = 0;
  for (const auto& phase : phases) {
    WorkspaceCarver m(nullptr, device_);
    phase(m);
    region_bytes = std::max(region_bytes, m.used());
  }
  const TensorView region = c.Take(DType::kU8, Shape{region_bytes});
  for (const auto& phase : phases) {
    WorkspaceCarver o(static_cast<char*>(region.data()), device_);
    phase(o);
  }
  measured_bytes_ = c.used();
  return Status::Ok();
}

Status DFlashDrafter::SetPlan(const DFlashBlockPlan& plan) {
  const int64_t nb = options_.num_blocks, r = rows();
  if (plan.num_blocks != nb || plan.block_size != config_.block_size || plan.tokens < 1 ||
      plan.tokens > options_.max_tokens)
    return InvalidArgumentError("DFlash drafter: plan of {} blocks of {} over {} tokens does "
                                "not fit a drafter of {} blocks of {} and at most {} tokens",
                                plan.num_blocks, plan.block_size, plan.tokens, nb,
                                config_.block_size, options_.max_tokens);
  if (static_cast<int64_t>(plan.anchors.size()) != nb || static_cast<int64_t>(plan.block_ids.size()) != r ||
      static_cast<int64_t>(plan.ctx_pos.size()) != plan.tokens ||
      (!plan.prev_ids.empty() && static_cast<int64_t>(plan.prev_ids.size()) != r))
    return InvalidArgumentError("DFlash drafter: plan tables have inconsistent sizes");
  // The LM head runs only on the R' rows with loss weight (not the anchors, nor slots past a
  // document end, nor padding blocks): lm_rows lists them, lm_slot maps a row to its compact
  // index (-1: skipped), lm_targets/lm_weights are the compacted targets and weights.
  // lm_prev: DFlash2's teacher-forced previous token of each (plan.prev_ids; without them
  // the previous slot's target, the anchor for slot 1).
  std::vector<int32_t> lm_rows, lm_slot(r, -1), lm_targets, lm_prev;
  std::vector<float> lm_weights;
  const int64_t bs = config_.block_size;
  for (int64_t i = 0; i < r; ++i) {
    if (plan.weights[i] == 0.0f) continue;  // the CE skips exactly these rows
    lm_slot[i] = static_cast<int32_t>(lm_rows.size());
    lm_rows.push_back(static_cast<int32_t>(i));
    lm_targets.push_back(plan.targets[i]);
    lm_weights.push_back(plan.weights[i]);
    lm_prev.push_back(!plan.prev_ids.empty() ? plan.prev_ids[i]
                      : i % bs <= 1          ? plan.block_ids[i - i % bs]
                                             : plan.targets[i - 1]);
  }
  const int64_t kept = static_cast<int64_t>(lm_rows.size());
  // Host image of plan_i32_ (compact tables and the T-sized tail written only up to their
  // lengths).
  std::vector<int32_t> words(PlanWords(nb, r, plan.tokens));
  int32_t* p = words.data();
  auto put = [&](const void* src, int64_t n) {
    std::memcpy(p, src, n * 4);
    p += AlignedWords(n);
  };
  put(plan.anchors.data(), nb);
  put(plan.doc_start.data(), nb);
  put(plan.block_ids.data(), r);
  put(plan.block_pos.data(), r);
  auto put_padded = [&](const void* src, int64_t n) {
    std::memcpy(p, src, n * 4);
    p += AlignedWords(r);
  };
  put_padded(lm_rows.data(), kept);
  put(lm_slot.data(), r);
  put_padded(lm_targets.data(), kept);
  put_padded(lm_weights.data(), kept);
  put_padded(lm_prev.data(), kept);
  put(plan.ctx_pos.data(), plan.tokens);
  tokens_ = plan.tokens;
  lm_rows_count_ = kept;
  return kernels::CopyFromHost(plan_i32_.Narrow(0, 0, static_cast<int64_t>(words.size())),
                               words.data(), stream_);
}

Status DFlashDrafter::ForwardBackward(const DFlashTargetHead& head,
                                      std::span<const TensorView> context_layers,
                                      float noise_std, uint64_t noise_seed,
                                      uint64_t noise_offset, bool backward) {
  if (tokens_ == 0) return InvalidArgumentError("DFlash drafter: ForwardBackward before SetPlan");
  const TransformerConfig& t = config_.layers;
  if (context_layers.size() != config_.target_layer_ids.size())
    return InvalidArgumentError("DFlash drafter: {} context layers, config has {}",
                                context_layers.size(), config_.target_layer_ids.size());
  for (const TensorView& v : context_layers)
    if (v.dtype() != DType::kBF16 || v.ndim() != 2 || v.dim(0) != tokens_ ||
        v.dim(1) != t.hidden_size || !(v.device() == device_))
      return InvalidArgumentError("DFlash drafter: context layer {} must be bf16 [{}, {}] on "
                                  "the drafter's device", v.ToString(), tokens_, t.hidden_size);
  for (const TensorView* v : {&head.embedding, &head.lm_head})
    if (v->dtype() != DType::kBF16 || v->ndim() != 2 || v->dim(0) != t.vocab_size ||
        v->dim(1) != t.hidden_size || !(v->device() == device_))
      return InvalidArgumentError("DFlash drafter: target embedding/LM head {} must be bf16 "
                                  "[{}, {}] on the drafter's device", v->ToString(),
                                  t.vocab_size, t.hidden_size);
  kernels::NvtxRange range(backward ? "dflash.fwd_bwd" : "dflash.fwd");
  num_marks_ = 0;
  RETURN_IF_ERROR(Mark("begin"));
  RETURN_IF_ERROR(std::exchange(join_error_, Status::Ok()));
  RETURN_IF_ERROR(Forward(head, context_layers, noise_std, noise_seed, noise_offset, backward));
  // The backward overwrites the gradients an overlapped optimizer step may still read.
  RETURN_IF_ERROR(JoinOptimizer());
  if (!backward) return Status::Ok();
  if (options_.shared_weights != nullptr)
    return InvalidArgumentError("DFlash drafter: a drafter over shared weights is forward only");
  return Backward();
}

Status DFlashDrafter::Forward(const DFlashTargetHead& head,
                              std::span<const TensorView> ctx_layers, float noise_std,
                              uint64_t seed, uint64_t offset, bool want_grad) {
  const TransformerConfig& t = config_.layers;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const int64_t tt = tokens_;
  const DFlashParamViews& w = params_.w;
  head_lm_ = head.lm_head;
  head_lm_fp8_ = head.lm_head_fp8;
  if (options_.lm_head_fp8 && head_lm_fp8_ == nullptr)
    return InvalidArgumentError("DFlash drafter: lm_head_precision = \"fp8\" but the target "
                                "head has no FP8 form (DFlashTargetHead::lm_head_fp8)");
  RETURN_IF_ERROR(kernels::ConcatNoiseForward(concat_.Narrow(0, 0, tt), ctx_layers, noise_std,
                                              seed, offset, stream_));
  RETURN_IF_ERROR(WaitUpdated(0));  // fc and the norm weights (overlapped optimizer)
  RETURN_IF_ERROR(LinearForward(gemm_.get(), concat_.Narrow(0, 0, tt), w.fc,
                                ctx_pre_.Narrow(0, 0, tt), stream_));
  RETURN_IF_ERROR(kernels::RmsNormForward(ctx_.Narrow(0, 0, tt), ctx_rstd_.Narrow(0, 0, tt),
                                          ctx_pre_.Narrow(0, 0, tt), w.hidden_norm, eps,
                                          stream_));
  RETURN_IF_ERROR(kernels::EmbeddingForward(x_[0], block_ids_, head.embedding, stream_));
  // DFlash2's input_embedding_scale, in place on the gathered rows (bf16 of the fp32
  // product). The embedding table is the frozen target's: no gradient flows back through it.
  if (config_.dflash2 && config_.dflash2->input_embedding_scale != 1.0)
    RETURN_IF_ERROR(kernels::Scale(x_[0], x_[0],
                                   static_cast<float>(config_.dflash2->input_embedding_scale),
                                   stream_));
  // Layer 0's xn (in d_tmp_); each layer ends with the next one's (or the final) norm, fused
  // into its MLP residual add.
  if (t.num_hidden_layers == 0) {
    RETURN_IF_ERROR(kernels::RmsNormForward(final_hidden_, final_rstd_, x_[0], w.norm, eps,
                                            stream_));
  } else {
    RETURN_IF_ERROR(kernels::AddRmsNormForward(TensorView(), d_tmp_, acts_[0].rstd1, x_[0],
                                               TensorView(), w.layers[0].input_norm, eps,
                                               stream_));
  }
  RETURN_IF_ERROR(Mark("fwd.context"));
  for (int l = 0; l < t.num_hidden_layers; ++l) RETURN_IF_ERROR(LayerForward(l));
  RETURN_IF_ERROR(LmHeadLoss(want_grad));
  return Mark(want_grad ? "lm_head_ce.fwd_bwd" : "lm_head_ce.fwd");
}

float DFlashCosineLr(int64_t step, int64_t total_steps, int64_t warmup_steps, float lr,
                     float min_lr) {
  if (step < warmup_steps) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  const int64_t decay = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / decay);
  return static_cast<float>(min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace tandem::models
