#include "models/io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace tandem::models {
namespace {

Status ErrnoStatus(std::string_view what, const std::string& path, int err) {
  if (err == ENOENT) return NotFoundError("{}: {}: {}", path, what, std::strerror(err));
  return InvalidArgumentError("{}: {}: {}", path, what, std::strerror(err));
}

}  // namespace

MappedFile::~MappedFile() { Reset(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    Reset();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void MappedFile::Reset() {
  if (data_ != nullptr) munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("{}: not a regular file", path);
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      f.size_ = 0;
      return ErrnoStatus("cannot mmap", path, err);
    }
    f.data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return f;
}

void MappedFile::AdviseWillNeed(size_t offset, size_t len) const {
  if (data_ == nullptr || len == 0 || offset >= size_) return;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t start = offset / page * page;
  size_t end = std::min(size_, offset + len);
  // Advice is a hint; failure only costs speed.
  (void)madvise(const_cast<std::byte*>(data_) + start, end - start, MADV_WILLNEED);
}

Result<std::string> ReadTextFile(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  auto b = f.bytes();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)), temp_path_(std::move(o.temp_path_)),
      fd_(std::exchange(o.fd_, -1)), appended_(o.appended_), written_back_(o.written_back_) {}

Result<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  AtomicFileWriter w;
  w.path_ = path;
  w.temp_path_ = fmt::format("{}.tmp.{}", path, ::getpid());
  w.fd_ = ::open(w.temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0) return ErrnoStatus("cannot create temp file", w.temp_path_, errno);
  return w;
}

Status AtomicFileWriter::Append(std::span<const std::byte> bytes) {
  TANDEM_CHECK_MSG(fd_ >= 0, "{}: Append after Commit", path_);
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write failed", temp_path_, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
    appended_ += static_cast<uint64_t>(n);
  }
  constexpr uint64_t kWritebackChunk = uint64_t{64} << 20;
  if (appended_ - written_back_ >= kWritebackChunk) {
    // A hint: Commit's fsync is what makes the file durable, so a failure only costs speed.
    (void)::sync_file_range(fd_, static_cast<off64_t>(written_back_),
                            static_cast<off64_t>(appended_ - written_back_),
                            SYNC_FILE_RANGE_WRITE);
    written_back_ = appended_;
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  TANDEM_CHECK_MSG(fd_ >= 0, "{}: Commit twice", path_);
  if (::fsync(fd_) != 0) return ErrnoStatus("fsync failed", temp_path_, errno);
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    return ErrnoStatus("close failed", temp_path_, err);
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    return ErrnoStatus("rename failed", path_, err);
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view text) {
  ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(w.Append(text));
  return w.Commit();
}

}  // namespace tandem::models
