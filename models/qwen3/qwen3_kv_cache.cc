#include "models/qwen3/qwen3_kv_cache.h"

namespace tandem::models {

using kernels::DType;
using kernels::TensorView;

Result<Qwen3KvCache> Qwen3KvCache::Create(const TransformerConfig& c, int64_t capacity,
                                          kernels::Allocator& alloc, kernels::Stream stream) {
  const kernels::Device device = alloc.device();
  if (capacity < 1)
    return InvalidArgumentError("Qwen3KvCache: capacity must be positive, got {}", capacity);
  const int64_t layers = c.num_hidden_layers, hk = c.num_key_value_heads, d = c.head_dim;
  const int64_t kv_bytes = layers * 2 * capacity * hk * d * 2;
  const int64_t staging = (kv_bytes + 255) / 256 * 256;
  Qwen3KvCache cache;
  ASSIGN_OR_RETURN(cache.storage_, kernels::Tensor::Empty(alloc, DType::kU8,
                                                          {staging + 2 * capacity * 4 + 8}, stream));
  char* base = static_cast<char*>(cache.storage_.data());
  cache.kv_ = TensorView(base, DType::kBF16, {layers, 2, capacity, hk, d}, device);
  cache.ids_ = TensorView(base + staging, DType::kI32, {capacity}, device);
  cache.pos_ = TensorView(base + staging + capacity * 4, DType::kI32, {capacity}, device);
  cache.cu_ = TensorView(base + staging + 2 * capacity * 4, DType::kI32, {2}, device);
  cache.capacity_ = capacity;
  cache.layers_ = static_cast<int>(layers);
  return cache;
}

Status Qwen3KvCache::Crop(int64_t length) {
  if (length < 0 || length > length_)
    return InvalidArgumentError("Qwen3KvCache::Crop: length {} not in [0, {}]", length, length_);
  length_ = length;
  return Status::Ok();
}

TensorView Qwen3KvCache::keys(int layer) const {
  const int64_t hk = kv_.dim(3), d = kv_.dim(4), plane = capacity_ * hk * d;
  return TensorView(kv_.data_as<kernels::bf16>() + (2 * layer) * plane, DType::kBF16,
                    {capacity_, hk, d}, kv_.device());
}

TensorView Qwen3KvCache::values(int layer) const {
  const int64_t hk = kv_.dim(3), d = kv_.dim(4), plane = capacity_ * hk * d;
  return TensorView(kv_.data_as<kernels::bf16>() + (2 * layer + 1) * plane, DType::kBF16,
                    {capacity_, hk, d}, kv_.device());
}

}  // namespace tandem::models
