// GPT-2's byte-level alphabet: every byte 0..255 maps to one printable code point, so a
// vocabulary of byte strings can be stored as text in tokenizer.json. Printable Latin-1 bytes
// map to themselves; the other 68 bytes map to U+0100 upwards, in byte order.
//
// Thread-safety: pure functions over constant tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

// The code point that byte `b` is written as.
uint32_t ByteToCodePoint(uint8_t b);

// The byte that code point `cp` stands for, or nullopt when `cp` is not in the alphabet.
std::optional<uint8_t> CodePointToByte(uint32_t cp);

// Raw bytes of a vocabulary entry written in the alphabet, or nullopt when `text` (valid
// UTF-8) holds a code point outside it.
std::optional<std::string> ByteLevelToBytes(std::string_view text);

}  // namespace tandem::tokenizer
