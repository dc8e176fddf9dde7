// Fuzzes tokenizer.json (a model's tokenizer, text nobody reviewed): Tokenizer::Load refuses
// what it does not implement with an error, never an exception; a tokenizer it accepts then
// encodes a text: every id is one it knows and below vocab_bound, encoding again (the BPE
// cache warm) gives the same ids, both merge strategies agree, added-token matches lie in
// order inside the text, and decoding gives valid UTF-8.
//
// Input layout: [n:1][text: n bytes][tokenizer.json: the rest].
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/utf8.h"
#include "fuzz/fuzz_util.h"

using namespace tandem::tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t n = std::min<size_t>(data[0], size - 1);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), n);
  static const std::string path = tandem::fuzz::ScratchPath("tokenizer.json");
  tandem::fuzz::WriteFile(path, data + 1 + n, size - 1 - n);
  auto tok = Tokenizer::Load(path);
  if (!tok.ok()) return 0;

  EncodeScratch scratch;
  auto ids = tok->Encode(text, scratch);
  if (!ids.ok()) return 0;  // invalid UTF-8, or a pattern over its match budget
  for (uint32_t id : *ids) {
    TANDEM_FUZZ_ASSERT(id < tok->vocab_bound() && tok->TokenBytes(id) != nullptr);
  }
  auto again = tok->Encode(text, scratch);
  TANDEM_FUZZ_ASSERT(again.ok() && *again == *ids);

  // The raw bytes as byte-level symbols, merged both ways.
  std::vector<uint32_t> scan, heap;
  for (char c : text) scan.push_back(uint32_t(tok->model().IdOfBytes(std::string(1, c))));
  heap = scan;
  tok->model().Merge(&scan, BpeModel::Strategy::kScan);
  tok->model().Merge(&heap, BpeModel::Strategy::kHeap);
  TANDEM_FUZZ_ASSERT(scan == heap);

  size_t end = 0;
  for (const Tokenizer::AddedMatch& m : tok->MatchAdded(text)) {
    TANDEM_FUZZ_ASSERT(m.begin >= end && m.begin < m.end && m.end <= text.size());
    TANDEM_FUZZ_ASSERT(tok->IsAdded(m.id));
    end = m.end;
  }
  TANDEM_FUZZ_ASSERT(FindInvalidUtf8(tok->Decode(*ids)) < 0);
  TANDEM_FUZZ_ASSERT(FindInvalidUtf8(tok->Decode(*ids, /*skip_special=*/true)) < 0);
  return 0;
}
