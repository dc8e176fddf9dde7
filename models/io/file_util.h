// Small file helpers for model formats: read-only memory maps, whole-file text reads and
// atomic writes (temp file in the same directory, fsync, rename).
//
// Thread-safety: MappedFile is immutable after Open and safe to read from many threads;
// AtomicFileWriter is single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "runtime/core/status.h"

namespace tandem::models {

// A read-only, private memory map of a whole file. Move-only; unmaps on destruction.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // NotFound if the file does not exist; InvalidArgument if it is not a regular file.
  static Result<MappedFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // The whole file; empty for a zero-length file.
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

  // Hints the kernel that [offset, offset+len) will be read soon, in order.
  void AdviseWillNeed(size_t offset, size_t len) const;

 private:
  void Reset();

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) text file such as config.json.
Result<std::string> ReadTextFile(const std::string& path);

// Writes a file so that readers see either the old file or the complete new one: bytes go
// to "<path>.tmp.<pid>" beside it; Commit() flushes, fsyncs and renames over `path`.
// Destroying an uncommitted writer removes the temp file. Every 64 MiB appended, writeback of
// what came before is started (sync_file_range), so a large file goes to disk while later
// bytes are still being appended and Commit's fsync waits only for the rest.
class AtomicFileWriter {
 public:
  AtomicFileWriter() = default;
  ~AtomicFileWriter();
  AtomicFileWriter(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  static Result<AtomicFileWriter> Create(const std::string& path);

  Status Append(std::span<const std::byte> bytes);
  Status Append(std::string_view text) {
    return Append(std::as_bytes(std::span<const char>(text.data(), text.size())));
  }
  // REQUIRES: not committed yet.
  Status Commit();

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t appended_ = 0;       // bytes written so far
  uint64_t written_back_ = 0;   // bytes whose writeback was started
};

// Writes `text` to `path` atomically.
Status WriteFileAtomically(const std::string& path, std::string_view text);

}  // namespace tandem::models
