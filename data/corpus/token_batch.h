// TokenBatch: one packed batch of pre-tokenized documents, as the data source hands it to a
// TargetActor (and, with the hidden states, on to a DrafterActor); BatchSource: where they
// come from; DataPosition: where a source is, so a run can checkpoint and resume exactly.
//
// Thread-safety: TokenBatch is a value. A BatchSource is used by one actor at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::data {

struct TokenBatch {
  std::vector<int32_t> input_ids;     // [T]
  std::vector<int32_t> position_ids;  // [T], restart at 0 in every document
  std::vector<int32_t> cu_seqlens;    // [D+1], 0 .. T
  std::vector<uint8_t> loss_mask;     // [T]; 1 where the token may be predicted
  int32_t max_seqlen = 0;             // longest document in the batch
  uint64_t index = 0;                 // global batch number in the source's order
  int64_t epoch = 0;

  int64_t tokens() const { return static_cast<int64_t>(input_ids.size()); }
  int64_t documents() const { return static_cast<int64_t>(cu_seqlens.size()) - 1; }
  // FNV-1a over ids, positions, boundaries and mask: carried with the batch so consumers can
  // check they trained on exactly what the target produced.
  uint64_t Checksum() const;
};

// A resumable place in a source's deterministic order.
struct DataPosition {
  int64_t epoch = 0;
  int64_t next_batch = 0;  // batches already handed out in this epoch (for this shard)
  bool operator==(const DataPosition&) const = default;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch, or nullopt when the configured epochs are exhausted.
  virtual Result<std::optional<TokenBatch>> Next() = 0;
  virtual DataPosition position() const = 0;
  // Continues from `pos` (as returned by position()) with the same order as an uninterrupted run.
  virtual Status Seek(const DataPosition& pos) = 0;
  // Counts for reports: documents, tokens, skipped records and why.
  virtual std::string Describe() const = 0;
};

}  // namespace tandem::data
