// `tandem data` as the CLI runs it (tools/data_command.h), linked against its own library
// only: pre-tokenized JSONL to a binary set and chat JSONL to a sharded set, with the exit
// codes of bad input and bad usage.
#include "tools/data_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/corpus/corpus.h"
#include "data/corpus/sharded_set.h"
#include "data/tokenizer/fixture.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

std::string Scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(CliDataTest, PreTokenizedJsonlToABinarySet) {
  const std::string dir = Scratch("cli_data_jsonl");
  const std::string jsonl = dir + "/d.jsonl", set = dir + "/d.bin";
  Write(jsonl, "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 5]}\n{\"input_ids\": [6]}\n");
  ASSERT_EQ(Data(jsonl, set, 0, false), 0);
  auto back = data::OpenBinary(set, data::BinaryCheck::kFull);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->documents(), 3);
  EXPECT_EQ(back->tokens(), 6);
  EXPECT_EQ(Data(set, "", 7, false), 0);  // validates: every id below 7
  EXPECT_EQ(Data(set, "", 6, false), 2);  // id 6 is not below 6
  EXPECT_EQ(Data(dir + "/missing.jsonl", "", 0, false), 2);
  EXPECT_EQ(Data(set, dir + "/again.bin", 0, false), 2);  // already a binary set
}

TEST(CliDataTest, ChatJsonlToAShardedSet) {
  const std::string dir = Scratch("cli_data_chat");
  const std::string input = dir + "/chats.jsonl", set = dir + "/chats.tdata";
  std::string text;
  for (int k = 0; k < 5; ++k) {
    text += R"({"messages": [{"role": "user", "content": "question )" + std::to_string(k) +
            R"("}, {"role": "assistant", "content": "answer )" + std::to_string(k) + "\"}]}\n";
  }
  Write(input, text);
  ChatDataArgs args;
  args.model = tokenizer::Qwen3FixtureDir();
  args.threads = 1;
  ASSERT_EQ(ChatData(input, set, args), 0) << "model " << args.model
                                           << " (run scripts/install-deps.sh)";
  auto back = data::OpenShardedSet(set, data::BinaryCheck::kFull);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->documents(), 5);

  ChatDataArgs resume_without_output = args;
  resume_without_output.resume = true;
  EXPECT_EQ(ChatData(input, "", resume_without_output), 2);
  ChatDataArgs no_model = args;
  no_model.model = dir + "/no-such-model";
  EXPECT_EQ(ChatData(input, "", no_model), 2);
  ChatDataArgs bad_shards = args;
  bad_shards.shard_tokens = 0;
  EXPECT_EQ(ChatData(input, dir + "/other.tdata", bad_shards), 2);
}

}  // namespace
}  // namespace tandem::cli
