#include "data/corpus/packer.h"

#include <map>
#include <set>

#include <gtest/gtest.h>

namespace tandem::data {
namespace {

// Documents of varied lengths (1..3*max) whose tokens encode (document, index) so a test can
// tell which token of which document landed where: token = doc * 1000 + index.
std::shared_ptr<const Corpus> MakeCorpus(int docs, int max_len, bool with_mask) {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets = {0};
  std::vector<uint8_t> mask;
  for (int d = 0; d < docs; ++d) {
    const int len = 1 + (d * 37 + 11) % max_len;
    for (int t = 0; t < len; ++t) {
      tokens.push_back(static_cast<uint32_t>(d * 1000 + t));
      if (with_mask) mask.push_back((d + t) % 3 == 0 ? 0 : 1);
    }
    offsets.push_back(tokens.size());
  }
  return std::make_shared<const Corpus>(
      Corpus::FromVectors(tokens, offsets, mask, "test-corpus"));
}

std::vector<TokenBatch> Drain(BatchSource& src, int limit = 100000) {
  std::vector<TokenBatch> out;
  for (int i = 0; i < limit; ++i) {
    auto b = src.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok() || !b->has_value()) break;
    out.push_back(std::move(**b));
  }
  return out;
}

std::unique_ptr<Packer> MakePacker(std::shared_ptr<const Corpus> c, PackerOptions o) {
  auto p = Packer::Create(std::move(c), o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

// Checks the structural invariants of one batch against the corpus it came from.
void CheckBatch(const TokenBatch& b, const Corpus& c, int64_t max_tokens) {
  ASSERT_GT(b.tokens(), 0);
  EXPECT_LE(b.tokens(), max_tokens);
  ASSERT_EQ(b.position_ids.size(), b.input_ids.size());
  ASSERT_EQ(b.loss_mask.size(), b.input_ids.size());
  ASSERT_GE(b.cu_seqlens.size(), 2u);
  EXPECT_EQ(b.cu_seqlens.front(), 0);
  EXPECT_EQ(b.cu_seqlens.back(), b.tokens());
  int32_t longest = 0;
  for (int64_t s = 0; s < b.documents(); ++s) {
    const int32_t begin = b.cu_seqlens[s], end = b.cu_seqlens[s + 1];
    ASSERT_LT(begin, end);
    longest = std::max(longest, end - begin);
    const uint32_t doc = static_cast<uint32_t>(b.input_ids[begin]) / 1000;
    const Document d = c.doc(doc);
    for (int32_t t = begin; t < end; ++t) {
      const int32_t pos = b.position_ids[t];
      // Positions continue through the segment and match the token's index in its document.
      EXPECT_EQ(pos, b.position_ids[begin] + (t - begin));
      EXPECT_EQ(static_cast<uint32_t>(b.input_ids[t]), doc * 1000 + uint32_t(pos));
      const uint8_t want = t == begin ? 0 : (d.mask.empty() ? 1 : d.mask[pos]);
      EXPECT_EQ(b.loss_mask[t], want) << "segment " << s << " token " << t;
    }
  }
  EXPECT_EQ(b.max_seqlen, longest);
}

TEST(PackerTest, EveryTokenOnceAcrossShardsAndBatchesRespectLimits) {
  auto corpus = MakeCorpus(/*docs=*/57, /*max_len=*/50, /*with_mask=*/true);
  for (int replicas : {1, 2, 3}) {
    std::map<uint32_t, int> seen;  // token -> times
    std::set<uint64_t> indices;
    for (int r = 0; r < replicas; ++r) {
      auto p = MakePacker(corpus, {.max_tokens = 20, .epochs = 1, .seed = 3, .replica = r,
                                   .replicas = replicas});
      for (const TokenBatch& b : Drain(*p)) {
        CheckBatch(b, *corpus, 20);
        EXPECT_EQ(b.index % replicas, uint64_t(r));
        EXPECT_TRUE(indices.insert(b.index).second);
        for (int32_t id : b.input_ids) ++seen[uint32_t(id)];
      }
    }
    EXPECT_EQ(int64_t(seen.size()), corpus->tokens());
    for (const auto& [tok, n] : seen) ASSERT_EQ(n, 1) << "token " << tok;
    EXPECT_EQ(*indices.rbegin() + 1, indices.size());  // global indices 0..B-1
  }
}

TEST(PackerTest, TruncateKeepsTheFirstMaxTokensOfEachDocument) {
  auto corpus = MakeCorpus(20, 50, false);
  auto p = MakePacker(corpus, {.max_tokens = 16, .shuffle = false,
                               .long_documents = LongDocuments::kTruncate});
  int64_t tokens = 0, expected = 0;
  for (const TokenBatch& b : Drain(*p)) {
    CheckBatch(b, *corpus, 16);
    for (int64_t s = 0; s < b.documents(); ++s) EXPECT_EQ(b.position_ids[b.cu_seqlens[s]], 0);
    tokens += b.tokens();
  }
  for (int64_t d = 0; d < corpus->documents(); ++d) {
    expected += std::min<int64_t>(16, corpus->doc(d).ids.size());
  }
  EXPECT_EQ(tokens, expected);
  EXPECT_NE(p->Describe().find("tokens truncated"), std::string::npos) << p->Describe();
}

std::vector<uint64_t> Checksums(const std::vector<TokenBatch>& bs) {
  std::vector<uint64_t> out;
  for (const auto& b : bs) out.push_back(b.Checksum());
  return out;
}

TEST(PackerTest, ShuffleIsDeterministicPerSeedAndEpoch) {
  auto corpus = MakeCorpus(80, 30, false);
  PackerOptions o{.max_tokens = 64, .epochs = 2, .seed = 7};
  auto a = Drain(*MakePacker(corpus, o));
  auto b = Drain(*MakePacker(corpus, o));
  EXPECT_EQ(Checksums(a), Checksums(b));
  o.seed = 8;
  EXPECT_NE(Checksums(a), Checksums(Drain(*MakePacker(corpus, o))));
  // Two epochs differ in order but hold the same tokens.
  std::vector<uint64_t> e0, e1;
  std::multiset<int32_t> t0, t1;
  for (const auto& x : a) {
    (x.epoch == 0 ? e0 : e1).push_back(x.Checksum());
    for (int32_t id : x.input_ids) (x.epoch == 0 ? t0 : t1).insert(id);
  }
  EXPECT_NE(e0, e1);
  EXPECT_EQ(t0, t1);
  // Without shuffle, documents come in file order.
  auto plain = Drain(*MakePacker(corpus, {.max_tokens = 64, .shuffle = false}));
  EXPECT_EQ(plain.front().input_ids.front(), 0);
}

TEST(PackerTest, SeekResumesExactly) {
  auto corpus = MakeCorpus(40, 30, true);
  PackerOptions o{.max_tokens = 48, .epochs = 3, .seed = 1, .replica = 1, .replicas = 2};
  auto full = Checksums(Drain(*MakePacker(corpus, o)));
  ASSERT_GT(full.size(), 10u);
  for (size_t k : {size_t{0}, size_t{1}, full.size() / 3 + 1, full.size() - 1, full.size()}) {
    auto first = MakePacker(corpus, o);
    for (size_t i = 0; i < k; ++i) ASSERT_TRUE(first->Next().ok());
    const DataPosition pos = first->position();
    auto resumed = MakePacker(corpus, o);
    ASSERT_TRUE(resumed->Seek(pos).ok());
    EXPECT_EQ(resumed->position(), pos);
    auto rest = Checksums(Drain(*resumed));
    EXPECT_EQ(rest, std::vector<uint64_t>(full.begin() + long(k), full.end())) << "k = " << k;
  }
}

TEST(PackerTest, InfiniteEpochsKeepGoing) {
  auto corpus = MakeCorpus(5, 10, false);
  auto p = MakePacker(corpus, {.max_tokens = 8, .epochs = 0});
  const int64_t per_epoch = p->GlobalBatches(0);
  auto got = Drain(*p, int(per_epoch * 4 + 1));
  ASSERT_EQ(int64_t(got.size()), per_epoch * 4 + 1);
  EXPECT_GE(got.back().epoch, 3);
}

TEST(PackerTest, RejectsBadOptionsAndBadSeeks) {
  auto corpus = MakeCorpus(3, 5, false);
  EXPECT_FALSE(Packer::Create(corpus, {.max_tokens = 0}).ok());
  EXPECT_FALSE(Packer::Create(corpus, {.epochs = -1}).ok());
  EXPECT_FALSE(Packer::Create(corpus, {.replica = 2, .replicas = 2}).ok());
  // 3 short documents fill one batch: too few for 2 replicas.
  auto few = Packer::Create(corpus, {.max_tokens = 100, .replicas = 2});
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("fewer than the 2 target replicas"), std::string::npos);
  auto p = MakePacker(corpus, {.max_tokens = 2, .epochs = 1});
  EXPECT_FALSE(p->Seek({.epoch = 0, .next_batch = 1000}).ok());
  EXPECT_FALSE(p->Seek({.epoch = 2, .next_batch = 0}).ok());
  EXPECT_TRUE(p->Seek({.epoch = 1, .next_batch = 0}).ok());
  auto end = p->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST(TokenBatchTest, ChecksumSeesEveryField) {
  TokenBatch b{.input_ids = {1, 2, 3}, .position_ids = {0, 1, 0}, .cu_seqlens = {0, 2, 3},
               .loss_mask = {0, 1, 0}};
  const uint64_t base = b.Checksum();
  TokenBatch c = b;
  c.input_ids[1] = 5;
  EXPECT_NE(c.Checksum(), base);
  c = b;
  c.position_ids[2] = 2;
  EXPECT_NE(c.Checksum(), base);
  c = b;
  c.cu_seqlens[1] = 1;
  EXPECT_NE(c.Checksum(), base);
  c = b;
  c.loss_mask[0] = 1;
  EXPECT_NE(c.Checksum(), base);
}

}  // namespace
}  // namespace tandem::data
