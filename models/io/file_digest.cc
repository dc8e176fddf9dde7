#include "models/io/file_digest.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "models/io/file_util.h"

namespace tandem::models {

uint64_t Xxh3(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

Result<uint64_t> FileXxh3(const std::string& path, uint64_t* bytes) {
  ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  if (bytes != nullptr) *bytes = f.size();
  f.AdviseWillNeed(0, f.size());
  return Xxh3(f.bytes());
}

}  // namespace tandem::models
