// Fuzzes the binary data set (docs/data-format.md): the 64-byte header (documents, tokens,
// vocab bound, flags), offsets.u64, tokens.u32 and loss_mask.u8, as OpenBinary maps them,
// then packing batches from what it accepts. Nothing may read outside the mappings (ASan),
// and the packer never hands out an id at or above the vocab it was given.
//
// Input layout: [flags:1][offsets length:2][tokens length:2][header:64][offsets][tokens]
// [mask: the rest]. flags bit 0: write loss_mask.u8; bit 1: skip_bad; bits 2-3: vocab
// (0, 64, 1000, the header's bound); bits 4-7: max_tokens = 1 + 4 * value.
#include <algorithm>
#include <cstring>
#include <memory>

#include "data/corpus/corpus.h"
#include "data/corpus/packer.h"
#include "fuzz/fuzz_util.h"

using namespace tandem::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t flags = data[0];
  const size_t n_offsets = size_t{data[1]} | size_t{data[2]} << 8;
  const size_t n_tokens = size_t{data[3]} | size_t{data[4]} << 8;
  data += 5;
  size -= 5;
  auto take = [&](size_t want) {
    const size_t n = std::min(want, size);
    std::string s(reinterpret_cast<const char*>(data), n);
    data += n;
    size -= n;
    return s;
  };
  const std::string header = take(64), offsets = take(n_offsets), tokens = take(n_tokens),
                    mask = take(size);
  static const std::string dir = tandem::fuzz::ScratchPath("set");
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  tandem::fuzz::WriteFile(dir + "/header", header.data(), header.size());
  tandem::fuzz::WriteFile(dir + "/offsets.u64", offsets.data(), offsets.size());
  tandem::fuzz::WriteFile(dir + "/tokens.u32", tokens.data(), tokens.size());
  if (flags & 1) {
    tandem::fuzz::WriteFile(dir + "/loss_mask.u8", mask.data(), mask.size());
  } else {
    std::filesystem::remove(dir + "/loss_mask.u8");
  }

  (void)OpenBinary(dir, BinaryCheck::kFull);
  auto corpus = OpenBinary(dir, BinaryCheck::kStructure);
  if (!corpus.ok()) return 0;
  int64_t total = 0;
  for (int64_t d = 0; d < corpus->documents(); ++d) total += corpus->doc(d).ids.size();
  TANDEM_FUZZ_ASSERT(total == corpus->tokens());

  PackerOptions o;
  o.skip_bad = (flags & 2) != 0;
  const int64_t vocabs[4] = {0, 64, 1000, int64_t{corpus->vocab_bound()}};
  o.vocab = vocabs[(flags >> 2) & 3];
  o.max_tokens = 1 + 4 * (flags >> 4);
  o.epochs = 1;
  auto packer = Packer::Create(std::make_shared<const Corpus>(std::move(corpus).value()), o);
  if (!packer.ok()) return 0;
  for (int i = 0; i < 64; ++i) {
    auto b = (*packer)->Next();
    if (!b.ok() || !b->has_value()) break;
    TANDEM_FUZZ_ASSERT((*b)->tokens() <= o.max_tokens);
    for (int32_t id : (*b)->input_ids) {
      TANDEM_FUZZ_ASSERT(id >= 0 && (o.vocab == 0 || id < o.vocab));
    }
  }
  return 0;
}
