#include "harness/eval/longbench/rouge_l.h"

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "harness/eval/longbench/python_text.h"

namespace sb {
namespace {

// The package's sentence split: [" ".join(s.split()) for s in text.split(".") if len(s) > 0].
std::vector<std::u32string> rouge_sentences(const std::u32string& text) {
  std::vector<std::u32string> sentences;
  for (const std::u32string& piece : python_split_on(text, U'.')) {
    if (!piece.empty()) sentences.push_back(python_collapse_whitespace(piece));
  }
  return sentences;
}

// Words as integer ids (equal words, equal ids) so that the LCS table compares ints.
class WordIds {
 public:
  std::vector<int32_t> ids_of(const std::u32string& sentence) {
    std::vector<int32_t> ids;
    for (const std::u32string& w : python_split_on(sentence, U' ')) {
      ids.push_back(ids_.try_emplace(w, static_cast<int32_t>(ids_.size())).first->second);
    }
    return ids;
  }

 private:
  std::unordered_map<std::u32string, int32_t> ids_;
};

// The package's _recon_lcs(x = reference words, y = hypothesis words): the words of the
// LCS its traceback visits, and the number of nested _recon calls the traceback takes
// (one per step, plus the final call at a zero index).
struct Traceback {
  std::vector<int32_t> words;
  int64_t calls = 0;
};

Traceback recon_lcs(const std::vector<int32_t>& x, const std::vector<int32_t>& y) {
  const size_t n = x.size(), m = y.size();
  const size_t width = m + 1;
  std::vector<int32_t> table((n + 1) * width, 0);  // table[i * width + j] = LCS of x[:i], y[:j]
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      table[i * width + j] = x[i - 1] == y[j - 1]
                                 ? table[(i - 1) * width + j - 1] + 1
                                 : std::max(table[(i - 1) * width + j], table[i * width + j - 1]);
    }
  }
  Traceback t;
  size_t i = n, j = m;
  t.calls = 1;
  while (i > 0 && j > 0) {
    if (x[i - 1] == y[j - 1]) {
      t.words.push_back(x[i - 1]);
      --i;
      --j;
    } else if (table[(i - 1) * width + j] > table[i * width + j - 1]) {
      --i;
    } else {
      --j;
    }
    ++t.calls;
  }
  return t;
}

}  // namespace

RougeLResult rouge_l_f(const std::u32string& hypothesis, const std::u32string& reference,
                       int max_traceback_calls) {
  RougeLResult result;
  const std::vector<std::u32string> hyp = rouge_sentences(hypothesis);
  const std::vector<std::u32string> ref = rouge_sentences(reference);
  if (hyp.empty() || ref.empty()) {
    result.raised = true;  // ValueError("Hypothesis is empty.") and the like
    return result;
  }
  WordIds ids;
  std::vector<std::vector<int32_t>> hyp_words, ref_words;
  std::unordered_set<int32_t> hyp_distinct, ref_distinct;
  for (const auto& s : hyp) {
    hyp_words.push_back(ids.ids_of(s));
    hyp_distinct.insert(hyp_words.back().begin(), hyp_words.back().end());
  }
  for (const auto& s : ref) {
    ref_words.push_back(ids.ids_of(s));
    ref_distinct.insert(ref_words.back().begin(), ref_words.back().end());
  }
  std::unordered_set<int32_t> lcs_union;
  for (const auto& r : ref_words) {
    for (const auto& h : hyp_words) {
      // A traceback can never take fewer steps than the shorter side needs to reach 0.
      if (static_cast<int64_t>(std::min(r.size(), h.size())) + 1 > max_traceback_calls) {
        result.raised = true;
        return result;
      }
      const Traceback t = recon_lcs(r, h);
      if (t.calls > max_traceback_calls) {
        result.raised = true;  // RecursionError
        return result;
      }
      lcs_union.insert(t.words.begin(), t.words.end());
    }
  }
  const double hits = static_cast<double>(lcs_union.size());
  const double r_lcs = hits / static_cast<double>(ref_distinct.size());
  const double p_lcs = hits / static_cast<double>(hyp_distinct.size());
  result.f = 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
  return result;
}

}  // namespace sb
