// WriteFileSet: see file_set_writer.h. The caller's thread stages and hashes; the I/O threads
// only pwrite, so the disk always has `io_threads` requests queued while staging runs ahead.
#include "models/io/file_set_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "models/io/file_digest.h"
#include "runtime/core/file_sync.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::models {
namespace {

constexpr uint64_t kAlign = 4096;                // O_DIRECT: buffer, offset and length
constexpr size_t kHashBlock = size_t{1} << 20;  // copy then hash while it is in cache

Status ErrnoError(std::string_view what, const std::string& path, int err) {
  if (err == ENOENT) return NotFoundError("{}: {}: {}", path, what, std::strerror(err));
  return InvalidArgumentError("{}: {}: {}", path, what, std::strerror(err));
}

struct OpenFile {
  const FileToWrite* spec = nullptr;
  std::string temp;
  int fd = -1;
  bool direct = false;
  uint64_t size = 0;
};

struct Job {
  OpenFile* file = nullptr;
  uint64_t offset = 0;
  size_t len = 0;  // padded to kAlign for O_DIRECT
  std::byte* buf = nullptr;
};

Status WriteChunk(const Job& j) {
  size_t done = 0;
  while (done < j.len) {
    const ssize_t n = ::pwrite(j.file->fd, j.buf + done, j.len - done,
                               static_cast<off_t>(j.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write failed", j.file->temp, n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  // Buffered: start writing this chunk back now, so the final fsync waits only for the tail.
  // A hint; the fsync is what makes the file durable.
  if (!j.file->direct)
    (void)::sync_file_range(j.file->fd, static_cast<off64_t>(j.offset),
                            static_cast<off64_t>(j.len), SYNC_FILE_RANGE_WRITE);
  return Status::Ok();
}

// Staged chunks waiting for an I/O thread, and the staging buffers not in use.
class WriteQueue {
 public:
  explicit WriteQueue(std::vector<std::byte*> free) : free_(std::move(free)) {}

  // A free buffer for the producer, or null once a write has failed.
  std::byte* TakeFree() EXCLUDES(mu_) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty() || !error_.ok(); });
    if (!error_.ok()) return nullptr;
    std::byte* b = free_.back();
    free_.pop_back();
    return b;
  }
  void Push(const Job& j) EXCLUDES(mu_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(j);
    }
    cv_.notify_all();
  }
  void Close() EXCLUDES(mu_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  // An I/O thread: writes jobs until the queue is closed and empty. After a failure the
  // remaining jobs are dropped (their buffers returned).
  void Serve() EXCLUDES(mu_) {
    for (;;) {
      Job j;
      bool failed;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty() || closed_; });
        if (jobs_.empty()) return;
        j = jobs_.front();
        jobs_.pop_front();
        failed = !error_.ok();
      }
      Status s = failed ? Status::Ok() : WriteChunk(j);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!s.ok() && error_.ok()) error_ = std::move(s);
        free_.push_back(j.buf);
      }
      cv_.notify_all();
    }
  }
  Status error() const EXCLUDES(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_ GUARDED_BY(mu_);
  std::vector<std::byte*> free_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  Status error_ GUARDED_BY(mu_);
};

// Copies file `f` into staging buffers chunk by chunk, hashing what it stages, and queues
// the chunks. Returns the file's digest, or the first write error.
Result<uint64_t> StageFile(OpenFile& f, uint64_t chunk, WriteQueue& q) {
  Xxh3Stream hash;
  const auto& parts = f.spec->parts;
  size_t part = 0, in_part = 0;
  for (uint64_t off = 0; off < f.size; off += chunk) {
    std::byte* buf = q.TakeFree();
    if (buf == nullptr) return q.error();
    const size_t len = static_cast<size_t>(std::min<uint64_t>(chunk, f.size - off));
    for (size_t filled = 0; filled < len;) {
      while (in_part == parts[part].size()) {
        ++part;
        in_part = 0;
      }
      const size_t n = std::min({len - filled, parts[part].size() - in_part, kHashBlock});
      std::memcpy(buf + filled, parts[part].data() + in_part, n);
      hash.Update({buf + filled, n});
      filled += n;
      in_part += n;
    }
    size_t write_len = len;
    if (f.direct) {
      write_len = static_cast<size_t>((len + kAlign - 1) / kAlign * kAlign);
      std::memset(buf + len, 0, write_len - len);
    }
    q.Push({&f, off, write_len, buf});
  }
  return hash.Digest();
}

Result<int> OpenTemp(OpenFile& f, bool direct) {
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  if (direct) {
    const int fd = ::open(f.temp.c_str(), flags | O_DIRECT, 0644);
    if (fd >= 0) {
      f.direct = true;
      return fd;
    }
    if (errno != EINVAL) return ErrnoError("cannot create temp file", f.temp, errno);
    // EINVAL: this filesystem (tmpfs, some network filesystems) has no O_DIRECT.
  }
  const int fd = ::open(f.temp.c_str(), flags, 0644);
  if (fd < 0) return ErrnoError("cannot create temp file", f.temp, errno);
  return fd;
}

// Allocates the file's blocks up front (its padded size): writes then land inside the file,
// so ext4 and XFS let several direct writes to one file run at once (a write that extends a
// file takes the inode lock exclusively and waits for itself), and the extents come out
// contiguous. A hint: a filesystem without fallocate is written all the same.
void Preallocate(const OpenFile& f) {
  const uint64_t len = f.direct ? (f.size + kAlign - 1) / kAlign * kAlign : f.size;
  if (len > 0) (void)::fallocate(f.fd, 0, 0, static_cast<off_t>(len));
}

// Truncates the padding of O_DIRECT files, fsyncs and closes each file.
Status FinishFiles(std::vector<OpenFile>& open) {
  for (OpenFile& f : open) {
    if (f.direct && f.size % kAlign != 0 && ::ftruncate(f.fd, static_cast<off_t>(f.size)) != 0)
      return ErrnoError("truncate failed", f.temp, errno);
    if (::fsync(f.fd) != 0) return ErrnoError("fsync failed", f.temp, errno);
    const int fd = std::exchange(f.fd, -1);
    if (::close(fd) != 0) return ErrnoError("close failed", f.temp, errno);
  }
  return Status::Ok();
}


struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};

// Stages every file and runs the I/O threads until all chunks are written.
Status WriteAll(std::vector<OpenFile>& open, const FileSetWriteOptions& o,
                std::vector<WrittenFile>* out) {
  const int nbuf = o.io_threads + 2;  // the producer fills one while every thread writes
  std::vector<std::unique_ptr<std::byte, AlignedFree>> owned;
  std::vector<std::byte*> bufs;
  for (int i = 0; i < nbuf; ++i) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(kAlign, o.chunk_bytes));
    if (p == nullptr)
      return OutOfMemoryError("checkpoint writer: cannot allocate {} staging buffers of {} "
                              "bytes", nbuf, o.chunk_bytes);
    owned.emplace_back(p);
    bufs.push_back(p);
  }
  WriteQueue q(bufs);
  std::vector<std::thread> threads;
  for (int i = 0; i < o.io_threads; ++i) threads.emplace_back([&q] { q.Serve(); });
  Status staged = Status::Ok();
  for (OpenFile& f : open) {
    Result<uint64_t> digest = StageFile(f, o.chunk_bytes, q);
    if (!digest.ok()) {
      staged = digest.status();
      break;
    }
    out->push_back({f.spec->path, f.size, *digest});
  }
  q.Close();
  for (std::thread& t : threads) t.join();
  RETURN_IF_ERROR(staged);
  return q.error();
}

}  // namespace

Result<std::vector<WrittenFile>> WriteFileSet(std::span<const FileToWrite> files,
                                              const FileSetWriteOptions& o,
                                              FileSetWriteStats* stats) {
  if (o.io_threads < 1 || o.io_threads > 64 || o.chunk_bytes == 0 ||
      o.chunk_bytes % kAlign != 0 || o.chunk_bytes > (uint64_t{1} << 30))
    return InvalidArgumentError("file set writer: io_threads {} must be in [1, 64] and "
                                "chunk_bytes {} a multiple of {} up to 1 GiB",
                                o.io_threads, o.chunk_bytes, kAlign);
  std::vector<OpenFile> open(files.size());
  auto cleanup = [&open] {
    for (OpenFile& f : open) {
      if (f.fd >= 0) ::close(std::exchange(f.fd, -1));
      if (!f.temp.empty()) ::unlink(f.temp.c_str());
    }
  };
  for (size_t i = 0; i < files.size(); ++i) {
    OpenFile& f = open[i];
    f.spec = &files[i];
    for (const auto& p : files[i].parts) f.size += p.size();
    f.temp = fmt::format("{}.tmp.{}", files[i].path, ::getpid());
    Result<int> fd = OpenTemp(f, o.direct);
    if (!fd.ok()) {
      f.temp.clear();  // not created
      cleanup();
      return fd.status();
    }
    f.fd = *fd;
    Preallocate(f);
  }
  std::vector<WrittenFile> written;
  Status s = WriteAll(open, o, &written);
  if (s.ok()) s = FinishFiles(open);
  if (!s.ok()) {
    cleanup();
    return s;
  }
  // Every file is durable under its temp name: now the renames, then their directories.
  std::set<std::string> dirs;
  for (OpenFile& f : open) {
    if (::rename(f.temp.c_str(), f.spec->path.c_str()) != 0) {
      const Status err = ErrnoError("rename failed", f.spec->path, errno);
      cleanup();
      return err;
    }
    f.temp.clear();
    std::string dir = std::filesystem::path(f.spec->path).parent_path().string();
    dirs.insert(dir.empty() ? "." : dir);
  }
  for (const std::string& d : dirs) RETURN_IF_ERROR(SyncDir(d));
  if (stats != nullptr) {
    for (const OpenFile& f : open) {
      (f.direct ? stats->direct_files : stats->buffered_files) += 1;
      stats->bytes += f.size;
    }
  }
  return written;
}

}  // namespace tandem::models
