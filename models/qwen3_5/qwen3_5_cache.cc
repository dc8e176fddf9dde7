#include "models/qwen3_5/qwen3_5_cache.h"

#include <optional>

#include "kernels/core/stream.h"
#include "kernels/linear_attention/decode_step.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

namespace {

constexpr int64_t kAlign = 256;

// Carves aligned views out of one allocation: a first pass sizes it, a second places them.
class Carver {
 public:
  explicit Carver(char* base, kernels::Device device) : base_(base), device_(device) {}
  TensorView Take(DType dtype, Shape shape) {
    offset_ = (offset_ + kAlign - 1) / kAlign * kAlign;
    const int64_t n = kernels::DTypeSize(dtype) * shape.numel();
    TensorView v(base_ == nullptr ? nullptr : base_ + offset_, dtype, std::move(shape), device_);
    offset_ += n;
    return v;
  }
  int64_t bytes() const { return offset_; }

 private:
  char* base_;
  kernels::Device device_;
  int64_t offset_ = 0;
};

}  // namespace

Result<Qwen35Cache> Qwen35Cache::Create(const Qwen35Config& c, int64_t capacity, int64_t max_block,
                                        kernels::Allocator& alloc, kernels::Stream stream) {
  if (capacity < 1 || max_block < 1)
    return InvalidArgumentError(
        "Qwen35Cache: capacity and max_block must be positive, got {} and {}", capacity, max_block);
  if (c.linear_conv_kernel_dim < 1 ||
      static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers)
    return InvalidArgumentError("Qwen35Cache: {}: conv kernel {} and {} layer types for {} layers",
                                c.source, c.linear_conv_kernel_dim, c.layer_types.size(),
                                c.num_hidden_layers);
  const kernels::Device device = alloc.device();
  Qwen35Cache cache;
  cache.config_ = c;
  cache.stream_ = stream;
  cache.capacity_ = capacity;
  cache.max_block_ = max_block;
  const int64_t hv = c.linear_num_value_heads, conv = c.conv_dim(),
                taps = c.linear_conv_kernel_dim - 1;
  const Shape state{hv, c.linear_key_head_dim, c.linear_value_head_dim};
  auto carve = [&](char* base) {
    Carver k(base, device);
    cache.slot_.clear();
    cache.linear_.clear();
    cache.attention_.clear();
    for (HybridLayerType t : c.layer_types) {
      if (t == HybridLayerType::kLinearAttention) {
        cache.slot_.push_back(static_cast<int>(cache.linear_.size()));
        LinearSlot s;
        for (int i = 0; i < 2; ++i) {
          s.state[i] = k.Take(DType::kF32, state);
          s.window[i] = k.Take(DType::kBF16, {taps + max_block, conv});
        }
        s.mixed = k.Take(DType::kBF16, {max_block, conv});
        s.g = k.Take(DType::kF32, {max_block, hv});
        s.beta = k.Take(DType::kF32, {max_block, hv});
        cache.linear_.push_back(s);
      } else {
        cache.slot_.push_back(static_cast<int>(cache.attention_.size()));
        const Shape kv{capacity, c.num_key_value_heads, c.head_dim};
        cache.attention_.push_back({k.Take(DType::kBF16, kv), k.Take(DType::kBF16, kv)});
      }
    }
    cache.ids_ = k.Take(DType::kI32, {capacity});
    cache.pos_ = k.Take(DType::kI32, {capacity});
    return k.bytes();
  };
  const int64_t bytes = carve(nullptr);
  ASSIGN_OR_RETURN(cache.storage_, kernels::Tensor::Empty(alloc, DType::kU8, {bytes}, stream));
  carve(static_cast<char*>(cache.storage_.data()));
  RETURN_IF_ERROR(cache.Reset());
  return cache;
}

Status Qwen35Cache::Reset() {
  const int64_t taps = config_.linear_conv_kernel_dim - 1;
  std::optional<kernels::DeviceGuard> guard;
  if (device().is_cuda()) guard.emplace(device().index);
  for (const LinearSlot& s : linear_) {
    RETURN_IF_ERROR(kernels::FillZero(s.state[cur_], stream_));
    if (taps > 0) RETURN_IF_ERROR(kernels::FillZero(s.window[wcur_].Narrow(0, 0, taps), stream_));
  }
  length_ = block_len_ = conv_offset_ = 0;
  return Status::Ok();
}

Status Qwen35Cache::CheckFits(const Qwen35Config& c) const {
  const Qwen35Config& m = config_;
  const bool same = c.layer_types == m.layer_types &&
                    c.num_key_value_heads == m.num_key_value_heads && c.head_dim == m.head_dim &&
                    c.linear_num_key_heads == m.linear_num_key_heads &&
                    c.linear_num_value_heads == m.linear_num_value_heads &&
                    c.linear_key_head_dim == m.linear_key_head_dim &&
                    c.linear_value_head_dim == m.linear_value_head_dim &&
                    c.linear_conv_kernel_dim == m.linear_conv_kernel_dim;
  if (same) return Status::Ok();
  return InvalidArgumentError(
      "Qwen35Cache: made for {} layers (kv {}x{}, linear {}/{} heads of {}/{}, conv {}), "
      "the model has {} layers (kv {}x{}, linear {}/{} heads of {}/{}, conv {})",
      m.layer_types.size(), m.num_key_value_heads, m.head_dim, m.linear_num_key_heads,
      m.linear_num_value_heads, m.linear_key_head_dim, m.linear_value_head_dim,
      m.linear_conv_kernel_dim, c.layer_types.size(), c.num_key_value_heads, c.head_dim,
      c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim,
      c.linear_value_head_dim, c.linear_conv_kernel_dim);
}

TensorView Qwen35Cache::keys(int layer) const { return attention_[slot_[layer]].k; }
TensorView Qwen35Cache::values(int layer) const { return attention_[slot_[layer]].v; }

Qwen35LinearDecode Qwen35Cache::Linear(int layer, int64_t t) const {
  const LinearSlot& s = linear_[slot_[layer]];
  const int64_t taps = config_.linear_conv_kernel_dim - 1;
  const bool keep = t <= max_block_;  // a verify-sized block: keep its rollback data
  Qwen35LinearDecode d;
  d.conv_state = s.window[wcur_].Narrow(0, conv_offset_, taps);
  d.history = s.window[1 - wcur_].Narrow(0, 0, keep ? taps + t : taps);
  if (keep) {
    d.mixed = s.mixed.Narrow(0, 0, t);
    d.g = s.g.Narrow(0, 0, t);
    d.beta = s.beta.Narrow(0, 0, t);
  }
  d.state_in = s.state[cur_];
  d.state_out = s.state[1 - cur_];
  return d;
}

void Qwen35Cache::Commit(int64_t t) {
  const bool keep = t <= max_block_;
  cur_ = 1 - cur_;
  wcur_ = 1 - wcur_;
  conv_offset_ = keep ? t : 0;
  block_len_ = keep ? t : 0;
  length_ += t;
}

Status Qwen35Cache::Crop(int64_t length) {
  if (length < rollback_floor() || length > length_)
    return InvalidArgumentError(
        "Qwen35Cache::Crop: length {} not in [{}, {}]: the Gated DeltaNet state can roll back "
        "only inside the last extension, and only when it had at most max_block = {} tokens",
        length, rollback_floor(), length_, max_block_);
  if (length == length_) return Status::Ok();
  const int64_t m = length - rollback_floor();  // accepted tokens of the last block
  const Qwen35Config& c = config_;
  const int64_t kd = c.linear_key_dim();
  if (m == 0) {
    cur_ = 1 - cur_;  // the snapshot becomes the state; the conv state is the block start's
  } else {
    std::optional<kernels::DeviceGuard> guard;
    if (device().is_cuda()) guard.emplace(device().index);
    for (const LinearSlot& s : linear_) {
      kernels::GatedDeltaRuleStepArgs a;
      a.rule.q = s.mixed.Narrow(0, 0, m).Narrow(1, 0, kd);
      a.rule.k = s.mixed.Narrow(0, 0, m).Narrow(1, kd, kd);
      a.rule.v = s.mixed.Narrow(0, 0, m).Narrow(1, 2 * kd, c.linear_value_dim());
      a.rule.g = s.g.Narrow(0, 0, m);
      a.rule.beta = s.beta.Narrow(0, 0, m);
      a.rule.key_heads = c.linear_num_key_heads;
      a.rule.value_heads = c.linear_num_value_heads;
      a.rule.key_dim = c.linear_key_head_dim;
      a.rule.value_dim = c.linear_value_head_dim;
      a.state_in = s.state[1 - cur_];  // the snapshot at the block start
      a.state_out = s.state[cur_];
      RETURN_IF_ERROR(kernels::GatedDeltaRuleStep(a, stream_).WithContext("Qwen35Cache::Crop"));
    }
  }
  conv_offset_ = m;
  block_len_ = m;
  length_ = length;
  return Status::Ok();
}

}  // namespace tandem::models
