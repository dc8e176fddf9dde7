// One mixture-of-experts feed-forward block, as the Qwen3-MoE and Qwen3.5/3.6-MoE targets run
// it, composed of the family's ops:
//
//   logits  = x W_router^T                       (f32 [T, E]; x is the post-attention norm)
//   ids, w  = MoeRouterForward(logits)           (fp32 softmax, top-k, optional renorm)
//   rows    = MoePermute(ids)
//   offsets -> host                              (the block's one host sync, on CUDA)
//   xp = x[perm_token]; yp = MoeExperts::Forward(xp)   (RowGather; per-expert SwiGLU MLPs)
//     or, on the padded path (MoeExperts::Resolve, kernels/moe/experts.h), MoePadLayout,
//     xp = x[padded_token]; yp = MoeExperts::ForwardPadded(xp), rows = padded_row
//   shared  = SwiGLU MLP of x, gate g = x w_gate^T   (only with a shared expert)
//   hidden  = hidden + sum_j w_j yp[row_j] + sigmoid(g) * shared   (MoeCombine)
// With shape.fp8 the routed experts run the row-wise FP8 path (kernels/moe/experts_fp8.h) on
// the layout the same rule picks: padded (MoeFp8ExpertsForwardPadded, the gather fused with
// the rows' quantization, one strided-batched GEMM per projection) or exact
// (xp = x[perm_token]; MoeFp8ExpertsForward); the shared expert's two GEMMs run in
// block-scaled FP8 on x quantized per row per 128 columns.
//
// MoeLayer owns the activation buffers for up to max_tokens rows, the MoeExperts that runs
// the expert GEMMs (and, on CUDA, the pinned host copy of the offsets); one MoeLayer serves
// every MoE layer of a model in turn.
//
// Thread-safety: thread-compatible: one Forward at a time (the buffers are shared).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/pinned_allocator.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/gemm.h"
#include "kernels/moe/experts.h"
#include "kernels/moe/experts_fp8.h"

namespace tandem::kernels {

struct MoeLayerShape {
  int64_t hidden = 0;       // H
  int64_t experts = 0;      // E
  int64_t top_k = 0;        // k
  int64_t expert_size = 0;  // I of each routed expert
  int64_t shared_size = 0;  // I of the shared expert; 0: none
  bool normalize = true;    // renormalise the k weights (norm_topk_prob)
  // precision = "fp8": the routed and shared experts' GEMMs in e4m3 (kernels/moe/
  // experts_fp8.h; MoeLayerWeights' fp8 fields), with the buffers that takes. The router
  // and the shared expert's gate stay bf16.
  bool fp8 = false;
};

struct MoeLayerWeights {
  TensorView router;          // bf16 [E, H]
  MoeExpertWeights experts;   // [E, 2I, H] and [E, H, I]
  TensorView shared_gate_up;  // bf16 [2Is, H] (gate rows first); empty without shared expert
  TensorView shared_down;     // bf16 [H, Is]
  TensorView shared_gate;     // bf16 [1, H]
  // With MoeLayerShape::fp8 these replace `experts`, `shared_gate_up` and `shared_down`
  // (which may then be empty).
  MoeFp8ExpertWeights experts8;
  Fp8BlockWeight shared_gate_up8;  // [2Is, H]
  Fp8BlockWeight shared_down8;     // [H, Is]
};

class MoeLayer {
 public:
  // InvalidArgument for a bad shape (E out of 1..kMoeMaxExperts, k out of 1..min(E, 32), ...),
  // naming the field.
  static Status CheckShape(const MoeLayerShape& shape);
  // Bytes of device buffers Create allocates for max_tokens rows.
  static int64_t WorkspaceBytes(const MoeLayerShape& shape, int64_t max_tokens);
  // Allocates the buffers from `alloc` (its device) for work on `stream`; the expert GEMMs
  // run `experts_path` (kAuto: MoeChooseExpertsPath per call).
  static Result<std::unique_ptr<MoeLayer>> Create(
      const MoeLayerShape& shape, int64_t max_tokens, Allocator& alloc, Stream stream,
      MoeExpertsPath experts_path = MoeExpertsPath::kAuto);
  ~MoeLayer();

  // hidden (bf16 [T, H]) += the block applied to x (bf16 [T, H]); T <= max_tokens. On CUDA
  // waits once for the stream (the offsets' copy to the host). `gemm`: the device's context
  // (nullptr on the CPU).
  Status Forward(GemmContext* gemm, const MoeLayerWeights& w, const TensorView& x,
                 const TensorView& hidden, Stream stream);

  // The last Forward's routing, for checks: i32 [T, k] expert ids and f32 [T, k] weights.
  TensorView topk_ids(int64_t t) const { return ids_.Narrow(0, 0, t); }
  TensorView topk_weights(int64_t t) const { return weights_.Narrow(0, 0, t); }
  const MoeLayerShape& shape() const { return shape_; }
  int64_t workspace_bytes() const { return workspace_.nbytes(); }  // == WorkspaceBytes
  const MoeExperts& experts() const { return *experts_; }
  // What the last Forward's expert GEMMs ran: kPadded, or for FP8's exact layout kLoop, or
  // the bf16 MoeExperts::Forward's path.
  MoeExpertsPath last_path() const { return last_path_; }

 private:
  MoeLayer(const MoeLayerShape& shape, int64_t max_tokens)
      : shape_(shape), max_tokens_(max_tokens) {}
  Status CheckWeights(const MoeLayerWeights& w) const;
  Status CheckFp8Weights(const MoeLayerWeights& w) const;
  // The shared expert's SwiGLU MLP of x into shared_out_ (bf16 or FP8 GEMMs).
  Status SharedExpert(GemmContext* gemm, const MoeLayerWeights& w, const TensorView& x,
                      Stream stream);
  // Views over workspace_ (rows as allocated).
  MoeLayerShape shape_;
  int64_t max_tokens_ = 0;
  Tensor workspace_;
  TensorView logits_, ids_, weights_, offsets_, perm_token_, assign_row_, xp_, gate_up_, act_;
  TensorView padded_token_, padded_row_;
  TensorView shared_gate_up_, shared_act_, shared_out_, shared_logit_;
  TensorView fp8_bytes_;     // fp8 only: the bytes of fp8_
  MoeFp8Workspace fp8_;      // fp8 only: codes and scales of the expert and shared GEMMs
  std::unique_ptr<MoeExperts> experts_;
  std::unique_ptr<PinnedAllocator> pinned_;  // CUDA only: the host copy of the offsets
  Tensor host_offsets_;
  std::vector<int32_t> cpu_offsets_;
  MoeExpertsPath last_path_ = MoeExpertsPath::kLoop;
};

}  // namespace tandem::kernels
