#include "actors/dflash/synthetic_source.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace tandem::dflash {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

SyntheticSource::SyntheticSource(const SyntheticOptions& o, int shard, int shards)
    : o_(o), shard_(shard), shards_(shards) {
  perm_.resize(o_.vocab);
  for (int64_t i = 0; i < o_.vocab; ++i) perm_[i] = static_cast<int32_t>(i);
  uint64_t x = Mix(o_.seed ^ 0x5EEDull);
  for (int64_t i = o_.vocab - 1; i > 0; --i) {
    x = Mix(x);
    std::swap(perm_[i], perm_[x % static_cast<uint64_t>(i + 1)]);
  }
}

int64_t SyntheticSource::ShardBatches() const {
  return (o_.batches_per_epoch - shard_ + shards_ - 1) / shards_;
}

Result<std::optional<data::TokenBatch>> SyntheticSource::Next() {
  if (pos_.next_batch >= ShardBatches()) {
    ++pos_.epoch;
    pos_.next_batch = 0;
  }
  if (pos_.epoch >= o_.epochs) return std::optional<data::TokenBatch>();
  data::TokenBatch b;
  b.epoch = pos_.epoch;
  b.index = static_cast<uint64_t>(pos_.epoch * o_.batches_per_epoch + shard_ +
                                  pos_.next_batch * shards_);
  ++pos_.next_batch;
  uint64_t x = Mix(o_.seed * 0x100000001B3ull ^ b.index);
  const int64_t docs = std::max<int64_t>(1, o_.max_tokens / o_.doc_len);
  b.cu_seqlens.push_back(0);
  for (int64_t d = 0; d < docs; ++d) {
    x = Mix(x);
    int32_t tok = static_cast<int32_t>(x % static_cast<uint64_t>(o_.vocab));
    for (int64_t p = 0; p < o_.doc_len; ++p) {
      b.input_ids.push_back(tok);
      b.position_ids.push_back(static_cast<int32_t>(p));
      b.loss_mask.push_back(p >= 4 ? 1 : 0);
      x = Mix(x);
      const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
      tok = u < o_.noise ? static_cast<int32_t>(Mix(x) % static_cast<uint64_t>(o_.vocab))
                         : perm_[tok];
    }
    b.cu_seqlens.push_back(static_cast<int32_t>(b.input_ids.size()));
  }
  b.max_seqlen = static_cast<int32_t>(o_.doc_len);
  return std::optional<data::TokenBatch>(std::move(b));
}

Status SyntheticSource::Seek(const data::DataPosition& pos) {
  if (pos.epoch < 0 || pos.next_batch < 0 || pos.next_batch > ShardBatches())
    return InvalidArgumentError("synthetic source: cannot seek to epoch {} batch {}", pos.epoch,
                                pos.next_batch);
  pos_ = pos;
  return Status::Ok();
}

std::string SyntheticSource::Describe() const {
  return fmt::format("synthetic: vocab {}, {} tokens/doc, {} batches/epoch x {} epochs, shard {}/{}",
                     o_.vocab, o_.doc_len, o_.batches_per_epoch, o_.epochs, shard_, shards_);
}

}  // namespace tandem::dflash
