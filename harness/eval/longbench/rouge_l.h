#pragma once
// ROUGE-L F as the `rouge` package (pltrdy, version 1.0.1) computes it in
// Rouge().get_scores([hyp], [ref], avg=True)["rouge-l"]["f"], which upstream LongBench
// uses (and which differs from Google's rouge-score):
//   - "sentences": text.split("."), empty pieces dropped, whitespace collapsed inside
//     each (a piece of only spaces stays, as one empty word);
//   - words: each sentence split on " ";
//   - m, n: the numbers of DISTINCT words of the reference and the hypothesis;
//   - for every (reference sentence, hypothesis sentence) pair one LCS is reconstructed
//     by the package's traceback (diagonal on equal words, else up when the cell above
//     is strictly larger, else left); hits = the number of distinct words in the union
//     of all those LCS word sets;
//   - R = hits / m, P = hits / n, F = 2 * (P * R / (P + R + 1e-8)).
// Upstream wraps get_scores in a bare `except: return 0.0`, so anything that raises
// scores 0: an empty hypothesis or reference (no sentence), and RecursionError: the
// package reconstructs the LCS recursively, one Python frame per traceback step, and
// CPython's default limit is 1000 frames. `max_traceback_calls` is how many nested
// calls fit under upstream eval.py (see longbench_metrics.h).

#include <string>

namespace sb {

struct RougeLResult {
  double f = 0;
  bool raised = false;  // true when the package would raise (then f = 0)
};

RougeLResult rouge_l_f(const std::u32string& hypothesis, const std::u32string& reference,
                       int max_traceback_calls);

}  // namespace sb
