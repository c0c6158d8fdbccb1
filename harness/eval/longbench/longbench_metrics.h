#pragma once
// LongBench's metrics (upstream metrics.py), one function each, with upstream's quirks
// kept on purpose; the written definitions are in docs/longbench.md ("LongBench metrics").
// Texts are UTF-8; inside, everything works on code points as Python's str does.
//
//   qa_f1           normalize_answer, split on whitespace, token F1
//   qa_f1_zh        jieba words, normalize_zh_answer each, drop empty, token F1
//   rouge           ROUGE-L F of the `rouge` package (rouge_l.h); anything it raises -> 0
//   rouge_zh        " ".join(jieba words) of both, then rouge
//   classification  class names contained in the prediction; while iterating over that
//                   list, a match that is a substring of the truth but not equal to it is
//                   removed (Python skips the element after each removal); 1/len(list)
//                   if the truth is in the list, else 0
//   retrieval(_zh)  the id of "Paragraph (\d+)" ("段落(\d+)") in the truth; the share of
//                   the \d+ numbers of the prediction equal to it (0 without numbers)
//   count           the share of \d+ numbers of the prediction equal to the truth
//   code_sim        first line (after leading newlines) without "`", "#" or "//" (else
//                   ""), fuzzywuzzy fuzz.ratio with the truth / 100
// \d is Python's: any Unicode decimal digit (e.g. full-width "１" counts as a number,
// and differs from "1").

#include <string>
#include <vector>

namespace sb {

class JiebaSegmenter;

// Under `python eval.py` (CPython 3.11, recursion limit 1000) the rouge package's first
// recursive _recon call runs at frame depth 10: <module>, scorer, rouge_score,
// Rouge.get_scores, _get_avg_scores, the metric lambda, rouge_l_summary_level,
// _union_lcs, _recon_lcs, _recon. So at most 1000 - 9 nested traceback calls fit;
// rouge_zh_score adds one frame. Measured, not assumed: tests/python checks both
// boundaries against the rouge package under the same call depth.
constexpr int kRougeMaxTracebackCalls = 991;
constexpr int kRougeZhMaxTracebackCalls = 990;

std::u32string longbench_normalize_answer(const std::u32string& text);
std::u32string longbench_normalize_zh_answer(const std::u32string& text);
// Multiset overlap F1; 0 when nothing overlaps.
double longbench_token_f1(const std::vector<std::u32string>& prediction,
                          const std::vector<std::u32string>& truth);

double qa_f1_score(const std::string& prediction, const std::string& truth);
double qa_f1_zh_score(const std::string& prediction, const std::string& truth, const JiebaSegmenter& jieba);
double rouge_score(const std::string& prediction, const std::string& truth,
                   int max_traceback_calls = kRougeMaxTracebackCalls);
double rouge_zh_score(const std::string& prediction, const std::string& truth, const JiebaSegmenter& jieba);
double classification_score(const std::string& prediction, const std::string& truth,
                            const std::vector<std::string>& all_classes);
// Throw std::invalid_argument when the truth has no "Paragraph N" / "段落N" (upstream
// fails with IndexError there).
double retrieval_score(const std::string& prediction, const std::string& truth);
double retrieval_zh_score(const std::string& prediction, const std::string& truth);
double count_score(const std::string& prediction, const std::string& truth);
double code_sim_score(const std::string& prediction, const std::string& truth);

// fuzzywuzzy's fuzz.ratio with python-Levenshtein: 100 for equal strings, 0 when either
// is empty, else round(100 * (1 - indel_distance / (len1 + len2))) with Python's round
// (half to even); lengths in code points.
int fuzz_ratio(const std::string& a, const std::string& b);

// prediction.lstrip("\n").split("\n")[0]: what the scorer keeps for trec, triviaqa,
// samsum and lsht.
std::string first_line_of_prediction(const std::string& prediction);

}  // namespace sb
