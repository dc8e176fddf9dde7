#include "data/corpus/token_batch.h"

#include <cstring>

namespace tandem::data {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Mix(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

}  // namespace

uint64_t TokenBatch::Checksum() const {
  uint64_t h = kFnvOffset;
  h = Mix(h, input_ids.data(), input_ids.size() * sizeof(int32_t));
  h = Mix(h, position_ids.data(), position_ids.size() * sizeof(int32_t));
  h = Mix(h, cu_seqlens.data(), cu_seqlens.size() * sizeof(int32_t));
  h = Mix(h, loss_mask.data(), loss_mask.size());
  return h;
}

}  // namespace tandem::data
