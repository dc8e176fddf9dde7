// XXH3-64 digests of whole files, for checkpoint integrity (tandem_state.json records one per
// file of a step directory; resume verifies them before loading any tensor). xxHash comes
// from Debian's libxxhash-dev, compiled in from its header (no shared library needed).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "runtime/core/status.h"

namespace tandem::models {

// XXH3-64 (seed 0) of `bytes`.
uint64_t Xxh3(std::span<const std::byte> bytes);

// XXH3-64 over bytes given in pieces, in order: Digest() equals Xxh3 of their concatenation
// (file_set_writer.h hashes a file this way while writing it). Single-threaded.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void Update(std::span<const std::byte> bytes);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// XXH3-64 of the file at `path`; its size goes to *bytes when given. NotFound for a missing
// file, InvalidArgument when it is not a regular file or cannot be read.
Result<uint64_t> FileXxh3(const std::string& path, uint64_t* bytes = nullptr);

}  // namespace tandem::models
