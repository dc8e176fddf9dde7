#include "runtime/core/file_sync.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tandem {

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFoundError("{}: cannot open to fsync: {}", dir, std::strerror(err));
    return InvalidArgumentError("{}: cannot open to fsync: {}", dir, std::strerror(err));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return InternalError("{}: fsync failed: {}", dir, std::strerror(err));
  return Status::Ok();
}

}  // namespace tandem
