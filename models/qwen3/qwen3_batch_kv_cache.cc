#include "models/qwen3/qwen3_batch_kv_cache.h"

#include "kernels/core/memory.h"

namespace tandem::models {

Result<Qwen3BatchKvCache> Qwen3BatchKvCache::Create(const TransformerConfig& c,
                                                    int64_t sequences, int64_t capacity,
                                                    kernels::Allocator& alloc,
                                                    kernels::Stream stream) {
  if (sequences < 1)
    return InvalidArgumentError("Qwen3BatchKvCache: sequences must be positive, got {}",
                                sequences);
  Qwen3BatchKvCache b;
  for (int64_t i = 0; i < sequences; ++i) {
    ASSIGN_OR_RETURN(Qwen3KvCache one, Qwen3KvCache::Create(c, capacity, alloc, stream));
    b.caches_.push_back(std::move(one));
  }
  ASSIGN_OR_RETURN(b.ids_, kernels::Tensor::Empty(alloc, kernels::DType::kI32,
                                                  {sequences * capacity}, stream));
  ASSIGN_OR_RETURN(b.pos_, kernels::Tensor::Empty(alloc, kernels::DType::kI32,
                                                  {sequences * capacity}, stream));
  return b;
}

int64_t Qwen3BatchKvCache::nbytes() const {
  int64_t n = ids_.nbytes() + pos_.nbytes();
  for (const Qwen3KvCache& c : caches_) n += c.nbytes();
  return n;
}

}  // namespace tandem::models
