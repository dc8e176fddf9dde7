// DirLock: one holder at a time for a directory that a job writes (a checkpoint dir), across
// processes and within one.
//
// The lock is an flock(2) on DIR/.tandem-lock, which also records who holds it (pid, host,
// holder description, start time), so a second job is refused with an error that names the
// directory and the job holding it. The kernel drops the flock when its process dies, so a
// lock left by a killed process (kill -9, a crash) is taken over by the next job; the
// record it left says whose it was, and Acquire reports that in `took_over`. A released
// lock's record is cleared. Two DirLocks on one directory in one process also conflict
// (flock locks belong to the open file, not the process).
//
// Thread-safety: a DirLock is a move-only value; Acquire is safe from any thread.
#pragma once

#include <string>

#include "runtime/core/status.h"

namespace tandem {

class DirLock {
 public:
  // Locks `dir` (created, with its parents, if missing) for `holder` (e.g. "job 'tiny'
  // (j2)"). Unavailable when another live DirLock holds it: the message names `what` and
  // `dir` and the holder's record. InvalidArgument when `dir` cannot be made or locked (a
  // file, no permission), naming it. On success, `took_over` (may be null) gets a sentence
  // about a stale record left by a holder that died, else "".
  static Result<DirLock> Acquire(const std::string& dir, const std::string& holder,
                                 const std::string& what = "directory",
                                 std::string* took_over = nullptr);

  // Whether `path` (a file to write, e.g. a metrics file) lies in a directory, or below one,
  // that another live DirLock holds: Unavailable naming `what`, the directory and the
  // holder's record; Ok otherwise. `own` (may be empty) is a directory of the caller's, not
  // reported. Nothing is created or kept locked.
  static Status CheckNotInHeldDir(const std::string& path, const std::string& what,
                                  const std::string& own = "");

  DirLock() = default;
  ~DirLock() { Release(); }
  DirLock(DirLock&& o) noexcept : fd_(o.fd_), dir_(std::move(o.dir_)) { o.fd_ = -1; }
  DirLock& operator=(DirLock&& o) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::string& dir() const { return dir_; }
  // Clears the record and drops the lock (as destruction does).
  void Release();

  static constexpr const char* kFileName = ".tandem-lock";

 private:
  int fd_ = -1;
  std::string dir_;
};

}  // namespace tandem
