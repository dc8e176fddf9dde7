#include "data/corpus/synthetic.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "data/corpus/rng.h"

namespace tandem::data {

Result<std::unique_ptr<SyntheticSource>> SyntheticSource::Create(SyntheticOptions o) {
  if (o.vocab < 2 || o.vocab > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("synthetic data: vocab must be in [2, 2^31-1], got {}", o.vocab);
  }
  if (o.max_tokens < 2 || o.max_tokens > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("synthetic data: max_tokens must be in [2, 2^31-1], got {}",
                                o.max_tokens);
  }
  if (o.min_doc_len < 2 || o.min_doc_len > o.max_doc_len || o.max_doc_len > o.max_tokens) {
    return InvalidArgumentError(
        "synthetic data: need 2 <= min doc_len <= max doc_len <= max_tokens, got [{}, {}] "
        "with max_tokens {}",
        o.min_doc_len, o.max_doc_len, o.max_tokens);
  }
  if (o.epochs < 0) {
    return InvalidArgumentError("synthetic data: epochs must be >= 0 (0 = forever), got {}",
                                o.epochs);
  }
  if (o.replicas < 1 || o.replica < 0 || o.replica >= o.replicas) {
    return InvalidArgumentError("synthetic data: replica {} of {} is out of range", o.replica,
                                o.replicas);
  }
  if (o.batches_per_epoch < o.replicas) {
    return InvalidArgumentError(
        "synthetic data: batches_per_epoch {} is fewer than the {} target replicas",
        o.batches_per_epoch, o.replicas);
  }
  return std::unique_ptr<SyntheticSource>(new SyntheticSource(o));
}

int64_t SyntheticSource::ShardBatches() const {
  return (opt_.batches_per_epoch - opt_.replica + opt_.replicas - 1) / opt_.replicas;
}

TokenBatch SyntheticSource::Generate(int64_t epoch, int64_t global_index) const {
  SplitMix64 rng(MixSeed(opt_.seed, static_cast<uint64_t>(epoch),
                         static_cast<uint64_t>(global_index)));
  TokenBatch b;
  b.epoch = epoch;
  b.index = static_cast<uint64_t>(global_index);
  b.cu_seqlens.push_back(0);
  const uint64_t vocab = static_cast<uint64_t>(opt_.vocab);
  const uint64_t span = static_cast<uint64_t>(opt_.max_doc_len - opt_.min_doc_len + 1);
  while (opt_.max_tokens - b.tokens() >= opt_.min_doc_len) {
    const int64_t len = std::min<int64_t>(opt_.min_doc_len + int64_t(rng.Below(span)),
                                          opt_.max_tokens - b.tokens());
    const auto& rule = kRules[rng.Below(4)];
    uint64_t tok = rng.Below(vocab);
    for (int64_t t = 0; t < len; ++t) {
      b.input_ids.push_back(static_cast<int32_t>(tok));
      b.position_ids.push_back(static_cast<int32_t>(t));
      b.loss_mask.push_back(t == 0 ? 0 : 1);
      tok = (uint64_t(rule[0]) * tok + uint64_t(rule[1])) % vocab;
    }
    b.cu_seqlens.push_back(static_cast<int32_t>(b.tokens()));
    b.max_seqlen = std::max(b.max_seqlen, static_cast<int32_t>(len));
  }
  return b;
}

Result<std::optional<TokenBatch>> SyntheticSource::Next() {
  while (opt_.epochs == 0 || pos_.epoch < opt_.epochs) {
    if (pos_.next_batch < ShardBatches()) {
      const int64_t global = opt_.replica + pos_.next_batch * opt_.replicas;
      ++pos_.next_batch;
      return std::optional<TokenBatch>(Generate(pos_.epoch, global));
    }
    ++pos_.epoch;
    pos_.next_batch = 0;
  }
  return std::optional<TokenBatch>();
}

Status SyntheticSource::Seek(const DataPosition& pos) {
  if (pos.epoch < 0 || pos.next_batch < 0 || pos.next_batch > ShardBatches() ||
      (opt_.epochs > 0 && pos.epoch > opt_.epochs)) {
    return InvalidArgumentError(
        "synthetic data: cannot seek to epoch {} batch {} (replica {} of {} has {} batches per "
        "epoch, {} epochs)",
        pos.epoch, pos.next_batch, opt_.replica, opt_.replicas, ShardBatches(), opt_.epochs);
  }
  pos_ = pos;
  return Status::Ok();
}

std::string SyntheticSource::Describe() const {
  return fmt::format(
      "synthetic: vocab {}, doc_len [{}, {}], max_tokens {}, {} batches per epoch ({} for "
      "replica {} of {}), epochs {}, seed {}",
      opt_.vocab, opt_.min_doc_len, opt_.max_doc_len, opt_.max_tokens, opt_.batches_per_epoch,
      ShardBatches(), opt_.replica, opt_.replicas,
      opt_.epochs == 0 ? std::string("forever") : std::to_string(opt_.epochs), opt_.seed);
}

}  // namespace tandem::data
