#include "data/tokenizer/tokenizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/utf8.h"
#include "runtime/core/json_parse.h"

namespace tandem::tokenizer {
namespace {

using nlohmann::json;

// NFC when the normalizer is NFC (or a Sequence of NFC only); null means none. `field`
// names the spec in errors ("normalizer", "normalizer.normalizers[1]").
Status ReadNormalizer(const json& spec, const std::string& field, bool* nfc) {
  if (spec.is_null()) return Status::Ok();
  RETURN_IF_ERROR(ExpectObjectOrNull(spec, field));
  ASSIGN_OR_RETURN(const std::string type, StringField(spec, "type", field));
  if (type == "NFC") {
    *nfc = true;
    return Status::Ok();
  }
  if (type == "Sequence") {
    ASSIGN_OR_RETURN(const json subs, ArrayField(spec, "normalizers", field));
    for (size_t k = 0; k < subs.size(); ++k) {
      RETURN_IF_ERROR(ReadNormalizer(subs[k], fmt::format("{}.normalizers[{}]", field, k), nfc));
    }
    return Status::Ok();
  }
  return InvalidArgumentError("tokenizer.json: {} type '{}' is not implemented (only NFC)", field,
                              type.empty() ? DescribeJson(spec) : type);
}

Status CheckDecoder(const json& spec, const std::string& field) {
  RETURN_IF_ERROR(ExpectObjectOrNull(spec, field));
  std::string type = "null";
  if (!spec.is_null()) {
    ASSIGN_OR_RETURN(type, StringField(spec, "type", field));
  }
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    ASSIGN_OR_RETURN(const json subs, ArrayField(spec, "decoders", field));
    for (size_t k = 0; k < subs.size(); ++k) {
      RETURN_IF_ERROR(CheckDecoder(subs[k], fmt::format("{}.decoders[{}]", field, k)));
    }
    return Status::Ok();
  }
  return InvalidArgumentError("tokenizer.json: {} type '{}' is not implemented (only ByteLevel)",
                              field, type);
}

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

Result<Tokenizer> Tokenizer::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("{}: cannot open the tokenizer file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  ASSIGN_OR_RETURN(const json j, ParseJson(ss.str(), path));
  if (!j.is_object()) {
    return InvalidArgumentError("{}: not a JSON object", path);
  }
  return FromJson(j, path);
}

Result<Tokenizer> Tokenizer::FromJson(const json& j, const std::string& name) {
  Tokenizer t;
  if (!j.contains("model") || !j["model"].is_object()) {
    return InvalidArgumentError("{}: no 'model' object", name);
  }
  auto bpe = BpeModel::Build(j["model"]);
  if (!bpe.ok()) return bpe.status().WithContext(name);
  t.bpe_ = std::move(bpe).value();
  for (const char* section : {"normalizer", "pre_tokenizer", "decoder"}) {
    const json& v = j.contains(section) ? j[section] : json();
    RETURN_IF_ERROR(ExpectObjectOrNull(v, section).WithContext(name));
  }
  RETURN_IF_ERROR(ReadNormalizer(j.value("normalizer", json()), "normalizer", &t.nfc_)
                      .WithContext(name));
  auto pre = PreTokenizer::Build(j.value("pre_tokenizer", json()));
  if (!pre.ok()) return pre.status().WithContext(name);
  t.pre_ = std::move(pre).value();
  RETURN_IF_ERROR(CheckDecoder(j.value("decoder", json()), "decoder").WithContext(name));
  t.vocab_bound_ = static_cast<uint32_t>(t.bpe_.vocab_size());
  ASSIGN_OR_RETURN(const json added, ArrayField(j, "added_tokens", ""));
  // Added tokens take the ids after the vocabulary or reuse some of its ids, so every id is
  // below the number of entries of both: a larger one is corrupt, and would size the id
  // tables by it.
  const uint64_t id_limit = uint64_t(t.bpe_.vocab_entries()) + added.size();
  for (size_t k = 0; k < added.size(); ++k) {
    const json& a = added[k];
    AddedToken tok;
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string() ||
        !a.contains("id") || !a["id"].is_number_unsigned()) {
      return InvalidArgumentError("{}: added_tokens[{}] = {} lacks a string content or an id",
                                  name, k, DescribeJson(a));
    }
    const uint64_t id = a["id"].get<uint64_t>();
    if (id >= id_limit) {
      return InvalidArgumentError(
          "{}: added_tokens[{}].id = {} is not below {} (the vocabulary's {} entries and {} "
          "added tokens)",
          name, k, id, id_limit, t.bpe_.vocab_entries(), added.size());
    }
    tok.content = a["content"].get<std::string>();
    tok.id = static_cast<uint32_t>(id);
    const std::string field = fmt::format("added_tokens[{}]", k);
    ASSIGN_OR_RETURN(tok.special, BoolField(a, "special", field, false));
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      ASSIGN_OR_RETURN(const bool set, BoolField(a, flag, field, false));
      if (set) {
        return InvalidArgumentError("{}: added token '{}' has {} = true, which is not implemented",
                                    name, tok.content, flag);
      }
    }
    if (tok.content.empty() || FindInvalidUtf8(tok.content) >= 0) {
      return InvalidArgumentError("{}: added token {} has empty or invalid content", name, tok.id);
    }
    t.added_first_byte_[static_cast<uint8_t>(tok.content[0])] = true;
    t.vocab_bound_ = std::max(t.vocab_bound_, tok.id + 1);
    t.added_by_id_[tok.id] = t.added_.size();
    t.added_.push_back(std::move(tok));
  }
  return t;
}

int Tokenizer::FindAdded(std::string_view text, size_t from, size_t* at) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!added_first_byte_[static_cast<uint8_t>(text[i])]) continue;
    int best = -1;
    for (size_t k = 0; k < added_.size(); ++k) {
      const std::string& c = added_[k].content;
      if (text.compare(i, c.size(), c) == 0 &&
          (best < 0 || c.size() > added_[size_t(best)].content.size())) {
        best = static_cast<int>(k);
      }
    }
    if (best >= 0) {
      *at = i;
      return best;
    }
  }
  return -1;
}

Status Tokenizer::EncodeSegment(std::string_view text, EncodeScratch& scratch,
                                std::vector<uint32_t>* ids) const {
  if (text.empty()) return Status::Ok();
  if (nfc_ && !IsAscii(text)) {
    utf8proc_uint8_t* out = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                static_cast<utf8proc_ssize_t>(text.size()), &out,
                                static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) return InvalidArgumentError("tokenizer: NFC failed: {}", utf8proc_errmsg(n));
    scratch.normalized.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    text = scratch.normalized;
  }
  if (const Regex* re = pre_.sole_regex()) {
    scratch.ranges.clear();
    RETURN_IF_ERROR(re->SplitIsolated(text, scratch.regex, &scratch.ranges));
    for (auto [b, e] : scratch.ranges) {
      bpe_.EncodePiece(text.substr(b, e - b), &scratch.cache, ids);
    }
    return Status::Ok();
  }
  scratch.pieces.clear();
  RETURN_IF_ERROR(pre_.Split(text, scratch.regex, &scratch.pieces));
  for (const std::string& p : scratch.pieces) bpe_.EncodePiece(p, &scratch.cache, ids);
  return Status::Ok();
}

Status Tokenizer::Encode(std::string_view text, EncodeScratch& scratch,
                         std::vector<uint32_t>* ids) const {
  if (int64_t bad = FindInvalidUtf8(text); bad >= 0) {
    return InvalidArgumentError("tokenizer: text is not valid UTF-8 at byte {}", bad);
  }
  scratch.regex.StartText(text.size());  // one match budget for the whole text
  size_t pos = 0, at = 0;
  while (pos < text.size()) {
    const int k = added_.empty() ? -1 : FindAdded(text, pos, &at);
    if (k < 0) break;
    RETURN_IF_ERROR(EncodeSegment(text.substr(pos, at - pos), scratch, ids));
    ids->push_back(added_[size_t(k)].id);
    pos = at + added_[size_t(k)].content.size();
  }
  if (pos < text.size()) RETURN_IF_ERROR(EncodeSegment(text.substr(pos), scratch, ids));
  return Status::Ok();
}

Result<std::vector<uint32_t>> Tokenizer::Encode(std::string_view text,
                                                EncodeScratch& scratch) const {
  std::vector<uint32_t> ids;
  RETURN_IF_ERROR(Encode(text, scratch, &ids));
  return ids;
}

std::string Tokenizer::Decode(const std::vector<uint32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (uint32_t id : ids) {
    auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) {
      const AddedToken* added = &added_[it->second];
      if (skip_special && added->special) continue;
      auto raw = ByteLevelToBytes(added->content);
      bytes += raw ? *raw : added->content;
    } else if (const std::string* t = bpe_.TokenBytes(id)) {
      bytes += *t;
    }
  }
  return LossyUtf8(bytes);
}

std::vector<Tokenizer::AddedMatch> Tokenizer::MatchAdded(std::string_view text) const {
  std::vector<AddedMatch> out;
  size_t pos = 0, at = 0;
  while (pos < text.size() && !added_.empty()) {
    const int k = FindAdded(text, pos, &at);
    if (k < 0) break;
    const AddedToken& a = added_[size_t(k)];
    out.push_back({at, at + a.content.size(), a.id});
    pos = at + a.content.size();
  }
  return out;
}

const std::string* Tokenizer::TokenBytes(uint32_t id) const {
  auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return &added_[it->second].content;
  return bpe_.TokenBytes(id);
}

int64_t Tokenizer::TokenId(std::string_view text) const {
  for (const auto& a : added_) {
    if (a.content == text) return a.id;
  }
  return bpe_.IdOfBytes(text);
}

}  // namespace tandem::tokenizer
