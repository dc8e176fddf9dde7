// DFlash2Proposer: the draft tokens of a DFlash2 drafter's blocks, proposed with its
// candidate selector as z-lab's reference `propose` does (docs/dflash2.md, "Candidate
// selector"). Per block of n draft slots (slots 1 .. n after the anchor):
//   logits = lm_head(h) (the caller's LM head, bf16 [V, H]) transformed: * output_multiplier,
//            then final_logit_softcapping (kernels/dflash2/row_topk.h does both);
//   C, U   = each row's top-k ids and transformed values (RowTopK, k = selector_top_k);
//   P      = h . hidden_projection^T (f32 [n, rank]);
//   the causal walk over the block: prev = the anchor for slot 1, then the token just chosen;
//     temperature 0: the first best score (SelectorGreedyWalk);
//     temperature T > 0: a draw from q = softmax(S / T) over the k candidates
//     (SelectorSampleWalk), q returned for the verifier.
// h is the drafter's final normed hidden row (DFlashDrafter::final_hidden()). CPU and CUDA
// through the ops' device dispatch; the GEMMs through kernels::Gemm (CUDA: the caller's
// GemmContext).
//
// The proposal distribution. spec_pick's TokenDist is already sparse (candidate ids in
// ascending order and their probabilities), so the selector's q over its k candidates is
// handed over as one: ids sorted ascending, zero entries dropped, probabilities renormalised
// in double. No dense vocab row and no change to VerifyBySampling: min(1, p/q) and the
// residual max(0, p - q) read q only through TokenDist::Prob, which is 0 off the candidates,
// exactly the selector's q. The decoders' top-k / top-p filter applies to the target's p;
// the drafter's q is the selector's own distribution (speculative sampling is lossless for
// any q that the drafts were drawn from).
//
// Draws. A sampled block's uniforms are PhiloxUniform(key.seed, SampleOffset(key), i) for
// its row i: a pure function of (seed, prompt, step, slot), as every draw of spec_pick.h,
// so a prompt draws the same drafts alone or in a batch.
//
// Limits (CheckDFlash2ProposalLimits): selector_top_k <= kSelectorMaxTopK (64, both
// versions) and <= vocab; on CUDA selector_rank <= kSelectorMaxRank (2048). Errors name the
// key and the limit.
//
// Thread-safety: thread-compatible; ordered on the stream given to Create.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "kernels/gemm/gemm.h"
#include "models/dflash/dflash_config.h"
#include "models/speculative/spec_pick.h"
#include "runtime/core/status.h"

namespace tandem::models {

// InvalidArgument naming the key when `c` (a DFlash2 config) is beyond what the selector
// kernels run on `device` (see Limits above); OK for a DFlash config.
Status CheckDFlash2ProposalLimits(const DFlashConfig& c, kernels::Device device);

// The selector's weights and the LM head the proposer reads (bf16, on the device).
struct DFlash2ProposalWeights {
  kernels::TensorView lm_head;            // [V, H]
  kernels::TensorView hidden_projection;  // [rank, H]
  kernels::TensorView pred;               // predecessor_codebook [V, rank]
  kernels::TensorView succ;               // successor_codebook [V, rank]
};

// One block to propose: the final hidden rows of its draft slots 1 .. n (bf16 [n, H], any
// view with a contiguous last dim, e.g. final_hidden().Narrow(0, first, n)), its anchor
// token and (sampling) its draws' key.
struct DFlash2Block {
  kernels::TensorView hidden;
  int32_t anchor = 0;
  DrawKey key;
};

struct DFlash2Proposal {
  std::vector<std::vector<int32_t>> drafts;  // per block: n tokens
  std::vector<std::vector<TokenDist>> q;     // sampling: per block, per draft; else empty
};

// The Philox offset of a sampled block's draws (see Draws).
uint64_t SampleOffset(const DrawKey& key);

// The selector's q of one row as a TokenDist (see The proposal distribution).
TokenDist SparseProposal(const int32_t* ids, const float* probs, int64_t k);

class DFlash2Proposer {
 public:
  // Buffers for up to `max_rows` draft rows (blocks x n) of a DFlash2 config (`c.dflash2`
  // set; CheckDFlash2ProposalLimits) on `device`, from `alloc`.
  static Result<std::unique_ptr<DFlash2Proposer>> Create(const DFlashConfig& c,
                                                         int64_t max_rows,
                                                         kernels::Allocator& alloc,
                                                         kernels::Device device,
                                                         kernels::Stream stream);
  // The bytes Create allocates (the eval's memory bound): logits f32 [max_rows, V], top-k
  // ids i32 and values f32 [max_rows, k], q f32 [max_rows, k], P f32 [max_rows, rank], the
  // path and anchors.
  static int64_t WorkspaceBytes(const DFlashConfig& c, int64_t max_rows);

  // Proposes every block (all of the same n >= 1 rows; blocks x n <= max_rows). temperature
  // 0: the greedy walk, q empty; > 0: the sampled walk and its q. Synchronises the stream
  // (the drafts come back to the host).
  Result<DFlash2Proposal> Propose(std::span<const DFlash2Block> blocks,
                                  const DFlash2ProposalWeights& w, float temperature,
                                  kernels::GemmContext* gemm);

  int64_t workspace_bytes() const { return bytes_; }

 private:
  DFlash2Proposer() = default;
  // Fills logits, ids, unary and proj for the blocks' rows; returns the rows.
  Result<int64_t> Candidates(std::span<const DFlash2Block> blocks, int64_t n,
                             const DFlash2ProposalWeights& w, kernels::GemmContext* gemm);

  DFlashConfig config_;
  int64_t max_rows_ = 0, bytes_ = 0;
  kernels::Device device_;
  kernels::Stream stream_ = nullptr;
  kernels::Tensor logits_, ids_, unary_, probs_, proj_, path_, anchors_;
};

}  // namespace tandem::models
