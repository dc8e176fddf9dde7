// Mixture-of-experts routing: the router (softmax over expert logits in fp32, top-k, optional
// renormalisation of the k weights) and the permutation of token copies by expert.
//
// Router:
//   logits: bf16 or f32 [T, E]   ->   topk_ids: i32 [T, k], topk_weights: f32 [T, k]
//   p = softmax(logits[t]) in fp32; the k experts of largest p (ties: the lower index first),
//   in descending order of p; weights p, or p / sum of the k p when `normalize`
//   (transformers' norm_topk_prob). 1 <= k <= E <= kMoeMaxExperts, k <= kMoeMaxTopK.
//   The selection compares logits, which orders experts exactly as p does, so the CPU and
//   CUDA versions pick the same sets whatever their summation order.
//
// Permutation:
//   topk_ids: i32 [T, k] (ids in [0, E))  ->  expert_offsets: i32 [E + 1],
//   perm_token: i32 [N = T * k], assign_row: i32 [N]
//   The N token copies ("assignments", i = t * k + j) are grouped by expert: expert e owns
//   permuted rows [offsets[e], offsets[e + 1]), in increasing assignment order (so runs are
//   deterministic). perm_token[r] is the token whose copy sits at permuted row r (the rows to
//   gather, kernels/elementwise/row_gather.h); assign_row[i] is where assignment i sits (the
//   rows the combine reads, kernels/moe/combine.h). Experts without tokens have empty ranges.
//   The CPU version checks every id (InvalidArgument naming the token); the CUDA one
//   REQUIRES ids in range (the router's output).
//
// Padded layout (the expert GEMMs' capacity-padded path, kernels/moe/experts.h): every expert
// owns `cap` rows (cap >= its row count), expert e rows [e cap, e cap + cap):
//   MoePermute's expert_offsets, perm_token, assign_row and its topk_ids  ->
//   padded_token: i32 [E * cap]: the token at padded row e cap + j: perm_token[o_e + j] for
//     j < count_e, else 0 (a row computed and never read);
//   padded_row: i32 [N]: where assignment i sits in the padded layout:
//     ids[i] cap + assign_row[i] - o_ids[i].
//   REQUIRES (CUDA): MoePermute's outputs for these ids and cap >= every count; the CPU
//   version checks the counts.
//
// Contiguous tensors on one device. Thread-safety: stateless; ordered on `s`.
#pragma once

#include <cstdint>

#include "kernels/core/tensor.h"

namespace tandem::kernels {

inline constexpr int64_t kMoeMaxExperts = 1024;
inline constexpr int64_t kMoeMaxTopK = 32;

namespace cpu {
Status MoeRouterForward(TensorView topk_ids, TensorView topk_weights, TensorView logits,
                        bool normalize, Stream s);
Status MoePermute(TensorView expert_offsets, TensorView perm_token, TensorView assign_row,
                  TensorView topk_ids, Stream s);
Status MoePadLayout(TensorView padded_token, TensorView padded_row, TensorView expert_offsets,
                    TensorView perm_token, TensorView assign_row, TensorView topk_ids,
                    int64_t cap, Stream s);
}  // namespace cpu
namespace cuda {
Status MoeRouterForward(TensorView topk_ids, TensorView topk_weights, TensorView logits,
                        bool normalize, Stream s);
Status MoePermute(TensorView expert_offsets, TensorView perm_token, TensorView assign_row,
                  TensorView topk_ids, Stream s);
Status MoePadLayout(TensorView padded_token, TensorView padded_row, TensorView expert_offsets,
                    TensorView perm_token, TensorView assign_row, TensorView topk_ids,
                    int64_t cap, Stream s);
}  // namespace cuda
Status MoeRouterForward(TensorView topk_ids, TensorView topk_weights, TensorView logits,
                        bool normalize, Stream s);
Status MoePermute(TensorView expert_offsets, TensorView perm_token, TensorView assign_row,
                  TensorView topk_ids, Stream s);
Status MoePadLayout(TensorView padded_token, TensorView padded_row, TensorView expert_offsets,
                    TensorView perm_token, TensorView assign_row, TensorView topk_ids,
                    int64_t cap, Stream s);

namespace internal {
Status CheckMoeRouter(const TensorView& topk_ids, const TensorView& topk_weights,
                      const TensorView& logits);
Status CheckMoePermute(const TensorView& expert_offsets, const TensorView& perm_token,
                       const TensorView& assign_row, const TensorView& topk_ids);
Status CheckMoePadLayout(const TensorView& padded_token, const TensorView& padded_row,
                         const TensorView& expert_offsets, const TensorView& perm_token,
                         const TensorView& assign_row, const TensorView& topk_ids, int64_t cap);
}  // namespace internal

}  // namespace tandem::kernels
