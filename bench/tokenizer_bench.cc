// `tandem-bench tokenizer [--model DIR] [--mb N]`: encode throughput of data/tokenizer on
// ~N MB of generated multilingual text (one thread; all threads), the same text through HF
// tokenizers' encode_batch (peer, one thread and all), and chat JSONL to loss-masked examples
// on all cores (ConvertChatFile, what `tandem data --model` runs). Bars: one-thread
// encode >= 1.0x HF one thread; chat JSONL >= 50 MB/s on all cores.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "data/chat/convert.h"
#include "data/tokenizer/fixture.h"

namespace tandem::bench {
namespace {

const char* kPieces[] = {
    "The quick brown fox jumps over the lazy dog. ", "It's 3.14159 and they'll say 2,718,281. ",
    "def f(x):\n    return x ** 2  # square\n", "你好，世界！今天天气怎么样？", "مرحبا بالعالم، كيف حالك؟ ",
    "Привет, мир! ", "emoji 😀👍🏽 ok ", "café naïve résumé ", "    indented   spaces\n\n",
    "https://example.com/a?b=c&d=e ", "SELECT * FROM t WHERE id = 7;\n", "日本語のテキスト。",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }\n", "I DON'T KNOW what you've done. "};

std::string MakeText(size_t bytes, std::mt19937& rng) {
  std::string s;
  std::uniform_int_distribution<size_t> pick(0, std::size(kPieces) - 1);
  while (s.size() < bytes) s += kPieces[pick(rng)];
  return s;
}

std::string JsonEscape(const std::string& s) { return nlohmann::json(s).dump(); }

int Run(const std::vector<std::string>& args) {
  std::string model = tokenizer::Qwen3FixtureDir();
  double mb = 50;
  for (size_t k = 0; k + 1 < args.size(); k += 2) {
    if (args[k] == "--model") model = args[k + 1];
    if (args[k] == "--mb") mb = std::stod(args[k + 1]);
  }
  auto enc = chat_data::ChatEncoder::Load(model, {});
  if (!enc.ok()) {
    std::printf("tokenizer bench: %s\n", enc.status().ToString().c_str());
    return 1;
  }
  const tokenizer::Tokenizer& tok = enc->tokenizer();
  std::mt19937 rng(7);
  std::vector<std::string> lines;
  size_t total = 0;
  while (double(total) < mb * 1e6) {
    lines.push_back(MakeText(200 + rng() % 1800, rng));
    total += lines.back().size();
  }
  // Per process: two benches at once share TMPDIR, never this folder; removed on return.
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("tandem_tokenizer_bench_{}", ::getpid());
  std::filesystem::create_directories(dir);
  struct RemoveAtEnd {
    std::filesystem::path path;
    ~RemoveAtEnd() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_at_end{dir};
  // One JSON string per line (the texts hold newlines), so the peer encodes the same strings.
  const std::string text_path = (dir / "texts.jsonl").string();
  {
    std::ofstream out(text_path);
    for (const std::string& line : lines) out << JsonEscape(line) << "\n";
  }
  auto time_encode = [&](int threads, int64_t* tokens) {
    std::atomic<size_t> next{0};
    std::atomic<int64_t> count{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        tokenizer::EncodeScratch scratch;
        std::vector<uint32_t> ids;
        int64_t n = 0;
        for (size_t k; (k = next.fetch_add(1)) < lines.size();) {
          ids.clear();
          if (tok.Encode(lines[k], scratch, &ids).ok()) n += int64_t(ids.size());
        }
        count += n;
      });
    }
    for (auto& t : pool) t.join();
    *tokens = count;
    return double(total) / 1e6 /
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const int cores = int(std::thread::hardware_concurrency());
  int64_t tokens1 = 0, tokensn = 0;
  const double one = time_encode(1, &tokens1);
  const double all = time_encode(cores, &tokensn);
  // Chat JSONL: the same lines as user/assistant turns.
  const std::string chat_path = (dir / "chat.jsonl").string();
  {
    std::ofstream out(chat_path);
    for (size_t k = 0; k + 1 < lines.size(); k += 2) {
      out << R"({"messages": [{"role": "user", "content": )" << JsonEscape(lines[k])
          << R"(}, {"role": "assistant", "content": )" << JsonEscape(lines[k + 1]) << "}]}\n";
    }
  }
  auto conv = chat_data::ConvertChatFile(chat_path, *enc, {});
  if (!conv.ok()) {
    std::printf("tokenizer bench: %s\n", conv.status().ToString().c_str());
    return 1;
  }
  const double chat_mb_s = double(conv->bytes) / 1e6 / conv->seconds;
  nlohmann::json peer = RunPeer(TANDEM_TOKENIZER_PEER, model + "/tokenizer.json " + text_path,
                                "tokenizers");
  const double p1 = PeerNumber(peer, "one_thread_mb_s"), pn = PeerNumber(peer, "all_threads_mb_s");
  std::printf("tokenizer: %.1f MB of text, %zu lines, %s\n", double(total) / 1e6, lines.size(),
              model.c_str());
  std::printf("%-34s %12s %12s %8s\n", "", "tandem MB/s", "HF MB/s", "ratio");
  std::printf("%-34s %12.1f %12.1f %8.2f\n", "encode, 1 thread", one, p1, p1 > 0 ? one / p1 : 0);
  std::printf("%-34s %12.1f %12.1f %8.2f\n", fmt::format("encode, {} threads", cores).c_str(), all,
              pn, pn > 0 ? all / pn : 0);
  std::printf("%-34s %12.1f\n", "chat JSONL -> examples, all cores", chat_mb_s);
  const int64_t peer_tokens = int64_t(PeerNumber(peer, "tokens"));
  std::printf("tokens: tandem %lld%s\n", static_cast<long long>(tokens1),
              peer_tokens ? fmt::format(", HF {}", peer_tokens).c_str() : "");
  // The ratio means something only if both sides produced the same tokens.
  const bool same = peer_tokens == tokens1;
  if (p1 > 0 && !same) std::printf("token counts differ: the two sides did not do the same work\n");
  std::printf("bars: 1-thread encode >= 1.0x HF: %s; chat JSONL >= 50 MB/s: %s\n",
              p1 > 0 ? (!same ? "not comparable" : one >= p1 ? "met" : "NOT met") : "no peer",
              chat_mb_s >= 50 ? "met" : "NOT met");
  return 0;
}

TANDEM_BENCH("tokenizer", "encode", "tokenizer.json encode and chat JSONL vs HF tokenizers", Run);

}  // namespace
}  // namespace tandem::bench
