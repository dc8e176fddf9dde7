// The frozen target model of a DFlash job: a Qwen3 (or Llama-3) forward over a packed batch
// of documents that writes the outputs of chosen decoder layers into caller buffers.
//
// Layer ids follow the DFlash convention: layer i is the output of decoder layer i (the
// residual stream after it, before the final norm), i.e. HF `hidden_states[i + 1]`.
// Per layer: input RMSNorm -> q/k/v projections -> per-head q/k RMSNorm (Qwen3 only) ->
// RoPE at the position ids -> causal GQA attention inside each document -> o_proj added to
// the residual (fused as the GEMM's beta = 1) -> post-attention RMSNorm -> one GEMM for
// gate|up -> SwiGLU -> down_proj added to the residual. The forward stops after the last
// captured layer unless logits are asked for (final norm + LM head).
// Qwen3-MoE (config.moe): in the MoE layers the post-attention norm feeds a
// mixture-of-experts block instead (kernels/moe/moe_layer.h: fp32 router, top-k, experts,
// weighted combine added to the residual); the other layers keep the dense MLP.
//
// Device: the weights' device (CPU references or CUDA ops, chosen by the tensors). All
// activations live in one workspace sized at Create for `max_tokens` and reused layer to
// layer; on CUDA a Forward allocates nothing and never synchronises the host (it only
// enqueues work on the stream given at Create), except that each MoE layer waits once for
// the stream (its expert offsets go to the host for the per-expert GEMM loop).
//
// Precision: bf16 (default) or fp8. With fp8 every projection (q/k/v/o, gate|up, down) runs
// as a block-scaled e4m3 GEMM (weights quantized with 128x128 blocks layer by layer as Load
// and Random read them, or at Create from whole bf16 weights, the bf16 copies then
// released; activations quantized per token per 128 columns inside the RMSNorm and SwiGLU
// kernels that produce them, and in one extra pass over the attention output,
// which cuDNN writes in bf16). Embedding, norms, RoPE, attention, the residual stream and
// the LM head stay bf16/fp32. fp8 on CUDA needs sm_90 or newer (InvalidArgument otherwise);
// on the CPU it runs the FP8 reference kernels. In a MoE layer the routed experts' GEMMs run
// in e4m3 (kernels/moe/experts_fp8.h) while the router stays bf16; Load and Random quantize
// a MoE layer's experts with its attention projections as the layer arrives (the load peaks
// at e4m3 + one bf16 layer, as for a dense model).
//
// Thread-safety: thread-compatible: one Forward at a time (the workspace is shared).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/gemm/gemm.h"
#include "kernels/core/memory.h"
#include "models/qwen3/qwen3_fp8.h"
#include "models/qwen3/qwen3_batch_kv_cache.h"
#include "models/qwen3/qwen3_kv_cache.h"
#include "models/qwen3/qwen3_weights.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct Qwen3TargetOptions {
  int64_t max_tokens = 16384;       // the largest T a Forward takes; sizes the workspace
  kernels::Stream stream = nullptr;  // every Forward runs on it (CUDA); ignored on the CPU
  TargetPrecision precision = TargetPrecision::kBf16;
};

// A packed batch on the model's device.
struct PackedBatch {
  kernels::TensorView input_ids;     // i32 [T]
  kernels::TensorView position_ids;  // i32 [T], restarting at 0 in every document
  kernels::TensorView cu_seqlens;    // i32 [docs+1], 0 .. T: document boundaries
  // The longest document (host value, so the forward needs no device read). 0 means
  // "compute it": allowed on the CPU only.
  int max_seqlen = 0;
};

// Where to write one captured layer.
struct LayerCapture {
  int layer = 0;            // DFlash layer id in [0, num_hidden_layers)
  kernels::TensorView out;  // bf16 [T, H], contiguous, on the model's device
};

class Qwen3Target {
 public:
  // Takes the weights and allocates the workspace (and, on CUDA, the cuBLASLt and cuDNN
  // contexts) on the weights' device, from the allocator they came from.
  static Result<std::unique_ptr<Qwen3Target>> Create(Qwen3Weights weights,
                                                     const Qwen3TargetOptions& options);
  // Same, for weights loaded without projections (Qwen3Weights with a ProjectionSink) whose
  // FP8 form `fp8` was filled layer by layer; REQUIRES options.precision == kFp8.
  static Result<std::unique_ptr<Qwen3Target>> Create(Qwen3Weights weights,
                                                     Qwen3Fp8Projections fp8,
                                                     const Qwen3TargetOptions& options);
  // Reads `dir`/config.json and the checkpoint beside it (model.safetensors or a sharded
  // index) into memory from `alloc`, then Create. With fp8 the projections (and a MoE
  // layer's routed experts) are quantized layer by layer as they are read (the device never
  // holds all of them in bf16), after the
  // FP8 device check, so a GPU below sm_90 is refused before anything is read.
  // REQUIRES: `alloc` outlives the target.
  static Result<std::unique_ptr<Qwen3Target>> Load(const std::string& dir,
                                                   kernels::Allocator& alloc,
                                                   const Qwen3TargetOptions& options);
  // Random weights (Qwen3Weights::Random with `seed`), quantized layer by layer with fp8.
  // REQUIRES: `alloc` outlives the target.
  static Result<std::unique_ptr<Qwen3Target>> Random(const TransformerConfig& config,
                                                     kernels::Allocator& alloc, uint64_t seed,
                                                     const Qwen3TargetOptions& options);
  ~Qwen3Target();
  Qwen3Target(const Qwen3Target&) = delete;
  Qwen3Target& operator=(const Qwen3Target&) = delete;

  // Runs the forward for `batch` (T <= max_tokens tokens), writing each capture's layer
  // output; `logits` (bf16 or f32 [T, V], may be empty) gets the LM head output. Capture
  // layer ids must be distinct. Asynchronous on CUDA: outputs are ready once the stream
  // reaches this point. InvalidArgument for bad shapes, devices or layer ids (checked
  // before anything is enqueued).
  Status Forward(const PackedBatch& batch, std::span<const LayerCapture> captures,
                 kernels::TensorView logits = {});

  // Decoding with a KV cache (qwen3_target_cache.cc): appends `tokens` (host ids, B =
  // tokens.size() in [1, max_tokens]) at positions cache.length() .. + B - 1, attends over
  // the whole cache, writes each capture (bf16 [B, H]) and `logits` ([B, V], may be empty),
  // and grows the cache by B. Prefill is an Extend of an empty cache; verifying a block of
  // drafts is an Extend followed by cache.Crop to the accepted length. In the target's
  // precision (fp8: the e4m3 GEMMs of Forward, activations quantized per token, so a row's
  // result does not depend on the rest of the batch); the cache on the model's device, of
  // this model's shape and with room for B more tokens; token ids in [0, vocab).
  // Asynchronous on CUDA as Forward.
  Status Extend(Qwen3KvCache& cache, std::span<const int32_t> tokens,
                std::span<const LayerCapture> captures, kernels::TensorView logits = {});

  // Batched decoding (qwen3_target_batch.cc): one forward over several sequences of
  // `cache`, each part's tokens appended to its own sequence (rows packed in the order of
  // `parts`, each sequence at most once, 1 <= total rows <= max_tokens). The projections,
  // norms and MLP run once over all rows (where batching pays: the weights are read once);
  // the attention runs per sequence over its own cache. Captures ([total, H]) and logits
  // ([total, V], may be empty) are packed the same way. Row r's results equal those of an
  // Extend of its sequence alone whenever the GEMMs compute rows independently (the CPU
  // reference does). Same limits and errors as Extend, per part.
  Status ExtendBatch(Qwen3BatchKvCache& cache, std::span<const BatchExtendPart> parts,
                     std::span<const LayerCapture> captures, kernels::TensorView logits = {});

  const TransformerConfig& config() const { return weights_.config(); }
  const Qwen3Weights& weights() const { return weights_; }
  kernels::Device device() const { return weights_.device(); }
  int64_t max_tokens() const { return options_.max_tokens; }
  int64_t workspace_bytes() const {  // (an unallocated Tensor reports one element's bytes)
    return workspace_.nbytes() + (fp8_workspace_.data() != nullptr ? fp8_workspace_.nbytes() : 0) +
           (moe_ != nullptr ? moe_->workspace_bytes() : 0);
  }
  // What Create allocates as workspace for `max_tokens`, from the config alone: the bf16
  // activation slots, the MoE block's buffers and, with fp8, the e4m3 input buffer (workspace_bytes() of such a target;
  // the validation's memory bound).
  static int64_t WorkspaceBytes(const TransformerConfig& c, int64_t max_tokens,
                                TargetPrecision precision = TargetPrecision::kBf16);
  TargetPrecision precision() const { return options_.precision; }
  // The e4m3 projections (precision fp8; else empty).
  const Qwen3Fp8Projections& fp8_projections() const { return fp8_; }
  // The MoE block's buffers and last routing (null for a dense model): after a Forward that
  // ran layer L last among MoE layers, moe()->topk_ids(T) holds that layer's choices.
  const kernels::MoeLayer* moe() const { return moe_.get(); }
  // The MoE block shape of `c` at `precision` (REQUIRES c.moe).
  static kernels::MoeLayerShape MoeShape(const TransformerConfig& c,
                                         TargetPrecision precision = TargetPrecision::kBf16);
  // Bytes of parameters on the device: the weights plus, with fp8, the e4m3 projections.
  int64_t weight_bytes() const { return weights_.nbytes() + fp8_.nbytes(); }

 private:
  // Activation views over `workspace_`, each with max_tokens rows.
  struct Activations {
    kernels::TensorView hidden;   // bf16 [Tmax, H]: the residual stream
    kernels::TensorView normed;   // bf16 [Tmax, H]
    kernels::TensorView q_raw;    // bf16 [Tmax, hq*d]
    kernels::TensorView k_raw;    // bf16 [Tmax, hk*d]
    kernels::TensorView q;        // bf16 [Tmax, hq*d] after q_norm + RoPE
    kernels::TensorView k;        // bf16 [Tmax, hk*d] after k_norm + RoPE
    kernels::TensorView v;        // bf16 [Tmax, hk*d]
    kernels::TensorView attn;     // bf16 [Tmax, hq*d]
    kernels::TensorView gate_up;  // bf16 [Tmax, 2I]
    kernels::TensorView act;      // bf16 [Tmax, I]
  };

  Qwen3Target(Qwen3Weights weights, const Qwen3TargetOptions& options);
  // `fp8`: empty, or the projections' FP8 form when `weights` hold none.
  static Result<std::unique_ptr<Qwen3Target>> CreateImpl(Qwen3Weights weights,
                                                         const Qwen3TargetOptions& options,
                                                         Qwen3Fp8Projections fp8);
  Status AllocateWorkspace();
  // Byte offsets of the Activations slots (in member order) for max_tokens rows; returns the
  // total.
  static int64_t ActivationLayout(const TransformerConfig& c, int64_t max_tokens,
                                  int64_t* offsets, int64_t* cols);
  static constexpr int kActivationSlots = 10;
  // The fp8 input buffer for max_tokens rows: codes (`code_bytes`, aligned) then scales;
  // returns the total (qwen3_target_fp8.cc).
  static int64_t Fp8InputLayout(const TransformerConfig& c, int64_t max_tokens,
                                int64_t* code_bytes, int64_t* scales);
  Status CheckForward(const PackedBatch& batch, std::span<const LayerCapture> captures,
                      const kernels::TensorView& logits, int* max_seqlen) const;
  // One sequence's cache rows in one layer while extending: batch rows [row, row + rows)
  // are its new tokens; their keys/values go to cache rows [past, past + rows) and their
  // attention reads cache rows [0, past + rows).
  struct KvSlot {
    kernels::TensorView k, v;  // bf16 [capacity, hk, d]
    int64_t past = 0;
    int64_t row = 0, rows = 0;
  };
  Status CheckExtend(const Qwen3KvCache& cache, std::span<const int32_t> tokens,
                     std::span<const LayerCapture> captures,
                     const kernels::TensorView& logits) const;
  // The captures ([rows, H]) and logits ([rows, V], may be empty) of an Extend.
  Status CheckExtendOutputs(int64_t rows, std::span<const LayerCapture> captures,
                            const kernels::TensorView& logits) const;
  // A sequence's rows in an Extend: batch rows [row, row + rows) append to `cache`.
  struct SeqRows {
    Qwen3KvCache* cache = nullptr;
    int64_t row = 0, rows = 0;
  };
  // Embedding, every layer (the attention of each sequence over its cache, captures copied
  // as they pass), the caches grown, and the LM head, for `batch` of `t` rows whose ids and
  // positions are already staged.
  Status ExtendRows(const PackedBatch& batch, int64_t t, std::span<const SeqRows> seqs,
                    std::span<const LayerCapture> captures, kernels::TensorView logits);
  // With `kv`, the attention runs over the caches instead of inside the batch's documents.
  Status Layer(const Qwen3LayerWeights& w, const PackedBatch& batch, int64_t tokens,
               int max_seqlen, std::span<const KvSlot> kv = {});
  // fp8: unless fp8_ is already filled, quantizes the projections and releases their bf16
  // copies; allocates the e4m3 activation buffer (qwen3_target_fp8.cc).
  Status PrepareFp8();
  Status LayerFp8(size_t index, const PackedBatch& batch, int64_t tokens, int max_seqlen,
                  std::span<const KvSlot> kv = {});
  Status AttentionBlockRope(const Qwen3LayerWeights& w, const PackedBatch& batch, int64_t t,
                            int max_seqlen, std::span<const KvSlot> kv = {});
  Status Attention(const kernels::TensorView& q, const kernels::TensorView& k,
                   const kernels::TensorView& v, const kernels::TensorView& cu_seqlens,
                   int max_seqlen, const kernels::TensorView& out);

  Qwen3Weights weights_;
  Qwen3TargetOptions options_;
  kernels::Tensor workspace_;  // u8: every activation
  Activations act_;
  std::unique_ptr<kernels::GemmContext> gemm_;                   // CUDA only
  std::unique_ptr<kernels::CausalVarlenAttention> attention_;    // CUDA only
  std::unique_ptr<kernels::MoeLayer> moe_;                       // MoE configs only
  Qwen3Fp8Projections fp8_;                                      // fp8 only
  kernels::Tensor fp8_workspace_;                                // fp8 only: u8
  kernels::Fp8GroupActivation act8_;  // f8 [Tp, max(H, hq*d, I)] as flat storage + scales
};

}  // namespace tandem::models
