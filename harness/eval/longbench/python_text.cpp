#include "harness/eval/longbench/python_text.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <stdexcept>

#include "models/tokenizer/utf8.h"

namespace sb {

std::u32string utf8_to_u32(std::string_view text, const std::string& what) {
  const size_t bad = utf8::find_invalid(text);
  if (bad != std::string_view::npos) {
    throw std::invalid_argument(what + " is not valid UTF-8 (byte offset " + std::to_string(bad) +
                                ")");
  }
  std::u32string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) out.push_back(utf8::decode_next(text, pos));
  return out;
}

std::string u32_to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) utf8::append(out, c);
  return out;
}

bool is_python_space(char32_t c) {
  // The 29 code points for which CPython's str.isspace() is true: bidirectional class
  // WS, B or S, or general category Zs.
  if (c <= 0x20) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_python_word(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const auto uc = static_cast<UChar32>(c);
  // str.isalnum(): isalpha() (categories Lu, Ll, Lt, Lm, Lo) or any numeric type
  // (decimal, digit, numeric: this includes Unihan numerals).
  return u_isalpha(uc) || u_getIntPropertyValue(uc, UCHAR_NUMERIC_TYPE) != U_NT_NONE;
}

bool is_python_decimal(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER;
}

namespace {

std::u16string to_utf16(std::u32string_view text) {
  std::u16string utf16;
  utf16.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x10000) {
      utf16.push_back(static_cast<char16_t>(c));
    } else {
      utf16.push_back(static_cast<char16_t>(U16_LEAD(c)));
      utf16.push_back(static_cast<char16_t>(U16_TRAIL(c)));
    }
  }
  return utf16;
}

std::u32string from_utf16(const char16_t* text, int32_t n) {
  std::u32string out;
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U16_NEXT(text, i, n, c);
    out.push_back(static_cast<char32_t>(c));
  }
  return out;
}

}  // namespace

std::u32string python_lower(std::u32string_view text) {
  bool ascii = true;
  for (char32_t c : text) ascii = ascii && c < 0x80;
  std::u32string out(text);
  if (ascii) {
    for (char32_t& c : out) {
      if (c >= 'A' && c <= 'Z') c = c - 'A' + 'a';
    }
    return out;
  }
  // ICU with the root locale applies the unconditional full mappings of SpecialCasing
  // and the Final_Sigma context, exactly the two things CPython's lower() does.
  const std::u16string utf16 = to_utf16(text);
  std::u16string lowered(utf16.size() * 3 + 4, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  const int32_t n = u_strToLower(reinterpret_cast<UChar*>(lowered.data()),
                                 static_cast<int32_t>(lowered.size()),
                                 reinterpret_cast<const UChar*>(utf16.data()),
                                 static_cast<int32_t>(utf16.size()), "", &status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("u_strToLower: ") + u_errorName(status));
  return from_utf16(lowered.data(), n);
}

std::u32string python_capitalize(std::u32string_view text) {
  if (text.empty()) return {};
  std::u32string out;
  const char32_t first = text.front();
  if (first < 0x80) {
    out.push_back(first >= 'a' && first <= 'z' ? first - 'a' + 'A' : first);
  } else {
    // CPython's capitalize() takes the full title-case mapping (SpecialCasing: "ß" ->
    // "Ss", "ǆ" -> "ǅ"); ICU's title-casing of the one character, with neither
    // lower-casing nor break adjustment, is that mapping.
    const std::u16string utf16 = to_utf16(std::u32string_view(&first, 1));
    std::u16string titled(16, u'\0');
    UErrorCode status = U_ZERO_ERROR;
    const int32_t n = u_strToTitle(reinterpret_cast<UChar*>(titled.data()), static_cast<int32_t>(titled.size()),
                                   reinterpret_cast<const UChar*>(utf16.data()), static_cast<int32_t>(utf16.size()),
                                   /*titleIter=*/nullptr, "", &status);
    if (U_FAILURE(status)) throw std::runtime_error(std::string("u_strToTitle: ") + u_errorName(status));
    out = from_utf16(titled.data(), n);
  }
  // lower() of the rest judges final sigma in the whole string's context, as CPython's
  // do_capitalize does ("AΣ" -> "Aς"); the first character's own lower mapping (never a
  // final sigma at position 0) is dropped.
  const std::u32string lowered = python_lower(text);
  out += lowered.substr(python_lower(text.substr(0, 1)).size());
  return out;
}

std::vector<std::u32string> python_split_whitespace(std::u32string_view text) {
  std::vector<std::u32string> pieces;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_python_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_python_space(text[i])) ++i;
    if (i > start) pieces.emplace_back(text.substr(start, i - start));
  }
  return pieces;
}

std::vector<std::u32string> python_split_on(std::u32string_view text, char32_t sep) {
  std::vector<std::u32string> pieces;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      pieces.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return pieces;
}

std::u32string python_strip(std::u32string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && is_python_space(text[begin])) ++begin;
  while (end > begin && is_python_space(text[end - 1])) --end;
  return std::u32string(text.substr(begin, end - begin));
}

std::u32string python_collapse_whitespace(std::u32string_view text) {
  std::u32string out;
  for (const std::u32string& piece : python_split_whitespace(text)) {
    if (!out.empty()) out.push_back(U' ');
    out += piece;
  }
  return out;
}

std::string python_replace(const std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) throw std::invalid_argument("python_replace: empty pattern");
  std::string out;
  size_t start = 0;
  for (size_t hit = text.find(from); hit != std::string::npos; hit = text.find(from, start)) {
    out.append(text, start, hit - start);
    out += to;
    start = hit + from.size();
  }
  out.append(text, start, std::string::npos);
  return out;
}

}  // namespace sb
