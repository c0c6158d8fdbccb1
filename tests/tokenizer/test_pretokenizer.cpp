// Qwen2's Split pattern run by PCRE2, on strings whose pieces were worked out by hand
// from the pattern (and agree with HF tokenizers' Split(Regex, "isolated")).

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "models/tokenizer/pretokenizer.h"
#include "models/tokenizer/regex_split.h"

namespace sb {
namespace {

using Pieces = std::vector<std::string>;

Pieces qwen2_pieces(const std::string& text) { return PreTokenizer::qwen2().split_pieces(text); }

TEST(Qwen2PreTokenizer, WordsKeepOneLeadingSpace) {
  EXPECT_EQ(qwen2_pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(qwen2_pieces("\tindent"), (Pieces{"\tindent"}));
}

TEST(Qwen2PreTokenizer, ContractionsAnyCase) {
  EXPECT_EQ(qwen2_pieces("I'm don't WE'LL"), (Pieces{"I", "'m", " don", "'t", " WE", "'LL"}));
  EXPECT_EQ(qwen2_pieces("A'S"), (Pieces{"A", "'S"}));
  // The contraction alternative comes first, even inside a word.
  EXPECT_EQ(qwen2_pieces("'sound"), (Pieces{"'s", "ound"}));
}

TEST(Qwen2PreTokenizer, DigitsOneByOne) {
  EXPECT_EQ(qwen2_pieces("abc 12345"), (Pieces{"abc", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(qwen2_pieces("$100"), (Pieces{"$", "1", "0", "0"}));
}

TEST(Qwen2PreTokenizer, CjkAndEmoji) {
  // "。" is neither letter nor digit, so it leads the following letters.
  EXPECT_EQ(qwen2_pieces("我是Qwen。你好 世界"), (Pieces{"我是Qwen", "。你好", " 世界"}));
  EXPECT_EQ(qwen2_pieces("hi 👋🏽!!"), (Pieces{"hi", " 👋🏽!!"}));
}

TEST(Qwen2PreTokenizer, NewlinesAndWhitespaceRuns) {
  EXPECT_EQ(qwen2_pieces("a\n\nb"), (Pieces{"a", "\n\n", "b"}));
  EXPECT_EQ(qwen2_pieces("x\r\ny"), (Pieces{"x", "\r\n", "y"}));
  EXPECT_EQ(qwen2_pieces("foo.\n\nbar"), (Pieces{"foo", ".\n\n", "bar"}));
  EXPECT_EQ(qwen2_pieces("a  \n  b"), (Pieces{"a", "  \n", " ", " b"}));
  EXPECT_EQ(qwen2_pieces("x = f(y)\n    return"),
            (Pieces{"x", " =", " f", "(y", ")\n", "   ", " return"}));
}

// \s+(?!\S): a run of spaces gives its last space to the word after it, and stays
// whole at the end of the text.
TEST(Qwen2PreTokenizer, WhitespaceLookahead) {
  EXPECT_EQ(qwen2_pieces("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(qwen2_pieces("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(qwen2_pieces("   "), (Pieces{"   "}));
}

// Oniguruma's \s is Unicode White_Space: U+0085 is in it, U+180E is not (PCRE2's own \s
// would say the opposite for U+180E, hence the rewrite).
TEST(Qwen2PreTokenizer, WhiteSpaceIsOniguruma) {
  // (\u takes exactly four hex digits: "\u180Eb" is U+180E then 'b'.)
  EXPECT_EQ(qwen2_pieces("a \u180Eb"), (Pieces{"a", " \u180E", "b"}));
  EXPECT_EQ(qwen2_pieces("a \u0085b"), (Pieces{"a", " ", "\u0085b"}));
}

TEST(Qwen2PreTokenizer, PiecesAreByteLevelSpelled) {
  EXPECT_EQ(PreTokenizer::qwen2().pre_tokenize("Hi there\n"),
            (Pieces{"Hi", "\xC4\xA0there", "\xC4\x8A"}));  // "Ġthere", "Ċ"
}

TEST(Gpt2PreTokenizer, ByteLevelRegexAndPrefixSpace) {
  const PreTokenizer gpt2({}, ByteLevelOptions{false, true});
  EXPECT_EQ(gpt2.split_pieces("Hello world 123  x"),
            (Pieces{"Hello", " world", " 123", " ", " x"}));
  const PreTokenizer prefixed({}, ByteLevelOptions{true, true});
  EXPECT_EQ(prefixed.split_pieces("Hello"), (Pieces{" Hello"}));
  EXPECT_EQ(prefixed.split_pieces(" Hello"), (Pieces{" Hello"}));
}

TEST(RegexSplitter, IsolatedKeepsUnmatchedTextAsPieces) {
  const RegexSplitter digits("[0-9]+");
  std::vector<std::string_view> pieces;
  digits.split_isolated("ab12cd345", pieces);
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"ab", "12", "cd", "345"}));
}

TEST(RegexSplitter, EmptyMatchesFollowOnigurumasIterator) {
  // Empty matches are no pieces but end the text before them: "a*" on "baab" matches
  // "" at 0, "aa" at 1-3, "" at 4; the "" at 3 is skipped, being where the previous
  // match ended.
  const RegexSplitter stars("a*");
  std::vector<std::string_view> pieces;
  stars.split_isolated("baab", pieces);
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"b", "aa", "b"}));
  pieces.clear();
  RegexSplitter("x*").split_isolated("ab", pieces);  // "" at 0, 1, 2
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"a", "b"}));
}

TEST(OnigToPcre2, RewritesWhiteSpaceAndRefusesAmbiguousEscapes) {
  EXPECT_NE(onig_pattern_to_pcre2("\\s").find("\\x{85}"), std::string::npos);
  EXPECT_EQ(onig_pattern_to_pcre2("\\p{L}+|[\\r\\n]"), "\\p{L}+|[\\r\\n]");
  EXPECT_EQ(onig_pattern_to_pcre2("[]a]"), "[]a]");
  EXPECT_THROW(onig_pattern_to_pcre2("\\w+"), std::invalid_argument);
  EXPECT_THROW(onig_pattern_to_pcre2("\\h"), std::invalid_argument);
  EXPECT_THROW(onig_pattern_to_pcre2("[[:alpha:]]"), std::invalid_argument);
  EXPECT_THROW(onig_pattern_to_pcre2("[^\\S]"), std::invalid_argument);
  EXPECT_THROW(RegexSplitter("(unclosed"), std::invalid_argument);
}

TEST(RegexSplitter, LongRunsDoNotExhaustTheMatcher) {
  const std::string spaces(1 << 20, ' ');
  const std::string text = "a" + spaces + "b";
  const Pieces pieces = qwen2_pieces(text);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].size(), spaces.size() - 1);
  EXPECT_EQ(pieces[2], " b");
  const std::string letters(1 << 20, 'x');
  EXPECT_EQ(qwen2_pieces(letters + " " + letters).size(), 2u);
}

}  // namespace
}  // namespace sb
