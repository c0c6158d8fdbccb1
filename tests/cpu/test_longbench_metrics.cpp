// LongBench metrics on vectors worked out by hand from upstream's definitions
// (docs: longbench.md). The bulk comparison with the upstream packages themselves is in
// tests/python/test_longbench_metrics.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "harness/eval/longbench/longbench_metrics.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/longbench/rouge_l.h"

namespace sb {
namespace {

std::string words(const std::string& first, const std::string& rest, int n) {
  std::string out = first;
  for (int i = 1; i < n; ++i) out += " " + rest;
  return out;
}

TEST(LongBenchMetrics, NormalizationRemovesPunctuationArticlesAndCase) {
  EXPECT_EQ(u32_to_utf8(longbench_normalize_answer(U"The  Answer, an apple!")), "answer apple");
  // \b is Unicode-aware: "thé" is one word; "a·b": "·" is not a word character.
  EXPECT_EQ(u32_to_utf8(longbench_normalize_answer(utf8_to_u32("thé a·b"))), "thé ·b");
  EXPECT_EQ(u32_to_utf8(longbench_normalize_answer(U"the_end")), "theend");  // "_" is punctuation first
  EXPECT_EQ(u32_to_utf8(longbench_normalize_zh_answer(utf8_to_u32("《北京》 ，A b"))), "《北京ab");
}

TEST(LongBenchMetrics, QaF1IsTokenF1AfterNormalization) {
  // "cat sat" vs "cat sat down": overlap 2, P = 1, R = 2/3, F1 = 0.8.
  EXPECT_DOUBLE_EQ(qa_f1_score("The cat sat.", "cat sat down"), 2 * 1.0 * (2.0 / 3) / (1.0 + 2.0 / 3));
  EXPECT_EQ(qa_f1_score("", "Paris"), 0.0);
  EXPECT_EQ(qa_f1_score("...", "..."), 0.0);  // nothing left after normalization
  EXPECT_EQ(qa_f1_score("the", "a"), 0.0);
  EXPECT_EQ(qa_f1_score("Paris paris", "PARIS"), 2 * 0.5 * 1.0 / 1.5);  // multiset overlap 1 of 2
}

TEST(LongBenchMetrics, ClassificationSkipsTheElementAfterARemoval) {
  // Matches [A, AB, ABC]; iterating: "A" is in the truth and differs -> removed, and the
  // iterator skips "AB"; "ABC" equals the truth and stays. [AB, ABC] -> 1/2.
  EXPECT_DOUBLE_EQ(classification_score("A AB ABC", "ABC", {"A", "AB", "ABC"}), 0.5);
  EXPECT_DOUBLE_EQ(classification_score("City", "City", {"City", "Country"}), 1.0);
  EXPECT_EQ(classification_score("nothing", "City", {"City", "Country"}), 0.0);
  EXPECT_EQ(classification_score("", "City", {"City"}), 0.0);
}

TEST(LongBenchMetrics, RetrievalAndCountUseEveryUnicodeDigitRun) {
  EXPECT_DOUBLE_EQ(retrieval_score("Paragraph 3, Paragraph 5", "Paragraph 5"), 0.5);
  EXPECT_DOUBLE_EQ(retrieval_score("Paragraph ５", "Paragraph 5"), 0.0);  // full-width 5 is a number, not "5"
  EXPECT_EQ(retrieval_score("none", "Paragraph 5"), 0.0);
  EXPECT_DOUBLE_EQ(retrieval_zh_score("段落12和段落3", "段落12"), 0.5);
  EXPECT_DOUBLE_EQ(count_score("１ 1", "1"), 0.5);
  EXPECT_DOUBLE_EQ(count_score("07 7", "7"), 0.5);
  EXPECT_THROW(retrieval_score("1", "no id"), std::invalid_argument);
}

TEST(LongBenchMetrics, FuzzRatioRoundsHalfToEven) {
  EXPECT_EQ(fuzz_ratio("", ""), 100);  // equal strings first, then the empty check
  EXPECT_EQ(fuzz_ratio("a", ""), 0);
  EXPECT_EQ(fuzz_ratio("aaaaaaab", "aaaaaaac"), 88);  // LCS 7 of 16: 87.5 -> 88
  EXPECT_EQ(fuzz_ratio("aaaaaaaa", "aaaaaXYZ"), 62);  // LCS 5 of 16: 62.5 -> 62
  EXPECT_EQ(fuzz_ratio("héllo", "hello"), 80);        // code points, not bytes: LCS 4 of 10
}

TEST(LongBenchMetrics, CodeSimTakesTheFirstLineWithoutCommentMarks) {
  EXPECT_DOUBLE_EQ(code_sim_score("\n```python\n# note\nx = 1\ny = 2", "x = 1"), 1.0);
  EXPECT_DOUBLE_EQ(code_sim_score("a // b\n// c", "x"), 0.0);  // no usable line: "" vs "x"
  EXPECT_DOUBLE_EQ(code_sim_score("aaaaaaab", "aaaaaaac"), 0.88);
}

TEST(LongBenchMetrics, FirstLineCut) {
  EXPECT_EQ(first_line_of_prediction("\n\nabc\ndef"), "abc");
  EXPECT_EQ(first_line_of_prediction(" \nabc"), " ");
  EXPECT_EQ(first_line_of_prediction(""), "");
}

TEST(RougeL, DistinctWordsAndLcsUnion) {
  // hyp "the cat sat" (3 distinct), ref "the cat" (2): LCS {the, cat}: R = 1, P = 2/3.
  const double p = 2.0 / 3, r = 1.0;
  EXPECT_EQ(rouge_score("the cat sat", "the cat"), 2.0 * ((p * r) / (p + r + 1e-8)));
  // Repeated words count once: hyp "a a a" has 1 distinct word, ref "a b" 2; hits 1.
  const double p2 = 1.0, r2 = 0.5;
  EXPECT_EQ(rouge_score("a a a", "a b"), 2.0 * ((p2 * r2) / (p2 + r2 + 1e-8)));
  // Sentences split on "."; the union over hypothesis sentences covers both words.
  EXPECT_GT(rouge_score("x a. y b", "a b"), rouge_score("x a", "a b"));
}

TEST(RougeL, AnythingTheRougePackageRaisesScoresZero) {
  EXPECT_EQ(rouge_score("", "a"), 0.0);
  EXPECT_EQ(rouge_score("...", "a"), 0.0);  // only empty pieces: no sentence
  EXPECT_EQ(rouge_score("a", ""), 0.0);
  EXPECT_GT(rouge_score(" . a", "a"), 0.0);  // " " is a sentence (one empty word)
  // "a b ... b" of w words vs "a": w + 1 nested traceback calls; 991 fit under eval.py.
  EXPECT_GT(rouge_score(words("a", "b", 990), "a"), 0.0);
  EXPECT_EQ(rouge_score(words("a", "b", 991), "a"), 0.0);
  const RougeLResult deep = rouge_l_f(utf8_to_u32(words("a", "b", 991)), U"a", kRougeMaxTracebackCalls);
  EXPECT_TRUE(deep.raised);
}

TEST(PythonJson, FloatReprRoundAndDumps) {
  EXPECT_EQ(python_float_repr(100.0), "100.0");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(23.45), "23.45");
  EXPECT_EQ(python_round(2.675, 2), 2.67);  // 2.675 is 2.67499999... in binary
  EXPECT_EQ(python_round(0.125, 2), 0.12);  // an exact tie goes to even
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["b"] = {{"0-4k", 1.5}, {"8k+", std::nan("")}};
  j["a"] = "x\n\"é";
  EXPECT_EQ(python_json_dumps(j, 4),
            "{\n    \"b\": {\n        \"0-4k\": 1.5,\n        \"8k+\": NaN\n    },\n    \"a\": \"x\\n\\\"é\"\n}");
  EXPECT_EQ(python_json_dumps(j), "{\"b\": {\"0-4k\": 1.5, \"8k+\": NaN}, \"a\": \"x\\n\\\"é\"}");
}

TEST(PythonText, WhitespaceAndLower) {
  EXPECT_TRUE(is_python_space(U'\u3000'));
  EXPECT_TRUE(is_python_space(U'\x1c'));
  EXPECT_FALSE(is_python_space(U'\u200b'));  // zero-width space is not whitespace in Python
  EXPECT_EQ(python_split_whitespace(U" a\u00a0b \n"), (std::vector<std::u32string>{U"a", U"b"}));
  EXPECT_EQ(python_split_on(U"a..b", U'.'), (std::vector<std::u32string>{U"a", U"", U"b"}));
  // Final sigma after a cased letter, plain sigma alone; İ -> i + combining dot above.
  EXPECT_EQ(python_lower(U"\u039f\u0394\u039f\u03a3 \u03a3 \u0130"), U"\u03bf\u03b4\u03bf\u03c2 \u03c3 i\u0307");
}

}  // namespace
}  // namespace sb
