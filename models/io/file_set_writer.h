// Writing a set of large files as fast as the disk takes them, durably and atomically: the
// checkpoint writer. A file is given as its bytes in order, in pieces (e.g. a
// safetensors header, then every tensor straight from a host snapshot).
//
// How: the caller's thread copies the bytes chunk by chunk (`chunk_bytes`) into aligned
// staging buffers and computes each file's XXH3-64 over exactly the bytes it stages, so the
// digest costs no second read of the file. `io_threads` threads write the staged chunks at
// their offsets with pwrite, several at once (queue depth: an NVMe drive needs more than one
// request in flight to reach its bandwidth). Files are opened with O_DIRECT where the
// filesystem allows it (no page-cache copy and no writeback throttling; the last chunk is
// padded to the 4 KiB alignment and the file truncated back to its size), else written
// through the page cache with writeback started after each chunk (sync_file_range). Each
// file's blocks are allocated first (fallocate), so the parallel writes land inside the file:
// ext4 and XFS serialise direct writes that extend a file.
//
// Durability and atomicity, as AtomicFileWriter: each file goes to "<path>.tmp.<pid>" (the
// name checkpoint cleanup recognises); only when every file of the set is written and
// fsynced are they renamed over their paths, and then each directory is fsynced. On any
// error every temp file is removed, no path is replaced, and the error names the file.
//
// Thread-safety: WriteFileSet is reentrant; the pieces must stay valid and unchanged until it
// returns. Callers must not write the same paths concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::models {

struct FileToWrite {
  std::string path;                               // written atomically; its dir must exist
  std::vector<std::span<const std::byte>> parts;  // the file's bytes, in order
};

struct WrittenFile {
  std::string path;
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;  // XXH3-64 (seed 0) of the whole file, as file_digest.h's FileXxh3
};

struct FileSetWriteOptions {
  int io_threads = 4;                    // writes in flight at once, >= 1
  uint64_t chunk_bytes = uint64_t{32} << 20;  // bytes per write, a multiple of 4096
  bool direct = true;                    // O_DIRECT where the filesystem allows it
};

struct FileSetWriteStats {
  int direct_files = 0;    // files written with O_DIRECT
  int buffered_files = 0;  // files written through the page cache
  uint64_t bytes = 0;
};

// Writes every file of `files` (see above). InvalidArgument for bad options; errors of
// open, write, fsync or rename name the file. `stats` (may be null) says how they went.
Result<std::vector<WrittenFile>> WriteFileSet(std::span<const FileToWrite> files,
                                              const FileSetWriteOptions& options = {},
                                              FileSetWriteStats* stats = nullptr);

}  // namespace tandem::models
