#pragma once
// UTF-8 as the tokenizer needs it: checking input text (PCRE2 and ICU are only given
// well-formed UTF-8), walking code points, and the lossy decoding that ends HF's
// ByteLevel decoder (token bytes need not form valid UTF-8).

#include <cstddef>
#include <string>
#include <string_view>

namespace sb::utf8 {

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence
// (Unicode Table 3-7: no overlongs, surrogates or code points above U+10FFFF), or
// std::string_view::npos when the whole text is well-formed.
size_t find_invalid(std::string_view text);

// Length (1-4) of the sequence whose lead byte is `lead`; the text must be well-formed.
size_t sequence_length(unsigned char lead);

// Decodes the code point at text[pos] and moves pos past it; the text must be well-formed.
char32_t decode_next(std::string_view text, size_t& pos);

// Appends the UTF-8 encoding of a Unicode scalar value.
void append(std::string& out, char32_t code_point);

// Bytes to text, replacing each maximal subpart of an ill-formed sequence by U+FFFD
// (Unicode's recommended practice, chapter 3.9): what Python's
// bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy (HF's
// decoder) both do. E.g. "\xE2\x82" -> one U+FFFD, "\xFF\xFE" -> two.
std::string decode_lossy(std::string_view bytes);

}  // namespace sb::utf8
