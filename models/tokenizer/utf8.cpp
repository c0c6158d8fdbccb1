#include "models/tokenizer/utf8.h"

#include <cstdint>

namespace sb::utf8 {
namespace {

// What a lead byte promises: the sequence length (0: not a lead byte) and the range of
// the second byte. The narrowed ranges after E0, ED, F0 and F4 are what rule out
// overlongs, surrogates and code points above U+10FFFF.
struct LeadByte {
  size_t length;
  uint8_t second_min;
  uint8_t second_max;
};

LeadByte classify_lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};  // continuation bytes, and C0/C1 (always overlong)
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};  // F5..FF never occur in UTF-8
}

// Scans the sequence starting at pos. Returns the number of bytes that belong to it:
// the whole sequence when *complete, else its maximal subpart (at least 1 byte), the
// unit that one U+FFFD replaces.
size_t scan_sequence(std::string_view text, size_t pos, bool* complete) {
  const LeadByte lead = classify_lead(static_cast<uint8_t>(text[pos]));
  if (lead.length == 0) {
    *complete = false;
    return 1;
  }
  size_t n = 1;
  while (n < lead.length && pos + n < text.size()) {
    const auto b = static_cast<uint8_t>(text[pos + n]);
    const uint8_t lo = n == 1 ? lead.second_min : 0x80;
    const uint8_t hi = n == 1 ? lead.second_max : 0xBF;
    if (b < lo || b > hi) break;
    ++n;
  }
  *complete = n == lead.length;
  return n;
}

}  // namespace

size_t find_invalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool complete = false;
    const size_t n = scan_sequence(text, pos, &complete);
    if (!complete) return pos;
    pos += n;
  }
  return std::string_view::npos;
}

size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

char32_t decode_next(std::string_view text, size_t& pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const size_t n = sequence_length(lead);
  static constexpr uint8_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t cp = lead & kLeadMask[n];
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  pos += n;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string decode_lossy(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool complete = false;
    const size_t n = scan_sequence(bytes, pos, &complete);
    if (complete) {
      out.append(bytes.substr(pos, n));
    } else {
      out.append(kReplacement);
    }
    pos += n;
  }
  return out;
}

}  // namespace sb::utf8
