#include "models/speculative/dist_reader.h"

#include "kernels/core/stream.h"
#include "kernels/elementwise/row_topk.h"

namespace tandem::models {

Result<std::vector<TokenDist>> DistReader::Read(const kernels::TensorView& logits,
                                                const SamplingParams& p, kernels::Allocator& alloc,
                                                kernels::Device device, kernels::Stream stream) {
  const int64_t rows = logits.dim(0), v = logits.dim(1), k = p.top_k;
  std::vector<TokenDist> out;
  if (k > 0 && k < v && k <= kernels::kRowTopKMax) {
    if (ids_.numel() < rows * k) {
      ASSIGN_OR_RETURN(ids_,
                       kernels::Tensor::Empty(alloc, kernels::DType::kI32, {rows * k}, stream));
      ASSIGN_OR_RETURN(vals_,
                       kernels::Tensor::Empty(alloc, kernels::DType::kF32, {rows * k}, stream));
    }
    const kernels::TensorView ids = ids_.view().Narrow(0, 0, rows * k).Reshape({rows, k});
    const kernels::TensorView vals = vals_.view().Narrow(0, 0, rows * k).Reshape({rows, k});
    RETURN_IF_ERROR(kernels::RowTopK(ids, vals, logits, stream));
    host_ids_.resize(static_cast<size_t>(rows * k));
    host_vals_.resize(static_cast<size_t>(rows * k));
    RETURN_IF_ERROR(kernels::CopyToHost(host_ids_.data(), ids, stream));
    RETURN_IF_ERROR(kernels::CopyToHost(host_vals_.data(), vals, stream));
    RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
    for (int64_t r = 0; r < rows; ++r)
      out.push_back(FilterCandidates(host_ids_.data() + r * k, host_vals_.data() + r * k, k, p));
    return out;
  }
  host_logits_.resize(static_cast<size_t>(logits.numel()));
  RETURN_IF_ERROR(kernels::CopyToHost(host_logits_.data(), logits, stream));
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  for (int64_t r = 0; r < rows; ++r) out.push_back(FilterLogits(host_logits_.data() + r * v, v, p));
  return out;
}

}  // namespace tandem::models
