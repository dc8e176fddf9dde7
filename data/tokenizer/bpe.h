// The BPE model of a byte-level tokenizer.json: a vocabulary of byte strings and ranked merges.
// A pre-tokenized piece starts as one symbol per byte and the adjacent pair with the lowest
// merge rank is merged (leftmost first) until no pair has a merge, as HF tokenizers' BPE does
// without dropout. With ignore_merges (Llama-3), a piece that is itself in the vocabulary is
// one token.
//
// Thread-safety: a BpeModel is immutable after Build and safe to share; BpeCache is
// per-thread scratch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/core/status.h"

namespace tandem::tokenizer {

// Pieces already encoded, keyed by their bytes; cleared when it reaches its capacity.
class BpeCache {
 public:
  explicit BpeCache(size_t capacity = 1 << 16) : capacity_(capacity) {}
  const std::vector<uint32_t>* Find(std::string_view piece) const;
  void Insert(std::string_view piece, const std::vector<uint32_t>& ids);

 private:
  size_t capacity_;
  std::unordered_map<std::string, std::vector<uint32_t>> map_;
};

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object. InvalidArgument when it is not a byte-level
  // BPE this class implements (dropout, unk_token, byte_fallback, continuing_subword_prefix,
  // end_of_word_suffix) or when a merge names a token missing from the vocabulary.
  static Result<BpeModel> Build(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized piece (raw bytes). `cache` may be null.
  void EncodePiece(std::string_view piece, BpeCache* cache, std::vector<uint32_t>* out) const;

  // Merges `symbols` (byte ids) in place. kScan rescans the pairs after every merge
  // (fast for the short pieces that are nearly all of them), kHeap keeps candidate pairs in
  // a min-heap by (rank, position) like HF tokenizers (O(n log n) for long pieces); both give
  // the same result. kAuto picks by length.
  enum class Strategy { kAuto, kScan, kHeap };
  void Merge(std::vector<uint32_t>* symbols, Strategy strategy = Strategy::kAuto) const;

  // Vocabulary entries: raw bytes of `id`, or nullptr when `id` is not in the vocabulary.
  const std::string* TokenBytes(uint32_t id) const;
  // The id of a vocabulary entry given as raw bytes, or -1.
  int64_t IdOfBytes(std::string_view bytes) const;
  size_t vocab_size() const { return id_to_bytes_.size(); }
  // The number of entries in model.vocab (every id is below it).
  size_t vocab_entries() const { return vocab_entries_; }
  size_t merges() const { return merges_; }

 private:
  struct MergeSlot {
    uint64_t key = ~0ull;  // (left << 32) | right; ~0 = empty
    uint32_t rank = 0;
    uint32_t merged = 0;
  };
  const MergeSlot* FindMerge(uint32_t left, uint32_t right) const;
  void InsertMerge(uint32_t left, uint32_t right, uint32_t rank, uint32_t merged);
  void MergeScan(std::vector<uint32_t>* symbols) const;
  void MergeHeap(std::vector<uint32_t>* symbols) const;

  size_t vocab_entries_ = 0;
  std::vector<std::string> id_to_bytes_;  // [vocab]; empty string for an unused id
  std::vector<uint8_t> has_id_;           // [vocab] 1 where the id is in the vocabulary
  std::unordered_map<std::string, uint32_t> bytes_to_id_;
  uint32_t byte_ids_[256] = {};
  bool byte_known_[256] = {};
  std::vector<MergeSlot> table_;  // open addressing, power-of-two size
  size_t merges_ = 0;
  bool ignore_merges_ = false;
};

}  // namespace tandem::tokenizer
