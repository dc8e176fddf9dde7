#include "runtime/core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <signal.h>

#include <fmt/format.h>

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(int fd) {
  std::string out;
  char buf[512];
  if (::lseek(fd, 0, SEEK_SET) < 0) return out;
  while (out.size() < 4096) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// The value of "key=value" on its own line of `record`, or "".
std::string Field(const std::string& record, const std::string& key) {
  size_t pos = 0;
  while (pos < record.size()) {
    size_t end = record.find('\n', pos);
    if (end == std::string::npos) end = record.size();
    const std::string line = record.substr(pos, end - pos);
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
    pos = end + 1;
  }
  return "";
}

// "job 'tiny' (j1), pid 123 on host, since 2026-12-01 17:00:00 UTC" from a record.
std::string Describe(const std::string& record) {
  if (record.empty()) return "a holder that left no record";
  const std::string holder = Field(record, "holder"), pid = Field(record, "pid"),
                    host = Field(record, "host"), since = Field(record, "since");
  return fmt::format("{}, pid {}{}{}", holder.empty() ? "unknown holder" : holder,
                     pid.empty() ? "?" : pid, host.empty() ? "" : " on " + host,
                     since.empty() ? "" : ", since " + since);
}

std::string NowUtc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

DirLock& DirLock::operator=(DirLock&& o) noexcept {
  if (this != &o) {
    Release();
    fd_ = o.fd_;
    dir_ = std::move(o.dir_);
    o.fd_ = -1;
  }
  return *this;
}

void DirLock::Release() {
  if (fd_ < 0) return;
  // Clear the record first: a record left behind means its holder died.
  if (::ftruncate(fd_, 0) != 0) {
    // Nothing to do: the flock still goes with the close, and the next holder only reports
    // the stale record.
  }
  ::close(fd_);  // drops the flock
  fd_ = -1;
}

Status DirLock::CheckNotInHeldDir(const std::string& path, const std::string& what,
                                  const std::string& own) {
  std::error_code ec;
  const fs::path own_dir = own.empty() ? fs::path() : fs::weakly_canonical(own, ec);
  fs::path dir = fs::weakly_canonical(fs::absolute(path, ec), ec).parent_path();
  for (; !dir.empty(); dir = dir.parent_path()) {
    const std::string lock = (dir / kFileName).string();
    if (dir != own_dir) {
      const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        const std::string record = held ? ReadAll(fd) : "";
        ::close(fd);  // drops the probe's lock, if it took one
        if (held)
          return UnavailableError(
              "{} '{}' is inside '{}', a directory another job holds: {} (lock file {}); "
              "write it elsewhere",
              what, path, dir.string(), Describe(record), lock);
      }
    }
    if (dir == dir.root_path()) break;
  }
  return Status::Ok();
}

Result<DirLock> DirLock::Acquire(const std::string& dir, const std::string& holder,
                                 const std::string& what, std::string* took_over) {
  if (took_over != nullptr) took_over->clear();
  if (dir.empty()) return InvalidArgumentError("{}: no directory given to lock", what);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec))
    return InvalidArgumentError("{} '{}' is not a directory (or cannot be created{})", what, dir,
                                ec ? ": " + ec.message() : "");
  const std::string path = (fs::path(dir) / kFileName).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return InvalidArgumentError("cannot open the lock file {} of {} '{}': {}", path, what, dir,
                                std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string record = ReadAll(fd);
    ::close(fd);
    if (err == EWOULDBLOCK)
      return UnavailableError(
          "{} '{}' is in use by another job: {} (lock file {}); wait for that job to end or "
          "give this one its own {}",
          what, dir, Describe(record), path, what);
    return InvalidArgumentError("cannot lock {} ({} '{}'): {}", path, what, dir,
                                std::strerror(err));
  }
  DirLock lock;
  lock.fd_ = fd;
  lock.dir_ = dir;
  const std::string previous = ReadAll(fd);
  if (!previous.empty() && took_over != nullptr) {
    const std::string pid = Field(previous, "pid");
    bool dead = false;
    if (!pid.empty()) {
      char* end = nullptr;
      const long p = std::strtol(pid.c_str(), &end, 10);
      dead = p > 0 && *end == '\0' && ::kill(static_cast<pid_t>(p), 0) != 0 && errno == ESRCH;
    }
    *took_over = fmt::format("took over the stale lock of {} '{}' left by {}{}", what, dir,
                             Describe(previous),
                             dead ? " (no longer running)" : " (it ended without releasing it)");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string record = fmt::format("pid={}\nhost={}\nholder={}\nsince={}\n", ::getpid(),
                                         host, holder, NowUtc());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, record.data(), record.size(), 0) !=
                                     static_cast<ssize_t>(record.size()))
    return InvalidArgumentError("cannot write the lock file {} of {} '{}': {}", path, what, dir,
                                std::strerror(errno));
  return lock;
}

}  // namespace tandem
