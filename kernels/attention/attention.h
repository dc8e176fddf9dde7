// Attention for tandem: the target's causal attention over packed variable-length documents
// (forward only), and the DFlash drafter's block attention (forward and backward).
//
// Layouts are packed by token, heads interleaved: Q [T, hq, d], K/V [T, hk, d], O [T, hq, d],
// LSE [T, hq] fp32 (natural-log log-sum-exp of the scaled scores). GQA: hq is a multiple of
// hk and query head h reads KV head h / (hq / hk). Every op has a CPU reference
// (`...Cpu`, host tensors, fp32 math on bf16 inputs) with the same arguments as its CUDA
// version (device tensors, runs on `stream`).
//
// Thread-safety: the free functions are reentrant. A CausalVarlenAttention object is
// thread-compatible (one caller at a time; it caches plans and owns a workspace).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"
#include "runtime/core/status.h"

namespace tandem::kernels {

// ---------------------------------------------------------------------------------------
// Target: causal attention inside each document of a packed batch.
//
// cu_seqlens: i32 [docs+1], cu_seqlens[0] = 0, cu_seqlens[docs] = T, non-decreasing;
// document i is tokens [cu_seqlens[i], cu_seqlens[i+1]). Token t of document i attends to
// tokens [cu_seqlens[i], t]. max_seqlen >= the longest document (host value; it keys the
// plan cache). scale 0 means 1/sqrt(d). lse may be empty (not written).
// ---------------------------------------------------------------------------------------

// CPU reference: all tensors on the host.
Status CausalVarlenAttentionForwardCpu(const TensorView& q,           // bf16 [T, hq, d]
                                       const TensorView& k,           // bf16 [T, hk, d]
                                       const TensorView& v,           // bf16 [T, hk, d]
                                       const TensorView& cu_seqlens,  // i32 [docs+1]
                                       int max_seqlen, float scale,
                                       TensorView out,  // bf16 [T, hq, d]
                                       TensorView lse,  // f32 [T, hq] or empty
                                       Stream stream = nullptr);

enum class AttentionBackend : uint8_t {
  kAuto,      // cuDNN fused SDPA; the own fallback kernel where cuDNN has no engine
  kCudnn,     // cuDNN only; an error where it has no engine
  kFallback,  // the own (simple, slower) CUDA kernel
};

// CUDA version. Owns a cuDNN handle, a plan cache keyed by (docs, max_seqlen rounded up to
// a power of two >= 64, hq, hk, d, lse wanted) and a device workspace that grows on demand
// (the only allocations; steady-state calls allocate nothing and never sync the host).
class CausalVarlenAttention {
 public:
  // REQUIRES: a CUDA build; `device` is the ordinal all tensors live on.
  static Result<std::unique_ptr<CausalVarlenAttention>> Create(
      int device, AttentionBackend backend = AttentionBackend::kAuto);
  virtual ~CausalVarlenAttention() = default;

  // Same contract as CausalVarlenAttentionForwardCpu; tensors (cu_seqlens too) on the device.
  virtual Status Forward(const TensorView& q, const TensorView& k, const TensorView& v,
                         const TensorView& cu_seqlens, int max_seqlen, float scale,
                         TensorView out, TensorView lse, Stream stream) = 0;

  // Which backend the last Forward used ("cudnn" or "fallback").
  virtual const char* last_backend() const = 0;
};

// ---------------------------------------------------------------------------------------
// DFlash block attention (drafter).
//
// NB blocks of kBlockSize queries; block b has anchor a_b (a token index of the packed
// batch) inside the document starting at doc_start[b]. Query slot i of block b sits at
// position p = a_b + i and attends to
//   * context keys Kctx[j] for j in [lo_bi, a_b), lo_bi = max(doc_start[b], p - (window - 1))
//     (window == 0: lo_bi = doc_start[b]);
//   * block keys Kblk[b*16 + j] (position a_b + j) for j >= i - (window - 1) when window > 0,
//     all j otherwise; causal_in_block adds j <= i.
// No other block is visible. Requires doc_start[b] <= a_b <= T.
//
// The window is the serving rule: a window of W keys, the query's own position included,
// per query position. SGLang serves sliding drafter layers causal with window_left =
// sliding_window - 1 (python/sglang/srt/speculative/dflash_utils.py,
// get_dflash_attention_sliding_window_size; models/dflash.py, _get_dflash_layer_attention_params),
// and SpecForge trains with the same per-slot bound, also on the block's own keys
// (specforge/modeling/draft/dflash_mask.py, create_dflash_block_mask).
// ---------------------------------------------------------------------------------------
inline constexpr int kDFlashBlockSize = 16;

struct DFlashAttentionConfig {
  int window = 0;                // 0: the whole document prefix (full-attention layer)
  bool causal_in_block = false;  // true for sliding-window layers
  float scale = 0.0f;            // 0: 1/sqrt(d)
};

struct DFlashAttentionInputs {
  TensorView q_blk;      // bf16 [NB*16, hq, d]
  TensorView k_blk;      // bf16 [NB*16, hk, d]
  TensorView v_blk;      // bf16 [NB*16, hk, d]
  TensorView k_ctx;      // bf16 [T, hk, d]
  TensorView v_ctx;      // bf16 [T, hk, d]
  TensorView anchors;    // i32 [NB]
  TensorView doc_start;  // i32 [NB]
};

struct DFlashAttentionGrads {
  TensorView dq_blk;  // bf16 [NB*16, hq, d]
  TensorView dk_blk;  // bf16 [NB*16, hk, d]
  TensorView dv_blk;  // bf16 [NB*16, hk, d]
  // fp32 because several blocks read the same context key and their contributions are summed
  // (without `delta` below the CUDA kernel zero-fills them and adds with fp32 atomics, so the
  // last bits may vary between runs).
  TensorView dk_ctx;  // f32 [T, hk, d], overwritten
  TensorView dv_ctx;  // f32 [T, hk, d], overwritten
  // Optional f32 [NB*16, hq] scratch for the CUDA tensor-core path: with it, the context
  // dK/dV come from a second, key-major kernel that writes each row once in a fixed order
  // (faster, no atomics, bitwise deterministic); without it, one fused kernel with atomics.
  // Ignored by the CPU and SIMT versions.
  TensorView delta;
};

// Forward: out bf16 [NB*16, hq, d], lse f32 [NB*16, hq] (needed by the backward).
Status DFlashAttentionForward(const DFlashAttentionInputs& in, const DFlashAttentionConfig& cfg,
                              TensorView out, TensorView lse, Stream stream);
Status DFlashAttentionForwardCpu(const DFlashAttentionInputs& in,
                                 const DFlashAttentionConfig& cfg, TensorView out,
                                 TensorView lse, Stream stream = nullptr);

// Backward from d_out bf16 [NB*16, hq, d], given the forward's out and lse.
Status DFlashAttentionBackward(const DFlashAttentionInputs& in, const DFlashAttentionConfig& cfg,
                               const TensorView& out, const TensorView& lse,
                               const TensorView& d_out, const DFlashAttentionGrads& grads,
                               Stream stream);
Status DFlashAttentionBackwardCpu(const DFlashAttentionInputs& in,
                                  const DFlashAttentionConfig& cfg, const TensorView& out,
                                  const TensorView& lse, const TensorView& d_out,
                                  const DFlashAttentionGrads& grads, Stream stream = nullptr);

// Shared argument checks (shapes, dtypes, contiguity); used by the CPU and CUDA versions.
struct DFlashDims {
  int64_t nb = 0, t = 0, hq = 0, hk = 0, d = 0;
};
Result<DFlashDims> CheckDFlashInputs(const char* op, const DFlashAttentionInputs& in);
struct VarlenDims {
  int64_t t = 0, docs = 0, hq = 0, hk = 0, d = 0;
};
Result<VarlenDims> CheckVarlenInputs(const char* op, const TensorView& q, const TensorView& k,
                                     const TensorView& v, const TensorView& cu_seqlens,
                                     const TensorView& out, const TensorView& lse);

}  // namespace tandem::kernels
