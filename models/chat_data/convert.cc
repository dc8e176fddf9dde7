#include "models/chat_data/convert.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace tandem::chat_data {
namespace {

constexpr size_t kMaxBadExamples = 10;
constexpr size_t kChunkLines = 64;

struct Line {
  std::string_view text;
  int64_t number;  // 1-based
};

struct ChunkResult {
  ConvertResult r;
  std::vector<std::pair<int64_t, std::string>> bad;  // (line, message)
};

void EncodeChunk(const std::vector<Line>& lines, size_t begin, size_t end, ChatFormat format,
                 const ChatEncoder& enc, ChatEncoder::Scratch& scratch, const std::string& path,
                 ChunkResult* out) {
  for (size_t k = begin; k < end; ++k) {
    Conversation c;
    BadLine bad;
    if (!ParseConversation(lines[k].text, format, &c, &bad)) {
      ++out->r.bad[bad.reason];
      out->bad.emplace_back(lines[k].number, fmt::format("{}:{}: {} ({})", path, lines[k].number,
                                                         bad.message, bad.reason));
      continue;
    }
    ++out->r.conversations;
    EncodeOutcome o = enc.Encode(c, scratch);
    for (const auto& [k2, v] : o.events) out->r.events[k2] += v;
    if (!o.error.empty()) {
      out->bad.emplace_back(lines[k].number,
                            fmt::format("{}:{}: {}", path, lines[k].number, o.error));
    }
    for (Example& ex : o.examples) {
      out->r.tokens.insert(out->r.tokens.end(), ex.ids.begin(), ex.ids.end());
      out->r.mask.insert(out->r.mask.end(), ex.mask.begin(), ex.mask.end());
      out->r.offsets.push_back(out->r.tokens.size());
    }
  }
}

}  // namespace

Result<ConvertResult> ConvertChatFile(const std::string& path, const ChatEncoder& encoder,
                                      const ConvertOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("{}: cannot open the chat file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  std::vector<Line> lines;
  std::vector<int64_t> line_end_bytes;
  int64_t number = 0;
  for (size_t pos = 0; pos < data.size();) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    ++number;
    std::string_view t(data.data() + pos, nl - pos);
    if (!t.empty() && t.back() == '\r') t.remove_suffix(1);
    if (t.find_first_not_of(" \t") != std::string_view::npos) {
      lines.push_back({t, number});
      line_end_bytes.push_back(int64_t(nl));
    }
    pos = nl + 1;
  }
  ConvertResult total;
  total.bytes = int64_t(data.size());
  total.lines = int64_t(lines.size());
  total.format = options.format;
  if (total.format == ChatFormat::kAuto) {
    for (const Line& l : lines) {
      total.format = DetectFormat(l.text);
      if (total.format != ChatFormat::kAuto) break;
    }
    if (total.format == ChatFormat::kAuto) {
      return InvalidArgumentError(
          "{}: no line has \"messages\" (OpenAI) or \"conversations\" (ShareGPT); give the "
          "format with --format",
          path);
    }
  }
  const size_t chunks = (lines.size() + kChunkLines - 1) / kChunkLines;
  std::vector<ChunkResult> results(chunks);
  std::atomic<size_t> next{0}, done_chunks{0};
  std::mutex mu;
  std::condition_variable cv;
  int threads = options.threads > 0 ? options.threads : int(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, int(std::max<size_t>(chunks, 1))));
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&] {
      ChatEncoder::Scratch scratch;
      for (size_t c; (c = next.fetch_add(1)) < chunks;) {
        EncodeChunk(lines, c * kChunkLines, std::min(lines.size(), (c + 1) * kChunkLines),
                    total.format, encoder, scratch, path, &results[c]);
        done_chunks.fetch_add(1);
        cv.notify_one();
      }
    });
  }
  if (options.progress) {
    std::unique_lock lock(mu);
    while (done_chunks.load() < chunks) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      const size_t d = done_chunks.load();
      // Bytes up to the end of the last line of the d-th chunk (chunks finish about in order).
      const size_t last = std::min(lines.size(), d * kChunkLines);
      options.progress(last == 0 ? 0 : line_end_bytes[last - 1], total.bytes);
    }
  }
  for (auto& t : workers) t.join();
  std::vector<std::pair<int64_t, std::string>> bad;
  for (ChunkResult& c : results) {
    const uint64_t base = total.tokens.size();
    total.tokens.insert(total.tokens.end(), c.r.tokens.begin(), c.r.tokens.end());
    total.mask.insert(total.mask.end(), c.r.mask.begin(), c.r.mask.end());
    for (size_t k = 1; k < c.r.offsets.size(); ++k) total.offsets.push_back(base + c.r.offsets[k]);
    total.conversations += c.r.conversations;
    for (const auto& [k, v] : c.r.bad) total.bad[k] += v;
    for (const auto& [k, v] : c.r.events) total.events[k] += v;
    for (auto& b : c.bad) {
      if (bad.size() < kMaxBadExamples) bad.push_back(std::move(b));
    }
  }
  for (auto& b : bad) total.bad_examples.push_back(std::move(b.second));
  for (uint8_t m : total.mask) total.loss_tokens += m;
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (options.progress) options.progress(total.bytes, total.bytes);
  return total;
}

std::string ConvertResult::Summary() const {
  std::string s;
  const int64_t examples = int64_t(offsets.size()) - 1;
  int64_t bad_lines = 0;
  for (const auto& [k, v] : bad) bad_lines += v;
  s += fmt::format("format: {}\n", ChatFormatName(format));
  s += fmt::format("conversations in: {} ({} lines, {} bad)\n", conversations, lines, bad_lines);
  s += fmt::format("examples out: {}\n", examples);
  s += fmt::format("tokens: {}, with loss: {} ({:.1f}%)\n", tokens.size(), loss_tokens,
                   tokens.empty() ? 0.0 : 100.0 * double(loss_tokens) / double(tokens.size()));
  std::string drops;
  for (const auto& [k, v] : bad) drops += fmt::format("{}{}: {}", drops.empty() ? "" : ", ", k, v);
  for (const auto& [k, v] : events) {
    drops += fmt::format("{}{}: {}", drops.empty() ? "" : ", ", k, v);
  }
  s += fmt::format("dropped or cut: {}\n", drops.empty() ? "none" : drops);
  for (const auto& e : bad_examples) s += "  " + e + "\n";
  const double mb = double(bytes) / 1e6;
  s += fmt::format("throughput: {:.1f} MB in {:.2f} s = {:.1f} MB/s, {:.0f} tokens/s\n", mb,
                   seconds, seconds > 0 ? mb / seconds : 0.0,
                   seconds > 0 ? double(tokens.size()) / seconds : 0.0);
  return s;
}

}  // namespace tandem::chat_data
