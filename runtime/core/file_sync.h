// Durability of directory entries: after a file is created, renamed or removed in a
// directory, the entry itself reaches the disk only when the directory is fsynced. SyncDir
// is that step, shared by every writer that renames files into place (checkpoints, the best
// checkpoint's record, file sets).
//
// Thread-safety: stateless; safe from any thread.
#pragma once

#include <string>

#include "runtime/core/status.h"

namespace tandem {

// fsyncs directory `dir`, making the creations, renames and removals in it durable.
// NotFound when `dir` does not exist; InvalidArgument when it cannot be opened as a
// directory (a file, no permission); Internal when the fsync fails (an I/O error). Every
// error names `dir` and the system's reason.
Status SyncDir(const std::string& dir);

}  // namespace tandem
