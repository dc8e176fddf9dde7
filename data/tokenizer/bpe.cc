#include "data/tokenizer/bpe.h"

#include <queue>

#include <nlohmann/json.hpp>

#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/utf8.h"
#include "runtime/core/json_parse.h"

namespace tandem::tokenizer {
namespace {

uint64_t Mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

bool IsUnset(const nlohmann::json& model, const char* key) {
  auto it = model.find(key);
  if (it == model.end() || it->is_null()) return true;
  if (it->is_string()) return it->get_ref<const std::string&>().empty();
  if (it->is_boolean()) return !it->get<bool>();
  return false;
}

}  // namespace

const std::vector<uint32_t>* BpeCache::Find(std::string_view piece) const {
  auto it = map_.find(std::string(piece));
  return it == map_.end() ? nullptr : &it->second;
}

void BpeCache::Insert(std::string_view piece, const std::vector<uint32_t>& ids) {
  if (map_.size() >= capacity_) map_.clear();
  map_.emplace(std::string(piece), ids);
}

Result<BpeModel> BpeModel::Build(const nlohmann::json& model) {
  ASSIGN_OR_RETURN(const std::string type, StringField(model, "type", "model", "BPE"));
  if (type != "BPE") {
    return InvalidArgumentError(
        "tokenizer.json: model type '{}' is not implemented (tandem implements byte-level BPE)",
        type);
  }
  for (const char* key : {"dropout", "unk_token", "continuing_subword_prefix",
                          "end_of_word_suffix", "byte_fallback"}) {
    if (!IsUnset(model, key)) {
      return InvalidArgumentError("tokenizer.json: model.{} = {} is not implemented", key,
                                  DescribeJson(model[key]));
    }
  }
  auto vocab = model.find("vocab");
  auto merges = model.find("merges");
  if (vocab == model.end() || !vocab->is_object() || merges == model.end() ||
      !merges->is_array()) {
    return InvalidArgumentError("tokenizer.json: model needs a 'vocab' object and 'merges' array");
  }
  BpeModel m;
  ASSIGN_OR_RETURN(m.ignore_merges_, BoolField(model, "ignore_merges", "model", false));
  m.vocab_entries_ = vocab->size();
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_unsigned()) {
      return InvalidArgumentError("tokenizer.json: model.vocab['{}'] is not an id", it.key());
    }
    const uint64_t id = it.value().get<uint64_t>();
    // A BPE vocabulary numbers its entries 0..n-1; a larger id is corrupt, and would size the
    // id tables by it (2^31 - 1 would ask for tens of GB).
    if (id >= vocab->size()) {
      return InvalidArgumentError(
          "tokenizer.json: model.vocab['{}'] = {} is not below the vocabulary's {} entries",
          it.key(), id, vocab->size());
    }
    auto bytes = ByteLevelToBytes(it.key());
    if (FindInvalidUtf8(it.key()) >= 0) bytes.reset();
    if (id >= m.id_to_bytes_.size()) {
      m.id_to_bytes_.resize(id + 1);
      m.has_id_.resize(id + 1, 0);
    }
    m.has_id_[id] = 1;
    // An entry outside the byte alphabet cannot be produced by encoding; it decodes as text.
    m.id_to_bytes_[id] = bytes ? *bytes : it.key();
    if (bytes) {
      m.bytes_to_id_.emplace(*bytes, static_cast<uint32_t>(id));
      if (bytes->size() == 1) {
        const auto b = static_cast<uint8_t>((*bytes)[0]);
        m.byte_ids_[b] = static_cast<uint32_t>(id);
        m.byte_known_[b] = true;
      }
    }
  }
  size_t cap = 1;
  while (cap < merges->size() * 2 + 16) cap <<= 1;
  m.table_.assign(cap, MergeSlot{});
  uint32_t rank = 0;
  for (const auto& mg : *merges) {
    std::string a, b;
    if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
      a = mg[0].get<std::string>();
      b = mg[1].get<std::string>();
    } else if (mg.is_string()) {
      const std::string& s = mg.get_ref<const std::string&>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) {
        return InvalidArgumentError("tokenizer.json: merges[{}] = '{}' has no space", rank, s);
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      return InvalidArgumentError("tokenizer.json: merges[{}] is not a pair", rank);
    }
    auto ab = ByteLevelToBytes(a), bb = ByteLevelToBytes(b);
    if (!ab || !bb) {
      return InvalidArgumentError("tokenizer.json: merges[{}] '{} {}' is not byte-level", rank, a,
                                  b);
    }
    const int64_t l = m.IdOfBytes(*ab), r = m.IdOfBytes(*bb), lr = m.IdOfBytes(*ab + *bb);
    if (l < 0 || r < 0 || lr < 0) {
      return InvalidArgumentError(
          "tokenizer.json: merges[{}] '{} {}' names a token missing from the vocabulary", rank,
          a, b);
    }
    if (!m.FindMerge(uint32_t(l), uint32_t(r))) {
      m.InsertMerge(uint32_t(l), uint32_t(r), rank, uint32_t(lr));
    }
    ++rank;
  }
  m.merges_ = rank;
  for (int b = 0; b < 256; ++b) {
    if (!m.byte_known_[b]) {
      return InvalidArgumentError("tokenizer.json: byte 0x{:02X} has no vocabulary entry", b);
    }
  }
  return m;
}

const BpeModel::MergeSlot* BpeModel::FindMerge(uint32_t left, uint32_t right) const {
  const uint64_t key = (uint64_t(left) << 32) | right;
  const size_t mask = table_.size() - 1;
  for (size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
    const MergeSlot& s = table_[i];
    if (s.key == key) return &s;
    if (s.key == ~0ull) return nullptr;
  }
}

void BpeModel::InsertMerge(uint32_t left, uint32_t right, uint32_t rank, uint32_t merged) {
  const uint64_t key = (uint64_t(left) << 32) | right;
  const size_t mask = table_.size() - 1;
  size_t i = Mix(key) & mask;
  while (table_[i].key != ~0ull) i = (i + 1) & mask;
  table_[i] = MergeSlot{key, rank, merged};
}

void BpeModel::MergeScan(std::vector<uint32_t>* symbols) const {
  std::vector<uint32_t>& s = *symbols;
  while (s.size() > 1) {
    uint32_t best_rank = UINT32_MAX, best_left = 0, best_right = 0, merged = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const MergeSlot* m = FindMerge(s[i], s[i + 1]);
      if (m && m->rank < best_rank) {
        best_rank = m->rank;
        best_left = s[i];
        best_right = s[i + 1];
        merged = m->merged;
      }
    }
    if (best_rank == UINT32_MAX) return;
    // Every occurrence of the best pair, left to right and not overlapping: what merging by
    // (rank, position) from a heap produces.
    size_t w = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i] == best_left && s[i + 1] == best_right) {
        s[w++] = merged;
        ++i;
      } else {
        s[w++] = s[i];
      }
    }
    s.resize(w);
  }
}

void BpeModel::MergeHeap(std::vector<uint32_t>* symbols) const {
  std::vector<uint32_t>& s = *symbols;
  const size_t n = s.size();
  if (n < 2) return;
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNone : i - 1;
    next[i] = i + 1 == n ? kNone : i + 1;
  }
  std::vector<uint8_t> alive(n, 1);
  struct Cand {
    uint32_t rank;
    size_t pos;
    uint32_t left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](size_t i) {
    if (i == kNone || next[i] == kNone) return;
    if (const MergeSlot* m = FindMerge(s[i], s[next[i]])) heap.push({m->rank, i, s[i], s[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const size_t r = next[c.pos];
    if (!alive[c.pos] || r == kNone || s[c.pos] != c.left || s[r] != c.right) continue;
    s[c.pos] = FindMerge(c.left, c.right)->merged;
    alive[r] = 0;
    next[c.pos] = next[r];
    if (next[r] != kNone) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) s[w++] = s[i];
  }
  s.resize(w);
}

void BpeModel::Merge(std::vector<uint32_t>* symbols, Strategy strategy) const {
  if (strategy == Strategy::kAuto) {
    strategy = symbols->size() > 48 ? Strategy::kHeap : Strategy::kScan;
  }
  if (strategy == Strategy::kHeap) MergeHeap(symbols);
  else MergeScan(symbols);
}

void BpeModel::EncodePiece(std::string_view piece, BpeCache* cache,
                           std::vector<uint32_t>* out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (cache) {
    if (const auto* hit = cache->Find(piece)) {
      out->insert(out->end(), hit->begin(), hit->end());
      return;
    }
  }
  std::vector<uint32_t> symbols;
  const int64_t whole = ignore_merges_ ? IdOfBytes(piece) : -1;
  if (whole >= 0) {
    symbols.push_back(static_cast<uint32_t>(whole));
  } else {
    symbols.reserve(piece.size());
    for (char c : piece) symbols.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    Merge(&symbols);
  }
  if (cache) cache->Insert(piece, symbols);
  out->insert(out->end(), symbols.begin(), symbols.end());
}

const std::string* BpeModel::TokenBytes(uint32_t id) const {
  if (id >= has_id_.size() || !has_id_[id]) return nullptr;
  return &id_to_bytes_[id];
}

int64_t BpeModel::IdOfBytes(std::string_view bytes) const {
  auto it = bytes_to_id_.find(std::string(bytes));
  return it == bytes_to_id_.end() ? -1 : int64_t(it->second);
}

}  // namespace tandem::tokenizer
