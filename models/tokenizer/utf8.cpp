#include "models/tokenizer/utf8.h"

#include <unicode/utf8.h>

#include <cstdint>
#include <stdexcept>

// ICU's U8_* macros do the work: since ICU 60 U8_NEXT accepts exactly the well-formed
// sequences of Unicode Table 3-7 and, on an ill-formed one, steps over its maximal
// subpart, the unit one U+FFFD replaces.

namespace sb::utf8 {
namespace {

const uint8_t* bytes_of(std::string_view text) { return reinterpret_cast<const uint8_t*>(text.data()); }

// ICU indexes with int32_t.
int32_t checked_length(std::string_view text) {
  if (text.size() > static_cast<size_t>(INT32_MAX)) throw std::length_error("utf8: text longer than 2 GiB");
  return static_cast<int32_t>(text.size());
}

}  // namespace

size_t find_invalid(std::string_view text) {
  const int32_t length = checked_length(text);
  int32_t pos = 0;
  while (pos < length) {
    const int32_t start = pos;
    UChar32 c;
    U8_NEXT(bytes_of(text), pos, length, c);
    if (c < 0) return static_cast<size_t>(start);
  }
  return std::string_view::npos;
}

size_t sequence_length(unsigned char lead) { return static_cast<size_t>(U8_COUNT_TRAIL_BYTES(lead)) + 1; }

char32_t decode_next(std::string_view text, size_t& pos) {
  UChar32 c;
  U8_NEXT_UNSAFE(bytes_of(text), pos, c);
  return static_cast<char32_t>(c);
}

void append(std::string& out, char32_t code_point) {
  uint8_t buffer[U8_MAX_LENGTH];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buffer, n, static_cast<UChar32>(code_point));
  out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

std::string decode_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const int32_t length = checked_length(bytes);
  int32_t pos = 0;
  while (pos < length) {
    const int32_t start = pos;
    UChar32 c;
    U8_NEXT(bytes_of(bytes), pos, length, c);
    if (c < 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal subpart just stepped over
    } else {
      out.append(bytes.data() + start, static_cast<size_t>(pos - start));
    }
  }
  return out;
}

}  // namespace sb::utf8
