#pragma once
// Added tokens (tokenizer.json "added_tokens"): strings such as "<|im_end|>" that are
// cut out of the text before normalization and pre-tokenization and become their id
// directly. Matching follows HF's AddedVocabulary:
//   - leftmost match first, the longest token among those starting there; matches do
//     not overlap, and the search resumes after each match (even a discarded one);
//   - single_word: the match is discarded when a word character (Unicode \w: alphabetic,
//     marks, decimal digits, connector punctuation, join controls) touches it;
//   - lstrip / rstrip: the whitespace (Unicode White_Space) before / after the match is
//     swallowed into the token, but never text an earlier token already took.
// Tokens with normalized=false are matched on the raw text; those with normalized=true
// on each normalized piece in between (their content normalized the same way).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sb {

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;  // skipped by decode(skip_special=true)
};

// A run of text, or an added token (with any whitespace it stripped) when token_id >= 0.
struct TextSegment {
  std::string_view text;
  int64_t token_id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // Tokens with empty content are not allowed (the loader rejects them).
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Appends the segments of `text` (well-formed UTF-8) in order; empty text runs are
  // left out.
  void split(std::string_view text, std::vector<TextSegment>& segments) const;

 private:
  std::vector<AddedToken> tokens_;
  // Indices into tokens_ by first byte, longest content first, so that the first token
  // that matches at a position is the longest one there.
  std::vector<std::vector<size_t>> by_first_byte_;
};

}  // namespace sb
