#include "models/tokenizer/byte_level.h"

#include <cstdint>

#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

// The highest code point in the table: U+0100 + 67 remapped bytes, minus one.
constexpr char32_t kMaxCodePoint = 0x143;

struct ByteLevelTables {
  std::array<char32_t, 256> code_points{};
  std::array<std::string, 256> spellings;  // UTF-8 of each byte's character
  std::array<int16_t, kMaxCodePoint + 1> bytes{};
};

bool byte_is_printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

ByteLevelTables build_tables() {
  ByteLevelTables t;
  t.bytes.fill(-1);
  char32_t next_remapped = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_is_printable(b) ? static_cast<char32_t>(b) : next_remapped++;
    t.code_points[b] = cp;
    utf8::append(t.spellings[b], cp);
    t.bytes[cp] = static_cast<int16_t>(b);
  }
  return t;
}

const ByteLevelTables& tables() {
  static const ByteLevelTables t = build_tables();
  return t;
}

}  // namespace

const std::array<char32_t, 256>& byte_level_code_points() { return tables().code_points; }

int byte_level_byte(char32_t code_point) {
  if (code_point > kMaxCodePoint) return -1;
  return tables().bytes[code_point];
}

std::string byte_level_encode(std::string_view bytes) {
  const ByteLevelTables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += t.spellings[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const int b = byte_level_byte(utf8::decode_next(token, pos));
    if (b < 0) return std::nullopt;
    bytes += static_cast<char>(b);
  }
  return bytes;
}

}  // namespace sb
