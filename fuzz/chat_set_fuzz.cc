// Fuzzes what a resumed chat conversion reads back (`tandem data --model --resume`): the
// sharded set's manifest shards.json (data/corpus/sharded_set.h) and, inside it, the
// producer state with the conversion's settings and resume state (data/chat/chat_set.h,
// convert_state.h), against a chat JSONL input encoded with the Qwen3 fixture
// (fuzz_encoder.h). Each input starts from a fresh directory holding the manifest and one
// real shard, shard-00000 (2 documents, 5 tokens).
//   - ReadShardManifest: DataLoss for a malformed manifest; an accepted one lists shards
//     named shard-00000, shard-00001, ... in order, each with a document, and a producer
//     state that is JSON text; a complete one opens (OpenShardedSet) or is refused with an
//     error, and its counts are the manifest's.
//   - DecodeState on producer.convert: DataLoss naming the field; what it accepts encodes
//     and decodes back to the same counts and position.
//   - WriteChatSet with resume: refuses a foreign producer, other settings, a changed input or
//     a malformed state with an error, never an exception; what it finishes is a complete set
//     that opens.
//
// Input layout: [shards.json]\0[chats.jsonl] (no NUL: no input lines).
#include <filesystem>
#include <string>
#include <string_view>

#include "data/chat/chat_set.h"
#include "data/chat/convert_state.h"
#include "data/corpus/sharded_set.h"
#include "fuzz/fuzz_encoder.h"
#include "fuzz/fuzz_util.h"
#include "runtime/core/json_parse.h"

using namespace tandem;
using namespace tandem::chat_data;

namespace {

// The settings a resume must match (the seeds' producer.settings hold them).
ChatSetOptions Options() {
  ChatSetOptions o;
  o.resume = true;
  o.settings = {{"--model", "qwen3-fixture"}};
  o.convert.threads = 1;
  o.convert.shard_tokens = 64;
  o.convert.batch_bytes = 4096;
  return o;
}

void CheckStateRoundTrip(const nlohmann::ordered_json& convert) {
  ConvertResult counts;
  InputPosition at;
  InputIdentity input;
  const Status st = DecodeState(convert.dump(), "producer.convert", &counts, &at, &input);
  if (!st.ok()) {
    TANDEM_FUZZ_ASSERT(st.code() == StatusCode::kDataLoss);
    return;
  }
  TANDEM_FUZZ_ASSERT(at.byte >= 0 && at.line >= 0 && input.size >= 0);
  ConvertResult again;
  InputPosition at2;
  InputIdentity input2;
  TANDEM_FUZZ_ASSERT(DecodeState(EncodeState(counts, at, input), "again", &again, &at2, &input2).ok());
  TANDEM_FUZZ_ASSERT(again.lines == counts.lines && again.examples == counts.examples &&
                     again.tokens_out == counts.tokens_out && again.shards == counts.shards &&
                     again.bad == counts.bad && again.events == counts.events &&
                     again.format == counts.format);
  TANDEM_FUZZ_ASSERT(at2.byte == at.byte && at2.line == at.line && input2.size == input.size &&
                     input2.tail_hash == input.tail_hash);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::FixtureEncoder();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view manifest = all.substr(0, nul);
  const std::string_view chats = nul == std::string_view::npos ? "" : all.substr(nul + 1);
  static const std::string dir = fuzz::ScratchPath("set"), input = fuzz::ScratchPath("chats.jsonl");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fuzz::WriteFile(dir + "/shards.json", manifest.data(), manifest.size());
  fuzz::WriteFile(input, chats.data(), chats.size());
  const data::Corpus shard =
      data::Corpus::FromVectors({1, 2, 3, 4, 5}, {0, 2, 5}, {0, 1, 1, 0, 1}, "fixture");
  TANDEM_FUZZ_ASSERT(data::WriteBinary(shard, dir + "/shard-00000").ok());

  auto m = data::ReadShardManifest(dir);
  if (!m.ok()) {
    TANDEM_FUZZ_ASSERT(m.status().code() == StatusCode::kDataLoss);
    return 0;
  }
  for (size_t k = 0; k < m->shards.size(); ++k) {
    const data::ShardEntry& e = m->shards[k];
    TANDEM_FUZZ_ASSERT(e.name == fmt::format("shard-{:05d}", k) && e.documents > 0 && e.tokens >= 0);
  }
  auto producer = ParseOrderedJson(m->producer_state, "producer");
  TANDEM_FUZZ_ASSERT(producer.ok());
  if (producer->is_object() && producer->contains("convert")) CheckStateRoundTrip((*producer)["convert"]);
  if (m->complete) {
    auto set = data::OpenShardedSet(dir, data::BinaryCheck::kFull);
    if (set.ok()) {  // every shard opened with the manifest's counts: the sums cannot overflow
      int64_t documents = 0, tokens = 0;
      for (const data::ShardEntry& e : m->shards) {
        documents += e.documents;
        tokens += e.tokens;
      }
      TANDEM_FUZZ_ASSERT(set->documents() == documents && set->tokens() == tokens);
    }
    return 0;
  }

  auto r = WriteChatSet(input, dir, fuzz::FixtureEncoder(), Options());
  if (!r.ok()) return 0;
  auto done = data::ReadShardManifest(dir);
  TANDEM_FUZZ_ASSERT(done.ok() && done->complete);
  TANDEM_FUZZ_ASSERT(data::OpenShardedSet(dir, data::BinaryCheck::kFull).ok());
  return 0;
}
