#include "models/io/file_digest.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "models/io/file_util.h"

namespace tandem::models {

uint64_t Xxh3(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

struct Xxh3Stream::State {
  XXH3_state_t xxh;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->xxh); }

Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::Update(std::span<const std::byte> bytes) {
  XXH3_64bits_update(&state_->xxh, bytes.data(), bytes.size());
}

uint64_t Xxh3Stream::Digest() const { return XXH3_64bits_digest(&state_->xxh); }

Result<uint64_t> FileXxh3(const std::string& path, uint64_t* bytes) {
  ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  if (bytes != nullptr) *bytes = f.size();
  f.AdviseWillNeed(0, f.size());
  return Xxh3(f.bytes());
}

}  // namespace tandem::models
