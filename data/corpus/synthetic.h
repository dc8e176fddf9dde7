// SyntheticSource: a BatchSource of generated documents with structure a small drafter can
// learn, for the tiny CPU job and tests. Nothing is read from disk.
//
// Each document follows one affine rule drawn from a fixed set of four (a, b) pairs,
//   token[0] uniform in [0, vocab),  token[t+1] = (a * token[t] + b) mod vocab,
// so the next tokens are a function of the current one and of the rule, which the context
// reveals after two tokens. Document lengths are uniform in [min_doc_len, max_doc_len]; a
// batch is filled with documents until fewer than min_doc_len tokens of max_tokens are left
// (the last document is cut to fit). Batch g of epoch e depends only on (seed, e, g), so
// Seek is exact and free. Sharding and the loss mask follow Packer (packer.h): replica r of n
// takes global batches r, r+n, ...; the first token of every document has mask 0.
//
// Thread-safety: not thread-safe; one actor uses it at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/corpus/token_batch.h"

namespace tandem::data {

struct SyntheticOptions {
  int64_t vocab = 256;             // >= 2
  int64_t min_doc_len = 16;        // 2 <= min_doc_len <= max_doc_len <= max_tokens
  int64_t max_doc_len = 128;
  int64_t max_tokens = 1024;
  int64_t batches_per_epoch = 100; // global, all replicas together; >= replicas
  int64_t epochs = 1;              // 0 = forever
  uint64_t seed = 0;
  int replica = 0;
  int replicas = 1;
};

class SyntheticSource final : public BatchSource {
 public:
  // The (a, b) pairs documents are drawn from.
  static constexpr int64_t kRules[4][2] = {{1, 1}, {1, 7}, {3, 1}, {5, 3}};

  static Result<std::unique_ptr<SyntheticSource>> Create(SyntheticOptions options);

  Result<std::optional<TokenBatch>> Next() override;
  DataPosition position() const override { return pos_; }
  Status Seek(const DataPosition& pos) override;
  std::string Describe() const override;

  // The batch `global_index` of `epoch`, as any replica would produce it.
  TokenBatch Generate(int64_t epoch, int64_t global_index) const;

 private:
  explicit SyntheticSource(SyntheticOptions options) : opt_(options) {}
  int64_t ShardBatches() const;

  SyntheticOptions opt_;
  DataPosition pos_;
};

}  // namespace tandem::data
