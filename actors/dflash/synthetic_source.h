// A learnable synthetic BatchSource for tiny jobs and tests, until actors/data's
// MakeBatchSource is wired in: documents follow a fixed random permutation of the vocabulary
// (token i+1 = perm[token i], with a fresh random token at rate `noise`), so a drafter can
// learn to predict the next tokens of a block from its anchor. Batch b of shard r (of R) is
// global batch r + b*R, a pure function of (seed, global batch), so Seek is exact.
//
// Thread-safety: thread-compatible (one actor uses it).
#pragma once

#include <cstdint>

#include "data/corpus/token_batch.h"

namespace tandem::dflash {

struct SyntheticOptions {
  int64_t vocab = 512;
  int64_t doc_len = 64;            // tokens per document (the first 4 have loss mask 0)
  int64_t max_tokens = 1024;       // tokens per batch (whole documents)
  int64_t batches_per_epoch = 64;  // global, split over shards
  int64_t epochs = 1;
  double noise = 0.05;
  uint64_t seed = 0;
};

class SyntheticSource final : public data::BatchSource {
 public:
  SyntheticSource(const SyntheticOptions& o, int shard, int shards);
  Result<std::optional<data::TokenBatch>> Next() override;
  data::DataPosition position() const override { return pos_; }
  Status Seek(const data::DataPosition& pos) override;
  std::string Describe() const override;

 private:
  int64_t ShardBatches() const;
  SyntheticOptions o_;
  int shard_, shards_;
  std::vector<int32_t> perm_;  // [vocab]
  data::DataPosition pos_;
};

}  // namespace tandem::dflash
