// Corpus: a read-only set of pre-tokenized documents (uint32 tokens, uint64 document offsets,
// optional uint8 loss mask), either held in memory (read from JSONL) or memory-mapped from the
// binary format of docs/data-format.md. Also the JSONL reader and the binary writer/reader.
//
//   ASSIGN_OR_RETURN(Corpus c, ReadJsonl("train.jsonl", {.vocab = 151936}));
//   RETURN_IF_ERROR(WriteBinary(c, "train.tdata"));
//   ASSIGN_OR_RETURN(Corpus m, OpenBinary("train.tdata", BinaryCheck::kFull));
//
// Thread-safety: a Corpus is immutable once built; concurrent reads are safe. Copies share
// the same storage.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::data {

// Records that were dropped because `skip_bad` was set: counted by reason, with the first few
// messages ("train.jsonl:12: input_ids[3] = -1 is negative") kept for the report.
struct SkipReport {
  static constexpr size_t kMaxExamples = 5;
  int64_t skipped = 0;
  int64_t blank_lines = 0;  // empty or whitespace-only lines: not records, counted anyway
  std::map<std::string, int64_t> by_reason;
  std::vector<std::string> examples;

  void Add(const std::string& reason, const std::string& message);
  // "skipped 3 records (empty: 1, not_json: 2); first: ..." or "no records skipped".
  std::string ToString() const;
};

struct Document {
  std::span<const uint32_t> ids;   // [L]
  std::span<const uint8_t> mask;   // [L], or empty when the corpus has no loss mask
};

enum class BinaryCheck {
  kStructure,  // header, file sizes, offsets: O(documents)
  kFull,       // also every token < vocab bound and every mask byte 0/1: O(tokens)
};

class Corpus {
 public:
  Corpus() = default;
  // REQUIRES: offsets.front() == 0, offsets non-decreasing, offsets.back() == tokens.size(),
  // mask empty or mask.size() == tokens.size() (CHECKed).
  static Corpus FromVectors(std::vector<uint32_t> tokens, std::vector<uint64_t> offsets,
                            std::vector<uint8_t> mask, std::string source);
  // The documents of `parts` in order, as one corpus (the shards of a sharded set); shares
  // their storage. InvalidArgument when some parts have a loss mask and others do not.
  static Result<Corpus> Concat(const std::vector<Corpus>& parts, std::string source);

  int64_t documents() const { return documents_; }
  int64_t tokens() const { return tokens_count_; }
  bool has_mask() const { return has_mask_; }
  // Largest token id + 1 (0 for an empty corpus).
  uint32_t vocab_bound() const { return vocab_bound_; }
  // REQUIRES: 0 <= i < documents().
  Document doc(int64_t i) const;
  // The flat arrays. REQUIRES: !is_concat() (a concatenation has one set per part).
  std::span<const uint32_t> token_span() const;
  std::span<const uint64_t> offset_span() const;
  std::span<const uint8_t> mask_span() const;
  bool is_concat() const { return parts_.size() > 1; }

  // Where it came from (a path), for messages.
  const std::string& source() const { return source_; }
  const SkipReport& skips() const { return skips_; }
  void set_skips(SkipReport r) { skips_ = std::move(r); }

  // "train.tdata: 1200 documents, 3400000 tokens, loss mask: yes, vocab bound 151643"
  std::string Summary() const;

 private:
  friend Result<Corpus> OpenBinary(const std::string& dir, BinaryCheck check);
  // One contiguous set: offsets relative to its own tokens; first_doc its first document's
  // index in the corpus.
  struct Part {
    std::span<const uint32_t> tokens;
    std::span<const uint64_t> offsets;
    std::span<const uint8_t> mask;
    int64_t first_doc = 0;
  };
  void SetSinglePart(Part p);
  std::vector<std::shared_ptr<const void>> storage_;  // keeps the vectors or mappings alive
  std::vector<Part> parts_;                           // empty for an empty corpus
  int64_t documents_ = 0;
  int64_t tokens_count_ = 0;
  bool has_mask_ = false;
  uint32_t vocab_bound_ = 0;
  std::string source_;
  SkipReport skips_;
};

struct JsonlOptions {
  int64_t vocab = 0;       // > 0: every id must be < vocab; 0: only 0 <= id <= INT32_MAX
  bool skip_bad = false;   // count and report bad records instead of failing on the first
  std::string vocab_origin{};  // where `vocab` came from, for messages ("" = the job's key)
};

// Reads one JSON object per line: {"input_ids": [int, ...], "loss_mask": [0|1, ...]?}.
// A bad record is InvalidArgument "path:line: what is wrong", unless skip_bad, in which case
// it is counted in the corpus' skips(). The loss mask is kept only if every kept record has
// one (a file mixing records with and without it is InvalidArgument). No records at all
// (after skipping) is InvalidArgument.
Result<Corpus> ReadJsonl(const std::string& path, const JsonlOptions& options);

// Writes `corpus` as a binary set in directory `dir` (created if missing; existing files of
// the set are replaced). See docs/data-format.md.
Status WriteBinary(const Corpus& corpus, const std::string& dir);

// Memory-maps the binary set in `dir`. Corruption is DataLoss naming the file and what is
// wrong; a missing file is NotFound.
Result<Corpus> OpenBinary(const std::string& dir, BinaryCheck check);

// True when `path` is a directory holding a binary set's header.
bool IsBinarySet(const std::string& path);
// True when `path`/header starts with a binary set's magic (a set this code wrote).
bool HasBinarySetMagic(const std::string& path);

// A token id at or above a vocabulary size: where it is, for messages.
struct OutOfVocab {
  int64_t document = 0;  // index into the corpus
  int64_t position = 0;  // token index within the document
  uint32_t id = 0;
};
// The first token of document `doc` whose id is >= vocab (> 0), or nullopt.
std::optional<OutOfVocab> FindOutOfVocab(const Corpus& corpus, int64_t doc, int64_t vocab);
// "train.tdata: document 17, token 3: id 999 is not below vocab 512 (origin)".
std::string DescribeOutOfVocab(const Corpus& corpus, const OutOfVocab& bad, int64_t vocab,
                               const std::string& vocab_origin);

}  // namespace tandem::data
