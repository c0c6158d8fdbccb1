#pragma once
// Python 3 `str` semantics that LongBench's metrics and lm-evaluation-harness's task
// preprocessing depend on, on code points (std::u32string), so that C++ scores and
// prompts equal upstream's to the last bit:
//   is_python_space    str.isspace() / `\s` of `re` / what str.split() splits on
//   is_python_word     `\w` of `re` on str (str.isalnum() or "_"), which defines `\b`
//   is_python_decimal  `\d` of `re` on str (Unicode decimal digits, general category Nd)
//   python_lower       str.lower(): full lower-case mappings, final sigma in context
//   python_capitalize  str.capitalize(): the first character's full title-case mapping,
//                      then lower() of the rest (Python >= 3.8)
// The character properties come from ICU (Unicode 15 on Debian 12; CPython 3.11 knows
// Unicode 14: only code points unassigned in 14 can differ, tests/python checks this).

#include <string>
#include <string_view>
#include <vector>

namespace sb {

// UTF-8 -> code points; throws std::invalid_argument naming `what` for ill-formed UTF-8.
std::u32string utf8_to_u32(std::string_view text, const std::string& what = "text");
std::string u32_to_utf8(std::u32string_view text);

bool is_python_space(char32_t c);
bool is_python_word(char32_t c);
bool is_python_decimal(char32_t c);
std::u32string python_lower(std::u32string_view text);
std::u32string python_capitalize(std::u32string_view text);

// str.split() with no arguments: runs of whitespace separate, no empty pieces.
std::vector<std::u32string> python_split_whitespace(std::u32string_view text);
// str.split(sep) for a one-character separator: keeps empty pieces ("a..b" -> a, "", b).
std::vector<std::u32string> python_split_on(std::u32string_view text, char32_t sep);
// str.strip() with no arguments.
std::u32string python_strip(std::u32string_view text);
// " ".join(text.split()).
std::u32string python_collapse_whitespace(std::u32string_view text);
// str.replace(old, new) on UTF-8 text: every non-overlapping occurrence, left to right
// (byte-wise, which on well-formed UTF-8 is character-wise); `from` must not be empty.
std::string python_replace(const std::string& text, const std::string& from, const std::string& to);

}  // namespace sb
