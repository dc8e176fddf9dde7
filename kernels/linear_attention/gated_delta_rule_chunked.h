// The chunked form of the gated delta rule (gated_delta_rule.h's recurrence, the same
// arguments and result): per document, chunks of C tokens; inside a chunk, with
// gc = cumsum(g) (inclusive), the WY / UT transform
//   A[i,j] = beta_i (k_i . k_j) exp(gc_i - gc_j)  (j < i),   T = (I + A)^-1
//   w = T (beta exp(gc) k),   u = T (beta v)
// turns the token-by-token recurrence into matrix products; then one sequential pass over
// the chunks carries the state S [dk, dv]:
//   v' = u - w S
//   o  = exp(gc) (q S) + (q k^T * exp(gc_i - gc_j), j <= i) v'
//   S  = exp(gc_C) S + (k exp(gc_C - gc))^T v'
// (the algebra of fla's chunk_gated_delta_rule, re-derived from the recurrence).
//
// CPU: the same chunked algebra in float64 (any chunk size), the twin of the CUDA kernel,
// checked against the recurrent reference. CUDA (gated_delta_rule_chunked.cu): chunk 64,
// key and value head dims 128, bf16 tensor-core products (mma.sync) with fp32 accumulation
// and an fp32 state, in two launches: one block per chunk and key head (and up to three of
// its value heads) for q's and k's inverse norms, T diag(beta) and the masked q k^T
// (chunk-parallel; K K^T and Q K^T shared by the value heads); one block per document, value
// head and 64-wide half of dv for the chunks in order (the state in registers), which applies
// T diag(beta) to v - exp(gc) k S instead of forming w and u. The workspace holds per token
// and value head one row of T diag(beta) and of the masked q k^T (bf16 64 each) and gc (f32),
// and per token and key head the two norms (f32):
// see GatedDeltaRuleChunkedWorkspaceBytes. Nothing is allocated; the launches are
// asynchronous.
// Thread-safety: stateless.
#pragma once

#include <cstdint>

#include "kernels/linear_attention/gated_delta_rule.h"

namespace tandem::kernels {

inline constexpr int64_t kGatedDeltaRuleChunk = 64;      // the CUDA kernel's chunk
inline constexpr int64_t kGatedDeltaRuleChunkedDim = 128;  // its dk and dv

// Bytes of the CUDA workspace for `tokens` rows of `key_heads` / `value_heads` heads of dk / dv.
int64_t GatedDeltaRuleChunkedWorkspaceBytes(int64_t tokens, int64_t key_heads,
                                            int64_t value_heads, int64_t key_dim,
                                            int64_t value_dim);
// True when the CUDA chunked kernel takes these head dims.
inline bool GatedDeltaRuleChunkedSupports(int64_t key_dim, int64_t value_dim) {
  return key_dim == kGatedDeltaRuleChunkedDim && value_dim == kGatedDeltaRuleChunkedDim;
}

namespace cpu {
// float64 chunked twin; `chunk` >= 1 tokens per chunk. `workspace` is not used.
Status GatedDeltaRuleChunkedForward(const GatedDeltaRuleArgs& args, int64_t chunk, Stream s);
}  // namespace cpu
namespace cuda {
// u8 `workspace` of at least GatedDeltaRuleChunkedWorkspaceBytes bytes on the device.
Status GatedDeltaRuleChunkedForward(const GatedDeltaRuleArgs& args, TensorView workspace,
                                    Stream s);
}  // namespace cuda

// By the tensors' device: CUDA (workspace needed), or the CPU twin with chunk 64.
Status GatedDeltaRuleChunkedForward(const GatedDeltaRuleArgs& args, TensorView workspace,
                                    Stream s);

}  // namespace tandem::kernels
