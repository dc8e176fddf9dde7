// Causal attention of a few new queries over a KV cache: the target's verify step in
// speculative decoding (and, on the CPU, its prefill with an empty past; Qwen3Target sends a
// CUDA prefill through the packed causal kernel instead).
//
// B new tokens sit at the end of a cache of P = past + B keys: query i (position past + i)
// attends to keys [0, past + i] (causal, aligned bottom-right). Layouts as attention.h:
// Q [B, hq, d], K/V [P, hk, d] (the cache rows written so far, new keys included),
// O [B, hq, d]; GQA with hq a multiple of hk. scale 0 means 1/sqrt(d).
// The CPU reference does fp32 math on bf16 inputs in the same order as
// CausalVarlenAttentionForwardCpu, so a cached step reproduces a full prefill exactly.
//
// Thread-safety: reentrant.
#pragma once

#include "kernels/core/tensor.h"
#include "runtime/core/status.h"

namespace tandem::kernels {

// CPU reference: all tensors on the host.
Status CachedCausalAttentionForwardCpu(const TensorView& q,  // bf16 [B, hq, d]
                                       const TensorView& k,  // bf16 [P, hk, d], P >= B
                                       const TensorView& v,  // bf16 [P, hk, d]
                                       float scale,
                                       TensorView out,       // bf16 [B, hq, d]
                                       Stream stream = nullptr);

// Dispatches on the tensors' device (CUDA: one block of threads per (query, head), an
// online softmax over the keys; tensors on the device, work queued on `stream`).
Status CachedCausalAttentionForward(const TensorView& q, const TensorView& k,
                                    const TensorView& v, float scale, TensorView out,
                                    Stream stream);

// Shape, dtype and contiguity checks shared by both versions.
struct CachedAttentionDims {
  int64_t b = 0, p = 0, hq = 0, hk = 0, d = 0;
};
Result<CachedAttentionDims> CheckCachedAttention(const char* op, const TensorView& q,
                                                 const TensorView& k, const TensorView& v,
                                                 const TensorView& out);

}  // namespace tandem::kernels
