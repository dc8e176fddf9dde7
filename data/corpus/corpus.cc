#include "data/corpus/corpus.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

namespace tandem::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the binary data format is little-endian; add byte swapping for this host");

constexpr char kMagic[8] = {'T', 'A', 'N', 'D', 'E', 'M', 'D', 'S'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kFlagLossMask = 1;
constexpr const char* kHeaderFile = "header";
constexpr const char* kTokensFile = "tokens.u32";
constexpr const char* kOffsetsFile = "offsets.u64";
constexpr const char* kMaskFile = "loss_mask.u8";

// The 64-byte header file, little-endian (docs/data-format.md).
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint64_t documents;
  uint64_t tokens;
  uint32_t vocab_bound;
  uint32_t reserved0;
  uint64_t reserved[3];
};
static_assert(sizeof(Header) == 64);

// (count + extra) * size in bytes, or nullopt when that does not fit in 64 bits.
std::optional<uint64_t> CheckedBytes(uint64_t count, uint64_t extra, uint64_t size) {
  uint64_t n = 0, bytes = 0;
  if (__builtin_add_overflow(count, extra, &n) || __builtin_mul_overflow(n, size, &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

std::string BytesText(std::optional<uint64_t> bytes) {
  return bytes ? fmt::format("{} bytes", *bytes) : std::string("more bytes than 2^64");
}

std::string Join(const std::string& dir, const char* file) {
  return (std::filesystem::path(dir) / file).string();
}

// A read-only mapping of a whole file; empty files map to nothing.
class Mapping {
 public:
  static Result<std::unique_ptr<Mapping>> Open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return NotFoundError("{}: no such file", path);
      return DataLossError("{}: cannot open: {}", path, std::strerror(errno));
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return DataLossError("{}: cannot stat: {}", path, std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return DataLossError("{}: not a regular file", path);
    }
    auto m = std::unique_ptr<Mapping>(new Mapping());
    m->size_ = static_cast<size_t>(st.st_size);
    if (m->size_ > 0) {
      void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        return DataLossError("{}: cannot map {} bytes: {}", path, m->size_, std::strerror(err));
      }
      m->data_ = p;
    }
    ::close(fd);
    return m;
  }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  Mapping() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A file the header promises: missing is corruption of the set, not a user's wrong path.
Result<std::unique_ptr<Mapping>> OpenListed(const std::string& path) {
  auto m = Mapping::Open(path);
  if (!m.ok() && m.status().code() == StatusCode::kNotFound) {
    return DataLossError("{}: missing, but the set's header lists it", path);
  }
  return m;
}

struct Mappings {
  std::unique_ptr<Mapping> tokens, offsets, mask;
};

struct Vectors {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> mask;
};

Status WriteFile(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError("{}: cannot create file", path);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) return InvalidArgumentError("{}: write failed (disk full?)", path);
  return Status::Ok();
}

}  // namespace

void SkipReport::Add(const std::string& reason, const std::string& message) {
  ++skipped;
  ++by_reason[reason];
  if (examples.size() < kMaxExamples) examples.push_back(message);
}

std::string SkipReport::ToString() const {
  std::string s;
  if (skipped == 0) {
    s = "no records skipped";
  } else {
    s = fmt::format("skipped {} bad records (", skipped);
    bool first = true;
    for (const auto& [reason, n] : by_reason) {
      s += fmt::format("{}{}: {}", first ? "" : ", ", reason, n);
      first = false;
    }
    s += ")";
    for (const auto& e : examples) s += "\n  " + e;
  }
  if (blank_lines > 0) s += fmt::format("; {} blank lines ignored", blank_lines);
  return s;
}

Corpus Corpus::FromVectors(std::vector<uint32_t> tokens, std::vector<uint64_t> offsets,
                           std::vector<uint8_t> mask, std::string source) {
  TANDEM_CHECK(!offsets.empty() && offsets.front() == 0 && offsets.back() == tokens.size());
  for (size_t i = 1; i < offsets.size(); ++i) TANDEM_CHECK(offsets[i] >= offsets[i - 1]);
  TANDEM_CHECK(mask.empty() || mask.size() == tokens.size());
  Corpus c;
  c.has_mask_ = !mask.empty();
  for (uint32_t t : tokens) c.vocab_bound_ = std::max(c.vocab_bound_, t + 1);
  auto v = std::make_shared<Vectors>(Vectors{std::move(tokens), std::move(offsets),
                                             std::move(mask)});
  c.SetSinglePart(Part{v->tokens, v->offsets, v->mask, 0});
  c.storage_.push_back(std::move(v));
  c.source_ = std::move(source);
  return c;
}

void Corpus::SetSinglePart(Part p) {
  documents_ = p.offsets.empty() ? 0 : int64_t(p.offsets.size()) - 1;
  tokens_count_ = int64_t(p.tokens.size());
  parts_.assign(1, p);
}

Result<Corpus> Corpus::Concat(const std::vector<Corpus>& parts, std::string source) {
  Corpus c;
  c.source_ = std::move(source);
  for (size_t k = 0; k < parts.size(); ++k) {
    const Corpus& p = parts[k];
    if (k > 0 && p.has_mask_ != c.has_mask_) {
      return InvalidArgumentError("{}: {} has {} loss mask, but {} {}", c.source_, p.source_,
                                  p.has_mask_ ? "a" : "no", parts[0].source_,
                                  c.has_mask_ ? "has one" : "has none");
    }
    c.has_mask_ = p.has_mask_;
    c.vocab_bound_ = std::max(c.vocab_bound_, p.vocab_bound_);
    c.storage_.insert(c.storage_.end(), p.storage_.begin(), p.storage_.end());
    for (Part part : p.parts_) {
      if (part.offsets.size() < 2) continue;
      part.first_doc += c.documents_;
      c.parts_.push_back(part);
    }
    c.documents_ += p.documents_;
    c.tokens_count_ += p.tokens_count_;
  }
  return c;
}

std::span<const uint32_t> Corpus::token_span() const {
  TANDEM_CHECK_MSG(!is_concat(), "{}: token_span of a concatenation", source_);
  return parts_.empty() ? std::span<const uint32_t>() : parts_[0].tokens;
}
std::span<const uint64_t> Corpus::offset_span() const {
  TANDEM_CHECK_MSG(!is_concat(), "{}: offset_span of a concatenation", source_);
  return parts_.empty() ? std::span<const uint64_t>() : parts_[0].offsets;
}
std::span<const uint8_t> Corpus::mask_span() const {
  TANDEM_CHECK_MSG(!is_concat(), "{}: mask_span of a concatenation", source_);
  return parts_.empty() ? std::span<const uint8_t>() : parts_[0].mask;
}

Document Corpus::doc(int64_t i) const {
  TANDEM_CHECK_MSG(i >= 0 && i < documents(), "document {} of {}", i, documents());
  size_t k = 0;
  if (parts_.size() > 1) {
    auto it = std::upper_bound(parts_.begin(), parts_.end(), i,
                               [](int64_t d, const Part& p) { return d < p.first_doc; });
    k = size_t(it - parts_.begin()) - 1;
  }
  const Part& p = parts_[k];
  const int64_t local = i - p.first_doc;
  const uint64_t b = p.offsets[local], e = p.offsets[local + 1];
  Document d;
  d.ids = p.tokens.subspan(b, e - b);
  if (has_mask_) d.mask = p.mask.subspan(b, e - b);
  return d;
}

std::string Corpus::Summary() const {
  return fmt::format("{}: {} documents, {} tokens, loss mask: {}, vocab bound {}", source_,
                     documents(), tokens(), has_mask_ ? "yes" : "no", vocab_bound_);
}

Status WriteBinary(const Corpus& corpus, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("{}: cannot create directory: {}", dir, ec.message());
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.flags = corpus.has_mask() ? kFlagLossMask : 0;
  h.documents = static_cast<uint64_t>(corpus.documents());
  h.tokens = static_cast<uint64_t>(corpus.tokens());
  h.vocab_bound = corpus.vocab_bound();
  auto tokens = corpus.token_span();
  auto offsets = corpus.offset_span();
  std::vector<uint64_t> zero_offset;
  if (offsets.empty()) {
    zero_offset.push_back(0);
    offsets = zero_offset;
  }
  RETURN_IF_ERROR(WriteFile(Join(dir, kTokensFile), tokens.data(), tokens.size_bytes()));
  RETURN_IF_ERROR(WriteFile(Join(dir, kOffsetsFile), offsets.data(), offsets.size_bytes()));
  std::filesystem::remove(Join(dir, kMaskFile), ec);
  if (corpus.has_mask()) {
    auto mask = corpus.mask_span();
    RETURN_IF_ERROR(WriteFile(Join(dir, kMaskFile), mask.data(), mask.size_bytes()));
  }
  // The header goes last: a set whose writing was interrupted has no valid header.
  return WriteFile(Join(dir, kHeaderFile), &h, sizeof(h));
}

bool IsBinarySet(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(Join(path, kHeaderFile), ec);
}

bool HasBinarySetMagic(const std::string& path) {
  char magic[sizeof(kMagic)] = {};
  std::ifstream in(Join(path, kHeaderFile), std::ios::binary);
  in.read(magic, sizeof(magic));
  return in.gcount() == std::streamsize(sizeof(magic)) &&
         std::memcmp(magic, kMagic, sizeof(kMagic)) == 0;
}

Result<Corpus> OpenBinary(const std::string& dir, BinaryCheck check) {
  const std::string header_path = Join(dir, kHeaderFile);
  ASSIGN_OR_RETURN(auto header_map, Mapping::Open(header_path));
  if (header_map->size() != sizeof(Header)) {
    return DataLossError("{}: header is {} bytes, expected {}", header_path, header_map->size(),
                         sizeof(Header));
  }
  Header h;
  std::memcpy(&h, header_map->data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    return DataLossError("{}: bad magic (not a tandem data set)", header_path);
  }
  if (h.version != kVersion) {
    return DataLossError("{}: format version {}, this build reads version {}", header_path,
                         h.version, kVersion);
  }
  const bool has_mask = (h.flags & kFlagLossMask) != 0;
  if ((h.flags & ~kFlagLossMask) != 0) {
    return DataLossError("{}: unknown flags {:#x}", header_path, h.flags);
  }

  auto m = std::make_shared<Mappings>();
  const std::string tokens_path = Join(dir, kTokensFile);
  const std::string offsets_path = Join(dir, kOffsetsFile);
  const std::string mask_path = Join(dir, kMaskFile);
  ASSIGN_OR_RETURN(m->tokens, OpenListed(tokens_path));
  ASSIGN_OR_RETURN(m->offsets, OpenListed(offsets_path));
  // Every size below comes from the file: checked arithmetic, so a header such as
  // documents = 2^61 + 511 cannot wrap around to the size of a small offsets file.
  std::optional<uint64_t> token_bytes = CheckedBytes(h.tokens, 0, sizeof(uint32_t));
  std::optional<uint64_t> offset_bytes = CheckedBytes(h.documents, 1, sizeof(uint64_t));
  if (!token_bytes || m->tokens->size() != *token_bytes) {
    return DataLossError("{}: {} bytes, but the header says {} tokens ({})", tokens_path,
                         m->tokens->size(), h.tokens, BytesText(token_bytes));
  }
  if (!offset_bytes || m->offsets->size() != *offset_bytes) {
    return DataLossError("{}: {} bytes, but the header says {} documents (offsets need {})",
                         offsets_path, m->offsets->size(), h.documents,
                         BytesText(offset_bytes));
  }
  if (has_mask) {
    ASSIGN_OR_RETURN(m->mask, OpenListed(mask_path));
    if (m->mask->size() != h.tokens) {
      return DataLossError("{}: {} bytes, but the header says {} tokens", mask_path,
                           m->mask->size(), h.tokens);
    }
  }

  const std::span<const uint32_t> tokens{static_cast<const uint32_t*>(m->tokens->data()),
                                         h.tokens};
  const std::span<const uint64_t> offsets{static_cast<const uint64_t*>(m->offsets->data()),
                                          h.documents + 1};
  std::span<const uint8_t> mask;
  if (has_mask) mask = {static_cast<const uint8_t*>(m->mask->data()), h.tokens};
  Corpus c;
  c.SetSinglePart(Corpus::Part{tokens, offsets, mask, 0});
  c.has_mask_ = has_mask;
  c.vocab_bound_ = h.vocab_bound;
  c.source_ = dir;

  if (offsets[0] != 0) {
    return DataLossError("{}: first offset is {}, expected 0", offsets_path, offsets[0]);
  }
  for (uint64_t i = 0; i < h.documents; ++i) {
    if (offsets[i + 1] <= offsets[i]) {
      return DataLossError("{}: document {} is empty or offsets go backwards ({} then {})",
                           offsets_path, i, offsets[i], offsets[i + 1]);
    }
    if (offsets[i + 1] > h.tokens) {
      return DataLossError("{}: offset {} of document {} is past the {} tokens", offsets_path,
                           offsets[i + 1], i, h.tokens);
    }
  }
  if (offsets[h.documents] != h.tokens) {
    return DataLossError("{}: last offset is {}, but there are {} tokens", offsets_path,
                         offsets[h.documents], h.tokens);
  }
  if (check == BinaryCheck::kFull) {
    for (uint64_t i = 0; i < h.tokens; ++i) {
      if (tokens[i] >= h.vocab_bound) {
        return DataLossError("{}: token {} is {}, not below the header's vocab bound {}",
                             tokens_path, i, tokens[i], h.vocab_bound);
      }
    }
    for (uint64_t i = 0; has_mask && i < h.tokens; ++i) {
      if (mask[i] > 1) {
        return DataLossError("{}: byte {} is {}, expected 0 or 1", mask_path, i, mask[i]);
      }
    }
  }
  c.storage_.push_back(std::move(m));
  return c;
}

std::optional<OutOfVocab> FindOutOfVocab(const Corpus& corpus, int64_t doc, int64_t vocab) {
  const std::span<const uint32_t> ids = corpus.doc(doc).ids;
  for (size_t t = 0; t < ids.size(); ++t) {
    if (int64_t{ids[t]} >= vocab) return OutOfVocab{doc, static_cast<int64_t>(t), ids[t]};
  }
  return std::nullopt;
}

std::string DescribeOutOfVocab(const Corpus& corpus, const OutOfVocab& bad, int64_t vocab,
                               const std::string& vocab_origin) {
  return fmt::format("{}: document {}, token {}: id {} is not below vocab {}{}",
                     corpus.source(), bad.document, bad.position, bad.id, vocab,
                     vocab_origin.empty() ? "" : " (" + vocab_origin + ")");
}

}  // namespace tandem::data
