#include "data/tokenizer/byte_level.h"

#include <array>

#include "data/tokenizer/utf8.h"

namespace tandem::tokenizer {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323 cover the whole alphabet

  Tables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t ByteToCodePoint(uint8_t b) { return GetTables().to_cp[b]; }

std::optional<uint8_t> CodePointToByte(uint32_t cp) {
  const auto& t = GetTables();
  if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(t.to_byte[cp]);
}

std::optional<std::string> ByteLevelToBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    auto b = CodePointToByte(NextCodePoint(text, &pos));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace tandem::tokenizer
