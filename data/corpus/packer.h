// Packer: a BatchSource that packs a Corpus's documents into batches of at most max_tokens
// tokens, in a shuffled order that depends only on (seed, epoch), sharded across target
// replicas, for a number of epochs, with a position that resumes exactly.
//
// The order of one epoch (all replicas together):
//   1. documents are permuted by a Fisher-Yates shuffle seeded from (seed, epoch)
//      (identity order when shuffle is off);
//   2. a document longer than max_tokens becomes pieces of max_tokens tokens (the last one
//      shorter) whose position ids continue where the previous piece stopped (kSplit), or is
//      cut to its first max_tokens tokens (kTruncate; the dropped tokens are counted);
//   3. pieces are packed greedily in that order: a batch is closed when the next piece does
//      not fit. Every piece is its own segment in cu_seqlens.
// Replica r of n takes global batches r, r+n, r+2n, ... so the replicas together see every
// batch of the epoch exactly once. An epoch with fewer batches than replicas is an error.
//
// Token ids: with options.vocab set, documents are checked when the corpus' vocab bound
// (its header's, for a binary set) says some id may be out of range, and every batch is
// checked again as it is built (DataLoss if a header understated its bound).
//
// Loss mask of a batch token: the corpus' mask (all ones when it has none), and always 0 on
// the first token of every segment, which has no earlier token in the segment to be predicted
// from.
//
// Thread-safety: not thread-safe; one actor uses it at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/corpus/token_batch.h"

namespace tandem::data {

enum class LongDocuments { kSplit, kTruncate };

struct PackerOptions {
  int64_t max_tokens = 16384;  // > 0
  int64_t epochs = 1;          // 0 = forever
  bool shuffle = true;
  uint64_t seed = 0;
  int replica = 0;             // 0 <= replica < replicas
  int replicas = 1;
  LongDocuments long_documents = LongDocuments::kSplit;
  // > 0: every id handed out must be below it (the target model's vocab_size: a larger id
  // has no embedding row and would train to a silent loss of 0). A document holding one is
  // InvalidArgument naming the corpus, document and token, or with skip_bad left out of
  // every epoch and counted in Describe(). 0: only ids below 2^31 (they travel as int32).
  int64_t vocab = 0;
  bool skip_bad = false;
  std::string vocab_origin{};  // where `vocab` came from, for messages
};

class Packer final : public BatchSource {
 public:
  // InvalidArgument for bad options or an empty corpus.
  static Result<std::unique_ptr<Packer>> Create(std::shared_ptr<const Corpus> corpus,
                                                PackerOptions options);

  Result<std::optional<TokenBatch>> Next() override;
  DataPosition position() const override { return pos_; }
  Status Seek(const DataPosition& pos) override;
  std::string Describe() const override;

  // Batches in epoch `epoch` for all replicas together.
  int64_t GlobalBatches(int64_t epoch);

 private:
  struct Piece {
    uint64_t doc;
    uint64_t begin;  // first token within the document
    uint64_t len;
  };
  Packer(std::shared_ptr<const Corpus> corpus, PackerOptions options)
      : corpus_(std::move(corpus)), opt_(options) {}
  void PlanEpoch(int64_t epoch);
  int64_t ShardBatches() const;  // of the planned epoch, for this replica
  Status CheckEnoughBatches() const;
  Status ExcludeOutOfVocab();  // fills excluded_ (or fails) per options.vocab / skip_bad
  int64_t IdLimit() const;     // ids must be below it: options.vocab, or 2^31
  std::string IdLimitOrigin() const;
  Result<TokenBatch> Build(int64_t global_index) const;

  std::shared_ptr<const Corpus> corpus_;
  PackerOptions opt_;
  DataPosition pos_;
  int64_t planned_epoch_ = -1;
  std::vector<Piece> pieces_;
  std::vector<uint64_t> batch_starts_;  // [B+1] indices into pieces_
  uint64_t truncated_tokens_ = 0;       // per epoch (the same every epoch)
  uint64_t split_documents_ = 0;
  std::vector<bool> excluded_;  // [documents] when some are skipped, else empty
  SkipReport vocab_skips_;      // documents skipped for an out-of-vocab id
};

}  // namespace tandem::data
