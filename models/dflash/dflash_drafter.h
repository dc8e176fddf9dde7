// The DFlash drafter (docs/architecture.md, "The DFlash drafter"): forward, weighted block
// loss, backward and the AdamW step, on the CPU (reference kernels) or one CUDA device.
//
// Forward of one step, T context tokens, NB blocks of bs = 16 slots, R = NB*bs rows:
//   ctx  = hidden_norm(fc(concat_noise(target layers)))              [T, H]
//   x0   = target_embedding[block_ids]                               [R, H]
//          (DFlash2: times input_embedding_scale; the target's table gets no gradient)
//   per layer l (Qwen3 decoder layer; the context skips input_layernorm):
//     xn = input_layernorm(x);  q = rope(q_norm(xn Wq^T));  k = rope(k_norm(xn Wk^T));
//     v = xn Wv^T;  kc = rope(k_norm(ctx Wk^T), ctx_pos);  vc = ctx Wv^T
//     a  = DFlashAttention(q, [kc | k], [vc | v])  (full layers: block bidirectional, whole
//          document prefix; sliding layers: block causal, keys within the window of each
//          query's position, as served)
//     h  = x + a Wo^T;  x' = h + down(silu(gate(post_norm(h))) * up(post_norm(h)))
//   loss = sum_r w_r CE(target_lm_head(norm(x_L))_r, target_r) / sum_r w_r
// Backward writes d loss / d every parameter into params().grads (fp32; it overwrites the
// previous contents, never accumulates across calls), including the context path (every
// layer's k_proj/v_proj/k_norm, hidden_norm and fc).
//
// All activations live in one workspace allocated at Create (sized by max_tokens and
// num_blocks); a step allocates nothing and never synchronises the host. Results (loss,
// per-row correctness, grad stats) stay on the device until the caller reads them.
//
// Thread-safety: thread-compatible; one thread drives a drafter, all work on its stream (with
// the overlapped optimizer, also on a second stream ordered to it by events).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kernels/optim/adamw_types.h"
#include "kernels/gemm/gemm.h"
#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#include "kernels/core/tensor.h"
#include "kernels/loss/lm_head_ce_fp8.h"
#include "models/dflash/dflash_anchors.h"
#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_params.h"
#include "runtime/core/status.h"

namespace tandem::models {

// The frozen target's token embedding and LM head, shared read-only (bf16 [V, H] each, on
// the drafter's device; they may be the same tensor for a tied target).
struct DFlashTargetHead {
  kernels::TensorView embedding;
  kernels::TensorView lm_head;
  // The LM head's FP8 form (kernels/loss/lm_head_ce_fp8.h), quantized once by the owner of
  // the head; REQUIRED when the drafter was created with lm_head_fp8, ignored otherwise.
  const kernels::Fp8LmHead* lm_head_fp8 = nullptr;
};

struct DFlashDrafterOptions {
  int64_t max_tokens = 0;  // most context tokens T of a batch
  int64_t num_blocks = 0;  // NB blocks per step (anchors per batch, padded)
  int64_t ce_chunk_rows = 2048;
  // lm_head_precision = "fp8": the LM head + CE runs as block-scaled e4m3 GEMMs against
  // DFlashTargetHead::lm_head_fp8 (fp32 accumulation; CUDA needs sm_90).
  bool lm_head_fp8 = false;
  // Forward only, over another drafter's weights (speculative decoding while that one
  // trains: actors/dflash/drafter_eval.h): no parameters are allocated, the forward reads
  // `shared_weights->w` (the bf16 compute copy), and ForwardBackward with backward,
  // OptimizerStep and SetOptimizerOverlap(true) are InvalidArgument. REQUIRES: it outlives
  // this drafter, keeps its buffers, has this config's layout, and its updates are ordered
  // before this drafter's forwards (the same stream, after JoinOptimizer).
  const DFlashParams* shared_weights = nullptr;
  // DFlash2 (config.dflash2): alpha of loss = DFlash loss + alpha * selector loss.
  float selector_loss_weight = 1.0f;
};

struct DFlashLayerActs;  // saved activations of one layer (dflash_drafter_internal.h)
class WorkspaceCarver;   // dflash_drafter_internal.h

// GPU time of one stage of the last timed step; `stage` names what ran since the previous
// mark (e.g. "fwd.attn"), `layer` is its layer or -1.
struct DFlashStageTime {
  const char* stage;
  int layer;
  float ms;
};

class DFlashDrafter {
 public:
  // Allocates parameters (uninitialised: call params().InitFromScratch or load a checkpoint)
  // and the workspace from `alloc`, on its device; `stream` orders all its work.
  // InvalidArgument for a config the kernels do not support (block_size != 16,
  // rotary_dim != head_dim, ...). REQUIRES: `alloc` outlives the drafter.
  static Result<std::unique_ptr<DFlashDrafter>> Create(const DFlashConfig& config,
                                                       const DFlashDrafterOptions& options,
                                                       kernels::Allocator& alloc,
                                                       kernels::Stream stream);
  ~DFlashDrafter();

  const DFlashConfig& config() const { return config_; }
  const DFlashDrafterOptions& options() const { return options_; }
  kernels::Device device() const { return device_; }
  // Where its parameters and workspace come from (the `alloc` of Create).
  kernels::Allocator& allocator() const { return *alloc_; }
  kernels::Stream stream() const { return stream_; }
  // Joins a pending overlapped optimizer step first (JoinOptimizer), so work the caller
  // queues on stream() sees the updated weights and optimizer state.
  DFlashParams& params();
  int64_t workspace_bytes() const { return workspace_.nbytes(); }
  // What Create allocates as workspace for `config` and `options` on `device`, measured the
  // same way without allocating (the parameters are DFlashParams' own).
  static Result<int64_t> WorkspaceBytes(const DFlashConfig& config,
                                        const DFlashDrafterOptions& options,
                                        kernels::Device device);
  int64_t rows() const { return options_.num_blocks * config_.block_size; }
  // Rows of the current plan with a nonzero loss weight: the LM head + CE runs on these.
  int64_t loss_rows() const { return lm_rows_count_; }

  // Copies `plan` to the device. REQUIRES plan.num_blocks == num_blocks, plan.tokens in
  // [1, max_tokens], bs == block_size. The host copy is staged before this returns.
  Status SetPlan(const DFlashBlockPlan& plan);

  // Runs the forward and the loss for the current plan; with `backward`, also the backward
  // into params().grads. context_layers: k views bf16 [T, H] (T = plan.tokens, on the
  // device). Noise U(-noise_std, noise_std) from Philox (noise_seed, noise_offset).
  Status ForwardBackward(const DFlashTargetHead& head,
                         std::span<const kernels::TensorView> context_layers, float noise_std,
                         uint64_t noise_seed, uint64_t noise_offset, bool backward);

  // Global grad norm, clip to `grad_clip` (<= 0: none), AdamW with `cfg` (weight decay on
  // matrices only), step += 1; a step with a non-finite grad is skipped on the device.
  // The grad norm runs on stream(). Serial (the default): so does the update, as two AdamW
  // launches (matrices, norms). Overlapped (SetOptimizerOverlap): the update runs on a
  // second stream after the grad norm, group by group in the order the next forward reads
  // the weights (DFlashUpdateRanges: fc and every norm weight first, then layer 0, 1, ...),
  // with one event per group; the next forward waits for group g just before it reads it,
  // so the update of layer l overlaps the forward of the layers before l. Every element
  // gets the same fp32 arithmetic from the same kernel in either mode, so the result is
  // bitwise the same (tests: dflash_optimizer_test.cc, dflash_optimizer_gpu_test.cc). On
  // the power-capped H200 the overlap does not pay (bench/RESULTS.md, "Drafter"): off by
  // default.
  Status OptimizerStep(const kernels::AdamWConfig& cfg, float grad_clip);

  // Turns the overlapped optimizer on (CUDA only: the second stream is created here with
  // `stream_priority`, lower = more urgent) or off (joins first). On the CPU, `on` runs the
  // grouped update in order (the same arithmetic as the overlapped one), for tests.
  Status SetOptimizerOverlap(bool on, int stream_priority = 0);
  bool optimizer_overlap() const { return overlap_; }
  // The overlapped optimizer's stream (null when off or on the CPU); tests delay it.
  kernels::Stream optimizer_stream() const { return opt_stream_.get(); }
  // Later work on stream() waits for the last overlapped optimizer step (no host block; a
  // no-op when none is pending). ForwardBackward joins before its backward and params()
  // joins; call it before reading weights, m, v or the step counter another way.
  Status JoinOptimizer();

  // Opt-in profiling (CUDA only): from now on every ForwardBackward and OptimizerStep
  // records timing events between its stages; StageTimes() (host sync) returns the stages
  // of the last ForwardBackward and the OptimizerStep after it. Costs ~50 event records a
  // step, so leave it off for end-to-end timing.
  Status EnableStageTiming();
  Result<std::vector<DFlashStageTime>> StageTimes() const;

  kernels::TensorView loss() const { return loss_; }              // f32 [1]
  // u8 [R]: argmax == target (0 on rows without loss weight, where no LM head ran).
  kernels::TensorView correct() const { return correct_; }
  kernels::TensorView grad_stats() const { return grad_stats_; }  // f32 [4] (adamw_types.h)
  // DFlash2 (empty views for DFlash): the selector's strict top-k loss (unweighted by
  // alpha; the step minimises loss() + selector_loss_weight * selector_loss()) and i32 [2]
  // {covered rows: loss rows whose target is among the top-k candidates, correct rows:
  // covered rows where the teacher-forced selector ranks the target first}.
  kernels::TensorView selector_loss() const { return sel_loss_; }
  kernels::TensorView selector_stats() const { return sel_stats_; }
  // Final hidden state norm(x_L) of the last forward, bf16 [R, H] (tests, speculation).
  kernels::TensorView final_hidden() const { return final_hidden_; }

 private:
  // The checked config and options on `device`, nothing allocated (Create, WorkspaceBytes).
  static Result<std::unique_ptr<DFlashDrafter>> Blank(const DFlashConfig& config,
                                                      const DFlashDrafterOptions& options,
                                                      kernels::Device device);
  DFlashDrafter() = default;
  Status Carve(char* base);
  Status Forward(const DFlashTargetHead& head, std::span<const kernels::TensorView> ctx_layers,
                 float noise_std, uint64_t seed, uint64_t offset, bool want_grad);
  Status LayerForward(int l);
  // q/k/v from `in` (bf16 [R, H]), the block attention with the context, o_proj into `out`.
  Status AttentionForward(int l, const kernels::TensorView& in, const kernels::TensorView& out);
  // The DFlash2 layer (dflash2_layer.cc): the dynamic convolutions around attention and MLP.
  Status Layer2Forward(int l);
  Status Layer2Backward(int l);
  // The DFlash2 workspace (dflash2_selector_step.cc): the layers' extra activations, the
  // convolutions' backward scratch and the selector's buffers.
  void Carve2(WorkspaceCarver& c);
  // The DFlash2 candidate selector on the LM head's compact rows (dflash2_selector_step.cc).
  // Forward (after the LM head + CE): projection, scores, the strict top-k loss into
  // sel_loss_ / sel_stats_ and alpha * d loss / d scores. Backward (first in Backward, after
  // the optimizer join): the selector's parameter grads, its d hidden (through the hidden
  // projection and the unary logits) added to the CE's compact lm_dhidden_, then scattered
  // to d_tmp_ (which the DFlash path gathers at the end of LmHeadLoss).
  Status SelectorForward();
  Status SelectorBackward();
  // The fused LM head + CE on the rows with loss weight; loss_, correct_ and (want_grad)
  // d_tmp_ = d loss / d final_hidden_ over all R rows.
  Status LmHeadLoss(bool want_grad);
  // The layer's a.q_s, a.k_s, a.kc_s = rope(norm(projection)) (the forward; kept for the
  // backward).
  Status NormRopeQk(int l);
  Status Backward();
  // Records the end of `stage` (of `layer`) when stage timing is on; a no-op otherwise.
  Status Mark(const char* stage, int layer = -1);
  Status LayerBackward(int l);
  Status AttentionBackward(int l, const kernels::TensorView& d_out);
  Status QkvBackward(int l, const kernels::TensorView& in);
  Status ContextKvBackward(int l);
  // Makes stream() wait for update group `group` of a pending overlapped optimizer step.
  Status WaitUpdated(int group);
  // One AdamW launch per range on `s`; with `record`, updated_[group] after each group.
  Status UpdateRanges(std::span<const DFlashUpdateRange> ranges,
                      const kernels::AdamWConfig& cfg, kernels::Stream s, bool record);

  DFlashConfig config_;
  DFlashDrafterOptions options_;
  kernels::Device device_;
  kernels::Stream stream_ = nullptr;
  kernels::Allocator* alloc_ = nullptr;
  std::unique_ptr<kernels::GemmContext> gemm_;
  DFlashParams params_;
  kernels::Tensor workspace_;
  int64_t measured_bytes_ = 0;
  int64_t tokens_ = 0;  // T of the current plan

  // Views into workspace_ (full capacity; narrowed to tokens_ where T-sized).
  kernels::TensorView plan_i32_;  // i32 [2 NB + 6 R + Tmax], each table 16-byte aligned
  kernels::TensorView anchors_, doc_start_, block_ids_, block_pos_, ctx_pos_;
  // The R' = lm_rows_count_ rows with loss weight != 0 (SetPlan): lm_rows_ i32 [R] (first
  // R' used) their row ids, lm_slot_ i32 [R] a row's index among them or -1, lm_targets_
  // i32 and lm_weights_ f32 [R] (first R' used) their targets and weights.
  kernels::TensorView lm_rows_, lm_slot_, lm_targets_, lm_weights_;
  int64_t lm_rows_count_ = 0;
  // The LM head's compact [R', ...] inputs and outputs (capacity R): lm_hidden_ aliases
  // d_tmp2_, lm_dhidden_ d_res_ (both free between the last layer and the backward),
  // lm_correct_ u8 [R] is in the shared region's LM-head phase.
  kernels::TensorView lm_hidden_, lm_dhidden_, lm_correct_;
  kernels::TensorView concat_, ctx_pre_, ctx_, ctx_rstd_;
  std::vector<kernels::TensorView> x_;  // L+1 residual streams, bf16 [R, H]
  kernels::TensorView final_hidden_, final_rstd_;
  kernels::TensorView loss_, correct_, grad_stats_;
  kernels::TensorView ce_workspace_, rms_workspace_, norm_workspace_;
  std::vector<DFlashLayerActs> acts_;
  // Scratch shared by all layers. One region holds, at different times, the attention
  // phase (the attention-side gradients), the MLP phase (the
  // forward's SwiGLU output, which aliases the front of d_gu_, and d_gu_/d_act_; the
  // backward rebuilds the SwiGLU output over d_act_), the LM-head CE workspace and the final
  // context gradients; d_tmp_ holds xn and d_tmp2_ h1n while a layer needs them (forward
  // and backward; the forward writes layer l+1's xn at the end of layer l).
  kernels::TensorView act_s_;
  kernels::TensorView d_res_, d_tmp_, d_tmp2_, d_act_, d_gu_, d_attn_, d_q_, d_k_, d_v_,
      d_kc_f32_, d_vc_f32_, d_kc_, d_vc_, d_xn_f32_, d_ctx_f32_, d_ctx_, d_ctx_pre_;
  kernels::TensorView attn_delta_;  // f32 [R, hq]: the attention backward's scratch
  std::vector<kernels::CudaEvent> marks_;  // empty unless stage timing is on
  std::vector<std::pair<const char*, int>> mark_names_;
  size_t num_marks_ = 0;
  // The overlapped optimizer (SetOptimizerOverlap): its stream (CUDA), grads_ready_ on
  // stream_ after the grad norm, updated_[g] on opt_stream_ after update group g, opt_done_
  // after the whole step; update_pending_ until stream_ has waited for opt_done_.
  bool overlap_ = false;
  std::vector<DFlashUpdateRange> update_ranges_;
  kernels::CudaStream opt_stream_;
  kernels::CudaEvent grads_ready_, opt_done_;
  std::vector<kernels::CudaEvent> updated_;
  bool update_pending_ = false;
  Status join_error_;  // a failed join in params(), returned by the next step
  kernels::TensorView head_lm_;  // the LM head of the current step
  const kernels::Fp8LmHead* head_lm_fp8_ = nullptr;  // its FP8 form (lm_head_fp8)
  kernels::TensorView concat_in_;
  // DFlash2 (dflash2_selector_step.cc). lm_prev_ i32 [R] (first R' used): each loss row's
  // teacher-forced previous token (the anchor's for slot 1). Selector buffers over the R'
  // compact rows (capacity R): candidate ids i32 [R, k] and transformed logits f32 [R, k]
  // from the LM head, the projection f32 [R, r], scores and d scores f32 [R, k], d proj
  // bf16 [R, r]. Conv backward scratch: d2_dyn_ bf16 [R, 2*K*G], d2_a_/d2_b_ bf16 [R, H],
  // d2_f32_ f32 [R, H], conv_ws_ (CUDA's deterministic dbase partials).
  kernels::TensorView lm_prev_;
  kernels::TensorView sel_ids_, sel_vals_, sel_proj_, sel_scores_, sel_dscores_, sel_dproj_;
  kernels::TensorView sel_loss_, sel_stats_;
  kernels::TensorView d2_dyn_, d2_a_, d2_b_, d2_f32_, conv_ws_;
};

// Cosine learning rate with linear warmup: lr * (s+1)/warmup for s < warmup, then
// min_lr + (lr - min_lr) * (1 + cos(pi * progress)) / 2 over the remaining steps.
float DFlashCosineLr(int64_t step, int64_t total_steps, int64_t warmup_steps, float lr,
                     float min_lr);

}  // namespace tandem::models
