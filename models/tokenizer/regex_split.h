#pragma once
// Splitting text with one of HF tokenizers' Split regexes, behaviour "Isolated": every
// match is a piece, and so is every run of unmatched text between matches; pieces keep
// their order and together spell the text (empty pieces are dropped).
//
// HF compiles these patterns with Oniguruma; here PCRE2 runs them (UTF + UCP, JIT when
// the library has it), after onig_pattern_to_pcre2() has rewritten the one construct
// whose meaning differs in the patterns tokenizers use: `\s`.
//
// Known difference: \p{L}, \p{N} follow PCRE2's Unicode tables (14.0 in Debian 12's
// PCRE2 10.42), HF's Oniguruma has 16.0. The 9,392 letters and digits assigned in
// Unicode 15.0-16.0 (CJK Extensions H and I, Egyptian Hieroglyphs Extended-A, Kawi,
// Garay, ...) are unassigned here and can split differently; every other code point
// splits as in HF (checked against tokenizers 0.23.3 for all of them).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sb {

// Rewrites an Oniguruma pattern into a PCRE2 pattern (for PCRE2_UTF | PCRE2_UCP) with
// the same matches:
//   \s, \S  Oniguruma: exactly Unicode's White_Space property (U+0085 included);
//           PCRE2 with UCP: also U+180E. Written out as that property's 25 code points.
// Throws std::invalid_argument for constructs that mean something else in the two
// engines (\h \H \v \V \w \W \b \B \R \X \K \N \u \g \k, POSIX classes, nested classes
// or && in a class, \S inside a class); their absence keeps the rewrite exact.
std::string onig_pattern_to_pcre2(std::string_view onig_pattern);

class RegexSplitter {
 public:
  // Throws std::invalid_argument naming the pattern when it cannot be rewritten or
  // compiled.
  explicit RegexSplitter(std::string_view onig_pattern);

  // Appends the pieces of `text` to `pieces` (views into text). The text must be
  // well-formed UTF-8 (the caller checks once; PCRE2 is told not to re-check).
  // Matching follows Oniguruma's iterator (which HF uses): the search resumes at the
  // end of the previous match, and an empty match right where the previous match ended
  // is skipped by one character.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const;

  const std::string& onig_pattern() const { return onig_pattern_; }
  // Whether PCRE2's JIT compiled the pattern (else the interpreter runs it).
  bool jit_compiled() const;

 private:
  struct Compiled;
  std::string onig_pattern_;
  std::shared_ptr<const Compiled> compiled_;  // immutable, shared by copies and threads
};

}  // namespace sb
