#include "models/tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <cstdint>
#include <stdexcept>

#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// Assigned after Unicode 9.0, the version of HF's normalization data. (Code points ICU
// does not know have age 0 and are inert to both.)
bool unknown_to_hf_nfc(char32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] >= 10;
}

const icu::Normalizer2& nfc_instance() {
  static const icu::Normalizer2* instance = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status) || n == nullptr) {
      throw std::runtime_error(std::string("ICU NFC normalizer unavailable: ") +
                               u_errorName(status));
    }
    return n;
  }();
  return *instance;
}

void append_icu_nfc(std::string_view text, std::string& out) {
  if (is_ascii(text)) {
    out += text;
    return;
  }
  if (text.size() > static_cast<size_t>(INT32_MAX)) {
    throw std::length_error("NFC: text of " + std::to_string(text.size()) +
                            " bytes is longer than ICU strings can be (2^31 - 1)");
  }
  const icu::Normalizer2& nfc = nfc_instance();
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  if (nfc.isNormalized(input, status) && U_SUCCESS(status)) {
    out += text;
    return;
  }
  status = U_ZERO_ERROR;
  const icu::UnicodeString normalized = nfc.normalize(input, status);
  if (U_FAILURE(status)) {
    throw std::runtime_error(std::string("ICU NFC normalization failed: ") + u_errorName(status));
  }
  normalized.toUTF8String(out);
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
  // ASCII is its own NFC; most text of a training corpus is, and the UTF-16 round trip
  // through ICU would dominate the tokenizer's time.
  if (is_ascii(text)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t stretch_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t char_start = pos;
    const char32_t c = utf8::decode_next(text, pos);
    if (c >= 0x80 && unknown_to_hf_nfc(c)) {
      append_icu_nfc(text.substr(stretch_start, char_start - stretch_start), out);
      out += text.substr(char_start, pos - char_start);
      stretch_start = pos;
    }
  }
  append_icu_nfc(text.substr(stretch_start), out);
  return out;
}

}  // namespace sb
