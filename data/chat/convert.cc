#include "data/chat/convert.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "data/chat/convert_state.h"

namespace tandem::chat_data {
namespace {

constexpr size_t kMaxBadExamples = 10;
constexpr size_t kChunkLines = 64;

struct Line {
  std::string_view text;
  int64_t number;  // 1-based
  int64_t end;     // input byte after the line and its newline
};

// What one line gave: counts and its examples (the next `examples` documents of its chunk).
struct LineOut {
  int64_t number = 0;
  int64_t end = 0;
  bool conversation = false;
  std::string bad_reason;  // a bad line
  std::string message;     // for bad_examples: a bad line, or the encoder's error
  std::map<std::string, int64_t> events;
  std::map<std::string, int64_t> warnings;
  bool failed = false;     // the template or tokenizer failed (counted in events)
  size_t examples = 0;
};

struct ChunkOut {
  std::vector<LineOut> lines;
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets{0};
  std::vector<uint8_t> mask;
};

// The first id of `o`'s examples not below options.vocab, as a bad-line message.
std::string FindOutOfVocab(const EncodeOutcome& o, const ConvertOptions& options) {
  if (options.vocab <= 0) return "";
  for (size_t e = 0; e < o.examples.size(); ++e) {
    const std::vector<uint32_t>& ids = o.examples[e].ids;
    for (size_t t = 0; t < ids.size(); ++t) {
      if (int64_t{ids[t]} >= options.vocab) {
        return fmt::format("example {}, token {}: id {} is not below vocab {}{}", e, t, ids[t],
                           options.vocab,
                           options.vocab_origin.empty() ? "" : " (" + options.vocab_origin + ")");
      }
    }
  }
  return "";
}

void MarkBad(LineOut* lo, const std::string& path, const char* reason, const std::string& what) {
  lo->bad_reason = reason;
  lo->message = fmt::format("{}:{}: {} ({})", path, lo->number, what, reason);
}

// A line over options.max_line_bytes: `bytes` long, ending at input byte `end`.
LineOut TooLongLine(const std::string& path, int64_t number, int64_t end, int64_t bytes,
                    const ConvertOptions& options) {
  LineOut lo;
  lo.number = number;
  lo.end = end;
  MarkBad(&lo, path, "line_too_long",
          fmt::format("{} bytes, over the limit of {} (--max-line-bytes); not parsed", bytes,
                      options.max_line_bytes));
  return lo;
}

void EncodeChunk(std::span<const Line> lines, ChatFormat format, const ChatEncoder& enc,
                 const ConvertOptions& options, ChatEncoder::Scratch& scratch,
                 const std::string& path, ChunkOut* out) {
  for (const Line& line : lines) {
    if (options.max_line_bytes > 0 && int64_t(line.text.size()) > options.max_line_bytes) {
      out->lines.push_back(
          TooLongLine(path, line.number, line.end, int64_t(line.text.size()), options));
      continue;
    }
    LineOut& lo = out->lines.emplace_back();
    lo.number = line.number;
    lo.end = line.end;
    Conversation c;
    BadLine bad;
    if (!ParseConversation(line.text, format, &c, &bad)) {
      MarkBad(&lo, path, bad.reason.c_str(), bad.message);
      continue;
    }
    if (options.max_turns > 0 && int64_t(c.messages.size()) > options.max_turns) {
      MarkBad(&lo, path, "too_many_turns",
              fmt::format("{} messages, over the limit of {} (--max-turns)", c.messages.size(),
                          options.max_turns));
      continue;
    }
    lo.conversation = true;
    EncodeOutcome o = enc.Encode(c, scratch);
    lo.events = std::move(o.events);
    lo.warnings = std::move(o.warnings);
    if (!o.error.empty()) {
      lo.message = fmt::format("{}:{}: {}", path, line.number, o.error);
      lo.failed = true;
    }
    if (std::string oov = FindOutOfVocab(o, options); !oov.empty()) {
      lo.conversation = false;
      lo.bad_reason = "id_out_of_range";
      lo.message = fmt::format("{}:{}: {} ({})", path, line.number, oov, lo.bad_reason);
      continue;
    }
    lo.examples = o.examples.size();
    for (Example& ex : o.examples) {
      out->tokens.insert(out->tokens.end(), ex.ids.begin(), ex.ids.end());
      out->mask.insert(out->mask.end(), ex.mask.begin(), ex.mask.end());
      out->offsets.push_back(out->tokens.size());
    }
  }
}

// Reads the next line of `in` into *line, keeping at most `max` bytes of it (0: all); *whole
// is false when the line was longer. False at the end of the input.
bool ReadLineBounded(std::istream& in, size_t max, std::string* line, bool* whole) {
  line->clear();
  *whole = true;
  std::streambuf* sb = in.rdbuf();
  int ch = sb->sbumpc();
  if (ch == std::char_traits<char>::eof()) return false;
  for (; ch != std::char_traits<char>::eof() && ch != '\n'; ch = sb->sbumpc()) {
    if (max == 0 || line->size() < max) {
      line->push_back(char(ch));
    } else {
      *whole = false;
    }
  }
  return true;
}

// The format of the first line that has one, reading from the start of the file (lines over
// `max_line_bytes` are passed over unparsed).
Result<ChatFormat> DetectFileFormat(const std::string& path, int64_t max_line_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("{}: cannot open the chat file", path);
  std::string line;
  for (bool whole; ReadLineBounded(in, size_t(std::max<int64_t>(max_line_bytes, 0)), &line,
                                   &whole);) {
    const ChatFormat f = whole ? DetectFormat(line) : ChatFormat::kAuto;
    if (f != ChatFormat::kAuto) return f;
  }
  return InvalidArgumentError(
      "{}: no line has \"messages\" (OpenAI) or \"conversations\" (ShareGPT); give the format "
      "with --format",
      path);
}

// Merges line results in file order into the running counts and the open shard, and hands
// shards to the sink.
class ShardBuilder {
 public:
  ShardBuilder(const std::string& path, const ConvertOptions& o, ConvertResult* r,
               InputPosition at, int64_t input_size)
      : path_(path), o_(o), r_(r), at_(at), input_size_(input_size) {}

  Status AddChunk(const ChunkOut& c) {
    size_t doc = 0;
    for (const LineOut& lo : c.lines) {
      const uint64_t begin = c.offsets[doc], end = c.offsets[doc + lo.examples];
      const int64_t n = int64_t(end - begin);
      if (o_.sink && o_.shard_tokens > 0 && !shard_.tokens.empty() &&
          int64_t(shard_.tokens.size()) + n > o_.shard_tokens) {
        RETURN_IF_ERROR(Flush());
      }
      RETURN_IF_ERROR(Count(lo));
      shard_.tokens.insert(shard_.tokens.end(), c.tokens.begin() + long(begin),
                           c.tokens.begin() + long(end));
      shard_.mask.insert(shard_.mask.end(), c.mask.begin() + long(begin), c.mask.begin() + long(end));
      for (size_t k = doc; k < doc + lo.examples; ++k) {
        shard_.offsets.push_back(shard_.offsets.back() + (c.offsets[k + 1] - c.offsets[k]));
      }
      for (size_t k = begin; k < end; ++k) r_->loss_tokens += c.mask[k];
      r_->examples += int64_t(lo.examples);
      r_->tokens_out += n;
      doc += lo.examples;
      at_ = {lo.end, lo.number};
    }
    return Status::Ok();
  }

  // Lines up to `at` were all blank: the position moves on without counts.
  void Skip(InputPosition at) { at_ = at; }

  // The last shard, or with no sink the examples into the result.
  Status Finish() {
    if (!o_.sink) {
      r_->tokens = std::move(shard_.tokens);
      r_->offsets = std::move(shard_.offsets);
      r_->mask = std::move(shard_.mask);
    } else if (!shard_.tokens.empty()) {
      RETURN_IF_ERROR(Flush());
    }
    RETURN_IF_ERROR(WaitForWriter());
    ASSIGN_OR_RETURN(std::string state, State());
    r_->final_state = std::move(state);
    return Status::Ok();
  }

 private:
  Status Count(const LineOut& lo) {
    if (!o_.skip_bad && (!lo.bad_reason.empty() || lo.failed)) {
      return InvalidArgumentError("{} (--skip-bad counts and skips such lines)", lo.message);
    }
    ++r_->lines;
    if (lo.conversation) ++r_->conversations;
    if (!lo.bad_reason.empty()) ++r_->bad[lo.bad_reason];
    for (const auto& [k, v] : lo.events) r_->events[k] += v;
    for (const auto& [k, v] : lo.warnings) r_->warnings[k] += v;
    if (!lo.message.empty() && r_->bad_examples.size() < kMaxBadExamples) {
      r_->bad_examples.push_back(lo.message);
    }
    return Status::Ok();
  }

  Result<std::string> State() const {
    ASSIGN_OR_RETURN(uint64_t hash, TailHash(path_, at_.byte));
    return EncodeState(*r_, at_, InputIdentity{input_size_, hash});
  }

  // The shard goes to the sink on a writer thread while encoding goes on; at most one shard
  // is being written (the one before it must be done first), so memory holds two at most.
  Status Flush() {
    ++r_->shards;
    ASSIGN_OR_RETURN(shard_.state, State());
    RETURN_IF_ERROR(WaitForWriter());
    writing_ = std::async(std::launch::async, [this, shard = std::move(shard_)]() mutable {
      return o_.sink(std::move(shard));
    });
    shard_ = ExampleShard();
    return Status::Ok();
  }

  Status WaitForWriter() { return writing_.valid() ? writing_.get() : Status::Ok(); }

  const std::string& path_;
  const ConvertOptions& o_;
  ConvertResult* r_;
  InputPosition at_;
  int64_t input_size_;
  ExampleShard shard_;
  std::future<Status> writing_;  // the shard being written; joined before it is destroyed
};

// Encodes `lines` on `scratches.size()` threads, calling progress(lines done) meanwhile.
std::vector<ChunkOut> EncodeBatch(const std::vector<Line>& lines, ChatFormat format,
                                  const ChatEncoder& enc, const ConvertOptions& options,
                                  std::vector<ChatEncoder::Scratch>& scratches,
                                  const std::string& path,
                                  const std::function<void(size_t)>& progress) {
  const size_t chunks = (lines.size() + kChunkLines - 1) / kChunkLines;
  std::vector<ChunkOut> out(chunks);
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable cv;
  const size_t threads = std::min(scratches.size(), std::max<size_t>(chunks, 1));
  std::vector<std::thread> workers;
  for (size_t w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      for (size_t c; (c = next.fetch_add(1)) < chunks;) {
        const size_t b = c * kChunkLines, e = std::min(lines.size(), b + kChunkLines);
        EncodeChunk(std::span(lines).subspan(b, e - b), format, enc, options, scratches[w], path,
                    &out[c]);
        done.fetch_add(1);
        cv.notify_one();
      }
    });
  }
  if (progress) {
    std::unique_lock lock(mu);
    while (done.load() < chunks) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      progress(std::min(lines.size(), done.load() * kChunkLines));  // chunks end about in order
    }
  }
  for (auto& t : workers) t.join();
  return out;
}

// Reads past the rest of a line whose first bytes are all of *buf (no newline among them):
// on return *buf holds the bytes after its newline. Returns the line's length in bytes
// (without the newline) and sets *newline when one ended it (else the input ended).
int64_t DropRestOfLine(std::istream& in, size_t batch, std::string* buf, bool* newline) {
  int64_t bytes = int64_t(buf->size());
  for (;;) {
    buf->resize(batch);
    in.read(buf->data(), std::streamsize(batch));
    const size_t got = size_t(in.gcount());
    buf->resize(got);
    if (const size_t nl = buf->find('\n'); nl != std::string::npos) {
      buf->erase(0, nl + 1);
      *newline = true;
      return bytes + int64_t(nl);
    }
    bytes += int64_t(got);
    if (got < batch) {
      buf->clear();
      *newline = false;
      return bytes;
    }
  }
}

// Splits buf[0, cut) into non-blank lines; `first` is the input byte of buf[0], `*number` the
// lines before it (advanced).
std::vector<Line> SplitLines(std::string_view buf, int64_t first, int64_t* number) {
  std::vector<Line> lines;
  for (size_t pos = 0; pos < buf.size();) {
    size_t nl = buf.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? buf.size() : nl + 1;
    if (nl == std::string_view::npos) nl = buf.size();
    ++*number;
    std::string_view t = buf.substr(pos, nl - pos);
    if (!t.empty() && t.back() == '\r') t.remove_suffix(1);
    if (t.find_first_not_of(" \t") != std::string_view::npos) {
      lines.push_back({t, *number, first + int64_t(end)});
    }
    pos = end;
  }
  return lines;
}

// Restores a resumed run's counts and checks the file is the one it began on.
Status Restore(const std::string& path, const ConvertOptions& o, int64_t size, ConvertResult* r,
               InputPosition* at) {
  InputIdentity then;
  RETURN_IF_ERROR(DecodeState(o.resume_state, path, r, at, &then));
  if (then.size != size || at->byte > size) {
    return InvalidArgumentError(
        "{}: {} bytes now, {} when the conversion began: the input changed, so it cannot be "
        "resumed (start again without --resume)",
        path, size, then.size);
  }
  ASSIGN_OR_RETURN(uint64_t hash, TailHash(path, at->byte));
  if (hash != then.tail_hash) {
    return InvalidArgumentError(
        "{}: the bytes before the resume point (byte {}, line {}) changed since the conversion "
        "began; start again without --resume",
        path, at->byte, at->line);
  }
  if (o.format != ChatFormat::kAuto && o.format != r->format) {
    return InvalidArgumentError("{}: --format {} given, but the conversion began as {}", path,
                                ChatFormatName(o.format), ChatFormatName(r->format));
  }
  return Status::Ok();
}

}  // namespace

Result<ConvertResult> ConvertChatFile(const std::string& path, const ChatEncoder& encoder,
                                      const ConvertOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError("{}: is a directory (a data set?); give a chat .jsonl file", path);
  }
  std::ifstream in(path, std::ios::binary);
  const auto file_size = std::filesystem::file_size(path, ec);
  if (!in || ec) return NotFoundError("{}: cannot open the chat file", path);
  const int64_t size = int64_t(file_size);
  ConvertResult r;
  InputPosition at;
  if (!options.resume_state.empty()) {
    RETURN_IF_ERROR(Restore(path, options, size, &r, &at));
  } else if (options.format == ChatFormat::kAuto) {
    ASSIGN_OR_RETURN(r.format, DetectFileFormat(path, options.max_line_bytes));
  } else {
    r.format = options.format;
  }
  r.start_byte = at.byte;
  r.start_line = at.line;
  int threads = options.threads > 0 ? options.threads : int(std::thread::hardware_concurrency());
  std::vector<ChatEncoder::Scratch> scratches(size_t(std::max(1, threads)));
  ShardBuilder builder(path, options, &r, at, size);
  in.seekg(at.byte);
  std::string buf;
  int64_t buf_first = at.byte, number = at.line;
  const size_t batch = size_t(std::max<int64_t>(options.batch_bytes, 1));
  for (bool eof = false; !eof;) {
    const size_t kept = buf.size();
    buf.resize(kept + batch);
    in.read(buf.data() + kept, std::streamsize(batch));
    buf.resize(kept + size_t(in.gcount()));
    eof = size_t(in.gcount()) < batch;
    const size_t last_nl = buf.rfind('\n');
    if (!eof && last_nl == std::string::npos) {  // a line longer than a batch
      if (options.max_line_bytes > 0 && int64_t(buf.size()) > options.max_line_bytes) {
        bool newline = false;
        const int64_t bytes = DropRestOfLine(in, batch, &buf, &newline);
        const int64_t end = buf_first + bytes + (newline ? 1 : 0);
        ChunkOut c;
        c.lines.push_back(TooLongLine(path, ++number, end, bytes, options));
        RETURN_IF_ERROR(builder.AddChunk(c));
        buf_first = end;
      }
      continue;
    }
    const size_t cut = eof ? buf.size() : last_nl + 1;
    std::vector<Line> lines = SplitLines(std::string_view(buf).substr(0, cut), buf_first, &number);
    std::function<void(size_t)> progress;
    if (options.progress) {
      progress = [&](size_t done) {
        options.progress(done == 0 ? buf_first : lines[done - 1].end, size);
      };
    }
    std::vector<ChunkOut> chunks = EncodeBatch(lines, r.format, encoder, options, scratches, path,
                                               progress);
    for (const ChunkOut& c : chunks) RETURN_IF_ERROR(builder.AddChunk(c));
    buf_first += int64_t(cut);
    builder.Skip({buf_first, number});
    buf.erase(0, cut);
  }
  RETURN_IF_ERROR(builder.Finish());
  r.bytes = size - r.start_byte;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (options.progress) options.progress(size, size);
  return r;
}

std::string ConvertResult::Summary() const {
  std::string s;
  int64_t bad_lines = 0;
  for (const auto& [k, v] : bad) bad_lines += v;
  s += fmt::format("format: {}\n", ChatFormatName(format));
  if (start_byte > 0) {
    s += fmt::format("resumed after line {} (byte {}); counts below are for the whole file\n",
                     start_line, start_byte);
  }
  s += fmt::format("conversations in: {} ({} lines, {} bad)\n", conversations, lines, bad_lines);
  s += fmt::format("examples out: {}{}\n", examples,
                   shards > 0 ? fmt::format(" in {} shards", shards) : "");
  s += fmt::format("tokens: {}, with loss: {} ({:.1f}%)\n", tokens_out, loss_tokens,
                   tokens_out == 0 ? 0.0 : 100.0 * double(loss_tokens) / double(tokens_out));
  std::string drops;
  for (const auto& [k, v] : bad) drops += fmt::format("{}{}: {}", drops.empty() ? "" : ", ", k, v);
  for (const auto& [k, v] : events) {
    drops += fmt::format("{}{}: {}", drops.empty() ? "" : ", ", k, v);
  }
  s += fmt::format("dropped or cut: {}\n", drops.empty() ? "none" : drops);
  for (const auto& e : bad_examples) s += "  " + e + "\n";
  if (auto it = warnings.find("no_end_token"); it != warnings.end()) {
    s += fmt::format(
        "warning: {} assistant spans hold no end-of-turn token (eos_token of "
        "tokenizer_config.json); they end where the template's rendering of their turn ends. "
        "A base model's eos_token (e.g. <|endoftext|>) with a chat template does this: check "
        "that the config is the chat model's\n",
        it->second);
  }
  const double mb = double(bytes) / 1e6;
  s += fmt::format("throughput: {:.1f} MB in {:.2f} s = {:.1f} MB/s\n", mb, seconds,
                   seconds > 0 ? mb / seconds : 0.0);
  return s;
}

}  // namespace tandem::chat_data
