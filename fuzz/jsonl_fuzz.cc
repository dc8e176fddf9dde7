// Fuzzes the JSONL reader (one {"input_ids": [...], "loss_mask": [...]} per line) with and
// without a vocab bound and skip_bad, then packs what it accepts: every id handed out is
// below the bound, and the skip counts add up.
//
// Input layout: [flags:1][file bytes]. flags bit 0: skip_bad; bits 1-2: vocab (0, 2, 300,
// 2^31); bits 3-7: max_tokens = 1 + 3 * value.
#include <memory>

#include "data/corpus/corpus.h"
#include "data/corpus/packer.h"
#include "fuzz/fuzz_util.h"

using namespace tandem::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  static const std::string path = tandem::fuzz::ScratchPath("data.jsonl");
  tandem::fuzz::WriteFile(path, data + 1, size - 1);
  JsonlOptions jo;
  jo.skip_bad = (flags & 1) != 0;
  const int64_t vocabs[4] = {0, 2, 300, int64_t{1} << 31};
  jo.vocab = vocabs[(flags >> 1) & 3];
  auto corpus = ReadJsonl(path, jo);
  if (!corpus.ok()) return 0;
  const SkipReport& skips = corpus->skips();
  int64_t by_reason = 0;
  for (const auto& [reason, n] : skips.by_reason) by_reason += n;
  TANDEM_FUZZ_ASSERT(by_reason == skips.skipped);
  TANDEM_FUZZ_ASSERT(jo.skip_bad || skips.skipped == 0);
  if (jo.vocab > 0) TANDEM_FUZZ_ASSERT(int64_t{corpus->vocab_bound()} <= jo.vocab);

  PackerOptions o;
  o.vocab = jo.vocab;
  o.max_tokens = 1 + 3 * (flags >> 3);
  auto packer = Packer::Create(std::make_shared<const Corpus>(std::move(corpus).value()), o);
  if (!packer.ok()) return 0;
  for (int i = 0; i < 64; ++i) {
    auto b = (*packer)->Next();
    TANDEM_FUZZ_ASSERT(b.ok());
    if (!b->has_value()) break;
    TANDEM_FUZZ_ASSERT((*b)->tokens() <= o.max_tokens);
    for (int32_t id : (*b)->input_ids) TANDEM_FUZZ_ASSERT(id >= 0 && (o.vocab == 0 || id < o.vocab));
  }
  return 0;
}
