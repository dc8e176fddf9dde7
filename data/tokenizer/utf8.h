// UTF-8 helpers for the tokenizer and the chat-template interpreter: validation that names the
// byte offset of the first bad sequence, code point iteration, encoding, and the lossy decode
// (invalid sequences become U+FFFD, one per maximal invalid subpart, as Rust's
// String::from_utf8_lossy does, which is what HF tokenizers' decode uses).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

// Offset of the first byte of the first invalid sequence, or -1 when `s` is valid UTF-8
// (overlongs, surrogates and code points above U+10FFFF are invalid).
int64_t FindInvalidUtf8(std::string_view s);

// Appends the UTF-8 encoding of `cp` (REQUIRES: cp <= 0x10FFFF).
void AppendUtf8(uint32_t cp, std::string* out);

// Decodes the code point at s[*pos] and advances *pos. REQUIRES: s is valid UTF-8.
uint32_t NextCodePoint(std::string_view s, size_t* pos);

// `bytes` as valid UTF-8, each maximal invalid subpart replaced by U+FFFD.
std::string LossyUtf8(std::string_view bytes);

}  // namespace tandem::tokenizer
