// The host side of a sampled pick: brings what speculative sampling needs of a block of
// logits from where the logits are and filters it (spec_pick.h). With top-k (1 ..
// kernels::kRowTopKMax, below the vocabulary) kernels::RowTopK selects each row's candidates
// on the logits' device and only they are copied: rows × K × 8 bytes instead of rows × V × 4.
// Otherwise the whole rows are copied. Either way the distributions are the same, bit for bit
// (FilterCandidates).
//
// Thread-safety: thread-compatible; Read synchronises `stream`.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/core/memory.h"
#include "models/speculative/spec_pick.h"
#include "runtime/core/status.h"

namespace tandem::models {

class DistReader {
 public:
  // The filtered distributions of logits f32 [rows, V] (contiguous, on `device`, written in
  // order on `stream`). The candidate buffers come from `alloc` on first use and grow as needed.
  Result<std::vector<TokenDist>> Read(const kernels::TensorView& logits, const SamplingParams& p,
                                      kernels::Allocator& alloc, kernels::Device device,
                                      kernels::Stream stream);

 private:
  kernels::Tensor ids_, vals_;  // RowTopK's output, [capacity] each
  std::vector<int32_t> host_ids_;
  std::vector<float> host_vals_, host_logits_;
};

}  // namespace tandem::models
