// Sharded sets: shards written and read back as one corpus in order; an unfinished set is
// refused for training and resumable; shards a kill left unlisted are removed on resume;
// a directory with foreign files is never emptied.
#include "data/corpus/sharded_set.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tandem::data {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() /
                     ("tandem_sharded_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  return d.string();
}

// Documents {first, first+1, ...} of the given lengths, mask 1 on odd positions.
Corpus Make(uint32_t first, const std::vector<int>& lengths) {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets{0};
  std::vector<uint8_t> mask;
  for (int len : lengths) {
    for (int k = 0; k < len; ++k) {
      tokens.push_back(first++);
      mask.push_back(uint8_t(k % 2));
    }
    offsets.push_back(tokens.size());
  }
  return Corpus::FromVectors(tokens, offsets, mask, "test");
}

TEST(ShardedSetTest, ShardsReadBackAsOneCorpusInOrder) {
  const std::string dir = FreshDir("order");
  auto w = ShardedSetWriter::Create(dir);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(w->AddShard(Make(0, {3, 1}), R"({"at": 1})").ok());
  ASSERT_TRUE(w->AddShard(Make(4, {2}), R"({"at": 2})").ok());
  ASSERT_TRUE(w->AddShard(Make(6, {1, 4, 2}), R"({"at": 3})").ok());
  // Not finished: training refuses it, naming the way out.
  auto early = OpenShardedSet(dir, BinaryCheck::kFull);
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("--resume"), std::string::npos);
  ASSERT_TRUE(w->Finish(R"({"at": "end"})").ok());

  auto c = OpenShardedSet(dir, BinaryCheck::kFull);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->is_concat());
  ASSERT_EQ(c->documents(), 6);
  EXPECT_EQ(c->tokens(), 13);
  EXPECT_EQ(c->vocab_bound(), 13u);
  uint32_t next = 0;
  const std::vector<size_t> lengths{3, 1, 2, 1, 4, 2};
  for (int64_t d = 0; d < 6; ++d) {
    Document doc = c->doc(d);
    ASSERT_EQ(doc.ids.size(), lengths[size_t(d)]) << d;
    for (size_t k = 0; k < doc.ids.size(); ++k) {
      EXPECT_EQ(doc.ids[k], next++);
      EXPECT_EQ(doc.mask[k], k % 2);
    }
  }
  auto m = ReadShardManifest(dir);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->complete);
  EXPECT_EQ(m->producer_state, R"({"at":"end"})");
}

TEST(ShardedSetTest, ResumeDropsShardsTheManifestDoesNotList) {
  const std::string dir = FreshDir("resume");
  {
    auto w = ShardedSetWriter::Create(dir);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->AddShard(Make(0, {2}), R"({"line": 5})").ok());
  }
  // What a kill between writing shard 1 and recording it leaves behind.
  ASSERT_TRUE(WriteBinary(Make(100, {7}), dir + "/shard-00001").ok());
  ASSERT_TRUE(WriteBinary(Make(100, {7}), dir + "/shard-00002.tmp").ok());
  auto again = ShardedSetWriter::Create(dir);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--resume"), std::string::npos);

  auto w = ShardedSetWriter::Resume(dir);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->manifest().producer_state, R"({"line":5})");
  EXPECT_EQ(w->manifest().shards.size(), 1u);
  EXPECT_FALSE(fs::exists(dir + "/shard-00001"));
  EXPECT_FALSE(fs::exists(dir + "/shard-00002.tmp"));
  ASSERT_TRUE(w->AddShard(Make(2, {1}), "{}").ok());
  ASSERT_TRUE(w->Finish("{}").ok());
  auto c = OpenShardedSet(dir, BinaryCheck::kFull);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->documents(), 2);
  EXPECT_EQ(c->doc(1).ids[0], 2u);
  EXPECT_FALSE(ShardedSetWriter::Resume(dir).ok());  // complete: nothing to resume
}

TEST(ShardedSetTest, ForeignFilesAreNeverRemoved) {
  const std::string dir = FreshDir("foreign");
  fs::create_directories(dir);
  std::ofstream(dir + "/notes.txt") << "mine";
  auto w = ShardedSetWriter::Create(dir);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("notes.txt"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
}

TEST(ShardedSetTest, ADirectoryHoldingNoDataSetIsRefusedUntouched) {
  // Names a data set uses, but no set: a mistyped -o must neither remove nor overwrite them.
  const std::string dir = FreshDir("not_a_set");
  fs::create_directories(dir);
  std::ofstream(dir + "/header") << "my header";
  std::ofstream(dir + "/tokens.u32") << "my tokens";
  auto w = ShardedSetWriter::Create(dir);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("holds no tandem data set"), std::string::npos)
      << w.status().ToString();
  EXPECT_TRUE(fs::exists(dir + "/header") && fs::exists(dir + "/tokens.u32"));
  EXPECT_FALSE(CheckDataSetOutput(dir).ok());
  // An empty directory, a binary set and a sharded set may be written over.
  const std::string empty = FreshDir("empty_out");
  fs::create_directories(empty);
  EXPECT_TRUE(CheckDataSetOutput(empty).ok());
  const std::string binary = FreshDir("binary_out");
  ASSERT_TRUE(WriteBinary(Make(0, {2}), binary).ok());
  EXPECT_TRUE(CheckDataSetOutput(binary).ok());
  EXPECT_TRUE(ShardedSetWriter::Create(binary).ok());
  EXPECT_TRUE(CheckDataSetOutput(binary).ok());  // now a sharded set
}

TEST(ShardedSetTest, TamperedManifestIsDataLossNamingTheField) {
  const std::string dir = FreshDir("tampered");
  auto w = ShardedSetWriter::Create(dir);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->AddShard(Make(0, {2, 2}), "{}").ok());
  const std::string shard =
      R"({"name": "shard-00000", "documents": 2, "tokens": 4})";
  const std::pair<std::string, std::string> cases[] = {
      // A field of the wrong type threw nlohmann::type_error (an abort).
      {R"({"kind": 5, "version": 1, "complete": true, "shards": []})", "\"kind\""},
      {R"({"kind": "tandem sharded set", "version": "1", "complete": true, "shards": []})",
       "\"version\""},
      {R"({"kind": "tandem sharded set", "version": 1, "complete": 1, "shards": []})",
       "\"complete\""},
      {R"({"kind": "tandem sharded set", "version": 1, "complete": true, "shards": {}})",
       "\"shards\""},
      {R"({"kind": "tandem sharded set", "version": 1, "complete": true, "shards": [)" +
           std::string(R"({"name": "shard-00000", "documents": -3, "tokens": 4})") + "]}",
       "shards[0] has -3 documents"},
      {R"({"kind": "tandem sharded set", "version": 1, "complete": true, "shards": [)" + shard +
           ", " + shard + "]}",
       "shards[1] is named 'shard-00000'"},
      {"[" + std::string(100000, '[') + std::string(100000, ']') + "]", "nested deeper"},
  };
  for (const auto& [text, field] : cases) {
    std::ofstream(dir + "/shards.json", std::ios::trunc) << text;
    auto m = ReadShardManifest(dir);
    ASSERT_FALSE(m.ok()) << text.substr(0, 80);
    EXPECT_EQ(m.status().code(), StatusCode::kDataLoss) << m.status().ToString();
    EXPECT_NE(m.status().message().find(field), std::string::npos) << m.status().ToString();
    EXPECT_FALSE(OpenShardedSet(dir, BinaryCheck::kStructure).ok());
    EXPECT_FALSE(ShardedSetWriter::Resume(dir).ok());
  }
}

TEST(ShardedSetTest, DiscardRemovesTheSetAndTheDirectoryItMade) {
  const std::string dir = FreshDir("discard");
  auto w = ShardedSetWriter::Create(dir);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->AddShard(Make(0, {2}), "{}").ok());
  ASSERT_TRUE(w->Discard().ok());
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(ShardedSetWriter::Create(dir).ok());  // nothing blocks a new one
}

TEST(ShardedSetTest, ManifestAndShardDisagreeingIsDataLoss) {
  const std::string dir = FreshDir("disagree");
  auto w = ShardedSetWriter::Create(dir);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->AddShard(Make(0, {2, 2}), "{}").ok());
  ASSERT_TRUE(w->Finish("{}").ok());
  ASSERT_TRUE(WriteBinary(Make(0, {2}), dir + "/shard-00000").ok());
  auto c = OpenShardedSet(dir, BinaryCheck::kStructure);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("shard-00000: 1 documents"), std::string::npos)
      << c.status().ToString();
  fs::remove_all(dir + "/shard-00000");
  auto gone = OpenShardedSet(dir, BinaryCheck::kStructure);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("missing"), std::string::npos);
}

// A resumed conversion appends to the shards the manifest lists; one whose counts differ
// from its entry (a tampered manifest or shard) made a finished set that would not open
// (found by fuzz/chat_set_fuzz.cc). Resume refuses it at once, naming the shard.
TEST(ShardedSetTest, ResumeRefusesAShardTheManifestMiscounts) {
  const std::string dir = FreshDir("resume_miscount");
  {
    auto w = ShardedSetWriter::Create(dir);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->AddShard(Make(0, {2, 3}), "{}").ok());
  }
  ASSERT_TRUE(WriteBinary(Make(0, {5}), dir + "/shard-00000").ok());  // 1 document, 5 tokens
  auto w = ShardedSetWriter::Resume(dir);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(w.status().message().find("shard-00000: 1 documents and 5 tokens"), std::string::npos)
      << w.status().ToString();
  EXPECT_TRUE(fs::exists(dir + "/shard-00000"));  // nothing removed
  fs::remove_all(dir + "/shard-00000");
  auto gone = ShardedSetWriter::Resume(dir);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("missing"), std::string::npos);
}

TEST(ShardedSetTest, ConcatRefusesMixedMasks) {
  Corpus with = Make(0, {2});
  Corpus without = Corpus::FromVectors({1, 2}, {0, 2}, {}, "plain");
  auto c = Corpus::Concat({with, without}, "mixed");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("loss mask"), std::string::npos);
}

}  // namespace
}  // namespace tandem::data
