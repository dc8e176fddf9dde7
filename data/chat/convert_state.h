// The resume state of a chat conversion (convert.h), as JSON text: the counts of a
// ConvertResult so far, the input position they end at, and the input's identity (its size
// and a hash of the bytes just before that position), so a resume on a changed file is
// refused instead of silently producing a mixed set.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "data/chat/convert.h"

namespace tandem::chat_data {

struct InputPosition {
  int64_t byte = 0;  // the input is consumed up to here (a line boundary)
  int64_t line = 0;  // lines (blank or not) before `byte`
};

struct InputIdentity {
  int64_t size = 0;
  uint64_t tail_hash = 0;  // FNV-1a of the up to 4096 bytes before the position
};

// Hash of the up to 4096 bytes of `path` before `byte`. NotFound when it cannot be read.
Result<uint64_t> TailHash(const std::string& path, int64_t byte);

std::string EncodeState(const ConvertResult& counts, const InputPosition& at,
                        const InputIdentity& input);

// Restores the counts into *counts (format, lines, ..., shards) and the position. A
// malformed state is DataLoss naming `origin` (where the state came from) and the field.
Status DecodeState(const std::string& json, const std::string& origin, ConvertResult* counts,
                   InputPosition* at, InputIdentity* input);

}  // namespace tandem::chat_data
