// A tokenizer.json tokenizer: byte-level BPE as used by Qwen2/Qwen3/Qwen3.5 and Llama-3.
//
//   ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load("model/tokenizer.json"));
//   EncodeScratch scratch;                       // one per thread
//   ASSIGN_OR_RETURN(std::vector<uint32_t> ids, tok.Encode(text, scratch));
//   std::string back = tok.Decode(ids);
//
// Encode follows HF tokenizers with add_special_tokens = false and split_special_tokens =
// false: added tokens are matched first (leftmost, longest), the text between them is
// normalized (NFC or none), pre-tokenized (Split regex, ByteLevel) and BPE-encoded. Decode
// joins the tokens through the ByteLevel decoder (tokens outside the byte alphabet are taken
// as text) and replaces invalid UTF-8 with U+FFFD.
// What is not implemented is refused at Load with an error naming the part and its type:
// models other than BPE, normalizers other than NFC (or a Sequence of it), pre-tokenizers
// other than Split/ByteLevel, decoders other than ByteLevel, added tokens with lstrip,
// rstrip or single_word.
//
// Thread-safety: a Tokenizer is immutable after Load; Encode and Decode may run on many
// threads at once, each with its own EncodeScratch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/tokenizer/bpe.h"
#include "data/tokenizer/pre_tokenizer.h"
#include "runtime/core/status.h"

namespace tandem::tokenizer {

// Per-thread state for Encode: the BPE cache and PCRE2 scratch.
struct EncodeScratch {
  BpeCache cache;
  RegexScratch regex;
  std::string normalized;
  std::vector<std::pair<size_t, size_t>> ranges;
  std::vector<std::string> pieces;
};

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
};

class Tokenizer {
 public:
  // Reads and checks `path` (a tokenizer.json). Errors name the file and the part.
  static Result<Tokenizer> Load(const std::string& path);
  // The same from parsed JSON; `name` is used in messages.
  static Result<Tokenizer> FromJson(const nlohmann::json& j, const std::string& name);

  // Appends the ids of `text` to *ids. InvalidArgument when `text` is not valid UTF-8 (the
  // message gives the byte offset).
  Status Encode(std::string_view text, EncodeScratch& scratch, std::vector<uint32_t>* ids) const;
  Result<std::vector<uint32_t>> Encode(std::string_view text, EncodeScratch& scratch) const;

  // Text of `ids`; ids outside the vocabulary are skipped. Special tokens are kept unless
  // skip_special.
  std::string Decode(const std::vector<uint32_t>& ids, bool skip_special = false) const;

  // The added tokens Encode matches in `text` (leftmost, longest), in order: byte spans and
  // ids. Text between them is encoded independently of the rest.
  struct AddedMatch {
    size_t begin, end;
    uint32_t id;
  };
  std::vector<AddedMatch> MatchAdded(std::string_view text) const;
  bool IsAdded(uint32_t id) const { return added_by_id_.count(id) > 0; }

  // The raw bytes token `id` stands for in text (an added token's content, a vocabulary
  // entry's bytes), or nullptr when `id` is unknown.
  const std::string* TokenBytes(uint32_t id) const;
  // The id of an added token or vocabulary entry spelled `text`, or -1.
  int64_t TokenId(std::string_view text) const;
  // Largest id + 1 over the vocabulary and the added tokens.
  uint32_t vocab_bound() const { return vocab_bound_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const BpeModel& model() const { return bpe_; }

 private:
  Status EncodeSegment(std::string_view text, EncodeScratch& scratch,
                       std::vector<uint32_t>* ids) const;
  // Leftmost-longest added token at or after `from`: its index in added_, or -1.
  int FindAdded(std::string_view text, size_t from, size_t* at) const;

  BpeModel bpe_;
  PreTokenizer pre_;
  bool nfc_ = false;
  std::vector<AddedToken> added_;
  std::unordered_map<uint32_t, size_t> added_by_id_;  // id -> index in added_
  bool added_first_byte_[256] = {};
  uint32_t vocab_bound_ = 0;
};

}  // namespace tandem::tokenizer
