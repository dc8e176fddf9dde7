// The frozen Qwen3.5 / Qwen3.6 dense hybrid target of a DFlash job: the text model's forward
// over a packed batch of documents, writing the outputs of chosen decoder layers into caller
// buffers. Same contract as models/qwen3's Qwen3Target: layer i's output is the residual
// stream after decoder layer i (before the final norm), HF `hidden_states[i + 1]`; positions
// restart in every document; no LM head; no layer after the last captured one runs.
//
// Per layer: zero-centred RMSNorm `(1 + w)` -> token mixer added to the residual ->
// zero-centred RMSNorm -> gate|up GEMM -> SwiGLU -> down_proj added to the residual. In the
// mixture-of-experts variant (config.moe, Qwen3.6-35B-A3B) the second norm feeds a MoE block
// instead (kernels/moe/moe_layer.h: fp32 router, softmax, top-k renormalised, the experts'
// SwiGLU MLPs, plus the shared expert times sigmoid of its gate); on CUDA each MoE layer
// waits once for the stream (its expert offsets go to the host for the per-expert GEMM
// loop). With precision fp8 a MoE block's routed and shared experts run in e4m3 (kernels/moe/
// experts_fp8.h); its router and shared-expert gate stay bf16.
// Token mixers:
//   * Gated DeltaNet (linear_attention): one GEMM for qkv | z | b | a; causal depthwise
//     conv1d + SiLU over qkv, restarting at every document; beta = sigmoid(b),
//     g = -exp(A_log) softplus(a + dt_bias); the gated delta rule (q, k L2-normalised, state
//     restarting at every document); gated RMSNorm rmsnorm(o) * w * silu(z) per head;
//     out_proj.
//   * gated attention (full_attention): q_proj gives per head a query and a gate; q_norm and
//     k_norm (zero-centred) per head; RoPE on the first rotary_dim dims; causal GQA attention
//     inside each document (scale head_dim^-1/2); times sigmoid(gate); o_proj.
//
// Device: the weights' device (CPU references or CUDA ops, chosen by the tensors). All
// activations live in one workspace sized at Create for `max_tokens`; a Forward allocates
// nothing, and on CUDA it only enqueues work on the stream given at Create (max_seqlen must
// then be given). The CUDA path runs the chunked tensor-core gated delta rule
// (gated_delta_rule_chunked.h) when the linear heads are 128 / 128 (the Qwen3.5 / 3.6
// shapes), else the recurrent kernel; qwen3_5_target_gpu_test checks it.
//
// Thread-safety: thread-compatible: one Forward at a time (the workspace is shared).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/core/memory.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/gemm.h"
#include "kernels/moe/moe_layer.h"
#include "models/io/target_precision.h"
#include "models/qwen3_5/qwen3_5_cache.h"
#include "models/qwen3_5/qwen3_5_fp8.h"
#include "models/qwen3_5/qwen3_5_weights.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct Qwen35TargetOptions {
  int64_t max_tokens = 16384;        // the largest T a Forward takes; sizes the workspace
  kernels::Stream stream = nullptr;  // every Forward runs on it (CUDA); ignored on the CPU
  // fp8: Create quantizes the projections to block-scaled e4m3 (Qwen35Fp8Projections) and
  // frees their bf16 form; each GEMM input is then quantized (1x128 groups) by the kernel
  // that produces it: the zero-centred norms, SwiGLU; the gated norm's and the attention
  // gate's outputs by one quantize pass each. The conv, the delta rule, attention, norms and
  // the residual stream stay bf16 / fp32, and so does Extend's LM head. CUDA needs sm_90+;
  // on the CPU the FP8 reference GEMM runs (tests).
  TargetPrecision precision = TargetPrecision::kBf16;
};

// A packed batch on the model's device (the same fields as the Qwen3 target's PackedBatch).
struct HybridBatch {
  kernels::TensorView input_ids;     // i32 [T]
  kernels::TensorView position_ids;  // i32 [T], restarting at 0 in every document
  kernels::TensorView cu_seqlens;    // i32 [docs+1], 0 .. T: document boundaries
  int max_seqlen = 0;                // >= the longest document; 0: computed (CPU only)
};

struct HybridCapture {
  int layer = 0;            // DFlash layer id in [0, num_hidden_layers)
  kernels::TensorView out;  // bf16 [T, H], contiguous, on the model's device
};

class Qwen35Target {
 public:
  // With precision fp8 and `weights` holding their bf16 projections, Create quantizes them
  // all at once and frees them (peak: bf16 + e4m3); Load and Random quantize layer by layer
  // instead (peak: e4m3 + one bf16 layer) and pass the result as `fp8`.
  static Result<std::unique_ptr<Qwen35Target>> Create(Qwen35Weights weights,
                                                      const Qwen35TargetOptions& options);
  static Result<std::unique_ptr<Qwen35Target>> Create(Qwen35Weights weights,
                                                      Qwen35Fp8Projections fp8,
                                                      const Qwen35TargetOptions& options);
  // Reads `dir`/config.json and the checkpoint beside it into memory from `alloc`, then
  // Create (which allocates the workspace there too). REQUIRES: `alloc` outlives the target.
  static Result<std::unique_ptr<Qwen35Target>> Load(const std::string& dir,
                                                    kernels::Allocator& alloc,
                                                    const Qwen35TargetOptions& options);
  // Qwen35Weights::Random's weights (the same values in either precision), then Create.
  static Result<std::unique_ptr<Qwen35Target>> Random(const Qwen35Config& config,
                                                      kernels::Allocator& alloc, uint64_t seed,
                                                      const Qwen35TargetOptions& options,
                                                      float scale = 1.f);
  ~Qwen35Target();
  Qwen35Target(const Qwen35Target&) = delete;
  Qwen35Target& operator=(const Qwen35Target&) = delete;

  // Runs the layers up to the last captured one and writes each capture. Capture layer ids
  // must be distinct and in range. InvalidArgument for bad shapes, devices, documents or
  // layer ids, checked before any work.
  Status Forward(const HybridBatch& batch, std::span<const HybridCapture> captures);

  // Decoding with a cache (qwen3_5_target_cache.cc; the cache and its rollback scheme:
  // qwen3_5_cache.h): appends `tokens` (host ids, B = tokens.size() in [1, max_tokens]) at
  // positions cache.length() .. + B - 1, every layer continuing from the cached state, writes
  // each capture (bf16 [B, H]) and `logits` (bf16 / f32 [B, V] after the final norm and the
  // LM head; may be empty), and grows the cache by B. Prefill is an Extend of an empty cache;
  // verifying a block of drafts is an Extend of at most cache.max_block() tokens followed by
  // cache.Crop to the accepted length. The cache must fit this model and have room for B
  // more tokens; token ids in [0, vocab). InvalidArgument (checked before any work)
  // otherwise. Asynchronous on CUDA as Forward; qwen3_5_cache_gpu_test checks the CUDA path
  // against the CPU reference.
  Status Extend(Qwen35Cache& cache, std::span<const int32_t> tokens,
                std::span<const HybridCapture> captures, kernels::TensorView logits = {});

  const Qwen35Config& config() const { return weights_.config(); }
  const Qwen35Weights& weights() const { return weights_; }
  kernels::Device device() const { return weights_.device(); }
  int64_t max_tokens() const { return options_.max_tokens; }
  // The activation workspace and, for a MoE config, the MoE block's buffers.
  int64_t workspace_bytes() const {
    return workspace_.nbytes() + (moe_ != nullptr ? moe_->workspace_bytes() : 0);
  }
  // The MoE block and its last routing (null for a dense config): after a Forward whose last
  // layer was L, moe()->topk_ids(T) holds layer L's expert choices.
  const kernels::MoeLayer* moe() const { return moe_.get(); }
  // The MoE block shape of `c` (REQUIRES c.moe).
  static kernels::MoeLayerShape MoeShape(const Qwen35Config& c, bool fp8 = false);
  TargetPrecision precision() const { return options_.precision; }
  // The e4m3 projections (precision fp8; else empty) and their bytes.
  const Qwen35Fp8Projections& fp8_projections() const { return fp8_; }
  // What Create allocates as workspace for `max_tokens`, from the config alone (`on_cuda`:
  // with the chunked gated delta rule's scratch, as on a GPU; fp8: with the e4m3 buffer;
  // a MoE config: with the MoE block's buffers), == workspace_bytes().
  static int64_t WorkspaceBytes(const Qwen35Config& c, int64_t max_tokens, bool on_cuda,
                                TargetPrecision precision = TargetPrecision::kBf16);

 private:
  // Base pointers of the activation slots in `workspace_`, each sized for max_tokens rows.
  enum Slot {
    kHidden,
    kNormed,
    kProj,
    kConv,
    kGate,
    kBeta,
    kCore,
    kGated,  // bf16 only: with fp8 the gated norm writes e4m3 to kAct8 (empty)
    kQ,
    kKRaw,
    kK,
    kV,
    kAttn,
    kGateUp,
    kAct,    // bf16 only: with fp8 SwiGLU writes e4m3 to kAct8 (empty)
    kRule,  // the chunked gated delta rule's workspace (CUDA with 128 / 128 heads; else empty)
    kAct8,  // fp8: the e4m3 GEMM input (scales, then codes; else empty)
    kNumSlots
  };
  // A GEMM input: bf16 rows, or with precision fp8 their e4m3 form (in the kAct8 slot).
  struct LinearInput {
    kernels::TensorView bf16;         // [t, K]
    kernels::Fp8GroupActivation fp8;  // [Fp8PaddedRows(t), K]
  };

  Qwen35Target(Qwen35Weights weights, const Qwen35TargetOptions& options);
  Status AllocateWorkspace();
  bool UsesChunkedRule() const;  // CUDA and linear heads the chunked kernel takes
  bool fp8() const { return options_.precision == TargetPrecision::kFp8; }
  // The chunked rule's workspace at max_tokens, per token.
  static int64_t ChunkedRuleBytesPerToken(const Qwen35Config& c, int64_t max_tokens);
  // The widest GEMM input (K) and the kAct8 slot's bytes per row.
  static int64_t MaxGemmK(const Qwen35Config& c);
  // Bytes per row of each slot, and the slots' layout (offsets may be null) and total. Every
  // slot has Fp8PaddedRows(max_tokens) rows (an FP8 GEMM writes its output's padding rows).
  static void SlotBytesPerToken(const Qwen35Config& c, int64_t max_tokens, bool chunked_rule,
                                bool fp8, int64_t (&per_token)[kNumSlots]);
  static int64_t LayoutWorkspace(const Qwen35Config& c, int64_t max_tokens, bool chunked_rule,
                                 bool fp8, int64_t (*offsets)[kNumSlots]);
  // A contiguous [rows, cols] view of `slot` (bf16, or f32 for the gates).
  kernels::TensorView View(Slot slot, int64_t rows, int64_t cols) const;
  Status CheckForward(const HybridBatch& batch, std::span<const HybridCapture> captures,
                      int* max_seqlen) const;
  // The e4m3 input of t rows and k columns in the kAct8 slot.
  kernels::Fp8GroupActivation Act8(int64_t t, int64_t k) const;
  // The zero-centred RMSNorm (weight `w`) of the residual stream's first t rows as a GEMM
  // input: bf16 in the kNormed slot, or e4m3 straight from the norm.
  // bf16: the bf16 form even with fp8 (a MoE block's input).
  Result<LinearInput> NormedHidden(const kernels::TensorView& w, int64_t t, bool bf16 = false);
  // y = x W^T (+ y with beta 1: the residual add) with W's bf16 or e4m3 form; y is a
  // contiguous [t, N] view of a slot (an FP8 GEMM also writes its padding rows).
  Status Project(const LinearInput& x, const kernels::TensorView& w,
                 const kernels::Fp8BlockWeight& w8, const kernels::TensorView& y, float beta = 0.f);
  // Layer `i`'s e4m3 projections, or empty ones in bf16.
  const Qwen35Fp8Layer& Fp8Layer(int i) const;
  // Token mixers of layer `i` reading its normed input `x` and adding to the residual stream.
  // With `dec` (decoding), the conv and the delta rule continue from the cached state.
  Status LinearAttention(int i, const LinearInput& x, const HybridBatch& batch, int64_t t,
                         const Qwen35LinearDecode* dec = nullptr);
  // One attention layer's cache rows while extending: new keys/values go to rows
  // [past, past + T) and the attention reads rows [0, past + T).
  struct KvRows {
    kernels::TensorView k, v;  // bf16 [capacity, hk, d]
    int64_t past = 0;
  };
  Status FullAttention(int i, const LinearInput& x, const HybridBatch& batch, int64_t t,
                       int max_seqlen, const KvRows* kv = nullptr);
  // Layer `i`'s norm, mixer and MLP (`dec` / `kv`: Extend's cache rows for its type).
  Status Layer(int i, const HybridBatch& batch, int64_t t, int max_seqlen,
               const Qwen35LinearDecode* dec, const KvRows* kv);
  Status CheckExtend(const Qwen35Cache& cache, std::span<const int32_t> tokens,
                     std::span<const HybridCapture> captures,
                     const kernels::TensorView& logits) const;
  Status Mlp(int i, int64_t t);

  Qwen35Weights weights_;
  Qwen35TargetOptions options_;
  Qwen35Fp8Projections fp8_;  // precision fp8 only
  kernels::Tensor workspace_;  // u8: every activation
  char* slots_[kNumSlots] = {};
  int64_t slot_bytes_[kNumSlots] = {};  // bytes per token of each slot
  std::unique_ptr<kernels::GemmContext> gemm_;                 // CUDA only
  std::unique_ptr<kernels::CausalVarlenAttention> attention_;  // CUDA only
  std::unique_ptr<kernels::MoeLayer> moe_;                     // MoE configs only
};

}  // namespace tandem::models
