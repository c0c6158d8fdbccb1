#include "models/tokenizer/added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

// Rust regex's Unicode \w, which HF's single_word test uses.
bool is_word_char(char32_t c) {
  const auto cp = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(cp, UCHAR_ALPHABETIC) || u_hasBinaryProperty(cp, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  return (U_GET_GC_MASK(cp) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

bool is_white_space(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0; }

// The last code point of a non-empty well-formed prefix.
char32_t last_code_point(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return utf8::decode_next(text, pos);
}

char32_t first_code_point(std::string_view text) {
  size_t pos = 0;
  return utf8::decode_next(text, pos);
}

// Start of the run of white space that ends `text`.
size_t trailing_space_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!is_white_space(utf8::decode_next(text, pos))) break;
    end = start;
  }
  return end;
}

// Length of the run of white space that starts `text`.
size_t leading_space_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_white_space(utf8::decode_next(text, next))) break;
    pos = next;
  }
  return pos;
}

struct RawMatch {
  size_t token;
  size_t start;
  size_t end;
};

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), by_first_byte_(256) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content.front())].push_back(i);
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& segments) const {
  if (text.empty()) return;
  if (tokens_.empty()) {
    segments.push_back(TextSegment{text, -1});
    return;
  }

  // 1. Leftmost-longest, non-overlapping matches of the contents alone.
  std::vector<RawMatch> matches;
  for (size_t pos = 0; pos < text.size();) {
    bool found = false;
    for (size_t t : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const std::string& content = tokens_[t].content;
      if (text.compare(pos, content.size(), content) == 0) {
        matches.push_back(RawMatch{t, pos, pos + content.size()});
        pos += content.size();
        found = true;
        break;
      }
    }
    // Contents are whole UTF-8 strings, so a match can only start at a lead byte;
    // stepping byte by byte is still correct.
    if (!found) ++pos;
  }

  // 2. Word boundaries and whitespace stripping, applied to each match in turn.
  size_t emitted = 0;  // end of the text already covered by segments
  for (const RawMatch& match : matches) {
    const AddedToken& token = tokens_[match.token];
    size_t start = match.start;
    size_t end = match.end;
    if (token.single_word) {
      const bool word_before = start > 0 && is_word_char(last_code_point(text.substr(0, start)));
      const bool word_after = end < text.size() && is_word_char(first_code_point(text.substr(end)));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), emitted);
    if (token.rstrip) end += leading_space_length(text.substr(end));
    if (emitted < start) segments.push_back(TextSegment{text.substr(emitted, start - emitted), -1});
    segments.push_back(TextSegment{text.substr(start, end - start), token.id});
    emitted = end;
  }
  if (emitted < text.size()) segments.push_back(TextSegment{text.substr(emitted), -1});
}

}  // namespace sb
