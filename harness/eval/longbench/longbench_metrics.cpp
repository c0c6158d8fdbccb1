#include "harness/eval/longbench/longbench_metrics.h"

#include <cmath>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "harness/eval/longbench/jieba_segmenter.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/longbench/rouge_l.h"

namespace sb {
namespace {

// Python's string.punctuation.
bool is_ascii_punctuation(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

// The CJK and full-width punctuation of upstream's normalize_zh_answer, as it lists it
// (note: it has "》" but not "《").
bool is_zh_punctuation(char32_t c) {
  static const std::u32string kSet =
      U"！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.";
  return is_ascii_punctuation(c) || kSet.find(c) != std::u32string::npos;
}

// re.sub(r"\b(a|an|the)\b", " ", text) with Python's Unicode \b.
std::u32string replace_articles(const std::u32string& text) {
  static const std::u32string kArticles[] = {U"a", U"an", U"the"};
  std::u32string out;
  size_t i = 0;
  while (i < text.size()) {
    const bool boundary_before = i == 0 || !is_python_word(text[i - 1]);
    size_t matched = 0;
    if (boundary_before) {
      for (const std::u32string& article : kArticles) {
        const size_t end = i + article.size();
        if (text.compare(i, article.size(), article) == 0 &&
            (end == text.size() || !is_python_word(text[end]))) {
          matched = article.size();
          break;
        }
      }
    }
    if (matched > 0) {
      out.push_back(U' ');
      i += matched;
    } else {
      out.push_back(text[i]);
      ++i;
    }
  }
  return out;
}

// re.findall(r"\d+", text) with Python's Unicode \d.
std::vector<std::u32string> find_numbers(const std::u32string& text) {
  std::vector<std::u32string> numbers;
  size_t i = 0;
  while (i < text.size()) {
    if (!is_python_decimal(text[i])) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && is_python_decimal(text[i])) ++i;
    numbers.push_back(text.substr(start, i - start));
  }
  return numbers;
}

// The digits of the first match of `<prefix>(\d+)`, or nothing.
bool find_prefixed_number(const std::u32string& text, const std::u32string& prefix, std::u32string* id) {
  for (size_t at = text.find(prefix); at != std::u32string::npos; at = text.find(prefix, at + 1)) {
    size_t end = at + prefix.size();
    const size_t start = end;
    while (end < text.size() && is_python_decimal(text[end])) ++end;
    if (end > start) {
      *id = text.substr(start, end - start);
      return true;
    }
  }
  return false;
}

double share_equal(const std::vector<std::u32string>& numbers, const std::u32string& target) {
  if (numbers.empty()) return 0.0;
  int64_t right = 0;
  for (const auto& n : numbers) right += n == target;
  return static_cast<double>(right) / static_cast<double>(numbers.size());
}

std::vector<std::u32string> jieba_words(const JiebaSegmenter& jieba, const std::string& text) {
  return jieba.cut(utf8_to_u32(text));
}

std::u32string join_with_spaces(const std::vector<std::u32string>& words) {
  std::u32string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out.push_back(U' ');
    out += words[i];
  }
  return out;
}

std::u32string lstrip_newlines(const std::u32string& text) {
  size_t i = 0;
  while (i < text.size() && text[i] == U'\n') ++i;
  return text.substr(i);
}

// Length of the longest common subsequence of code points (two rows of the table).
size_t lcs_length(const std::u32string& a, const std::u32string& b) {
  std::vector<size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::u32string longbench_normalize_answer(const std::u32string& text) {
  std::u32string no_punct;
  for (char32_t c : python_lower(text)) {
    if (!is_ascii_punctuation(c)) no_punct.push_back(c);
  }
  return python_collapse_whitespace(replace_articles(no_punct));
}

std::u32string longbench_normalize_zh_answer(const std::u32string& text) {
  std::u32string out;
  for (char32_t c : python_lower(text)) {
    if (!is_zh_punctuation(c) && !is_python_space(c)) out.push_back(c);
  }
  return out;
}

double longbench_token_f1(const std::vector<std::u32string>& prediction,
                          const std::vector<std::u32string>& truth) {
  std::unordered_map<std::u32string, int64_t> counts;
  for (const auto& w : truth) ++counts[w];
  int64_t same = 0;
  for (const auto& w : prediction) {
    auto it = counts.find(w);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = 1.0 * static_cast<double>(same) / static_cast<double>(prediction.size());
  const double recall = 1.0 * static_cast<double>(same) / static_cast<double>(truth.size());
  return (2 * precision * recall) / (precision + recall);
}

double qa_f1_score(const std::string& prediction, const std::string& truth) {
  return longbench_token_f1(python_split_whitespace(longbench_normalize_answer(utf8_to_u32(prediction))),
                            python_split_whitespace(longbench_normalize_answer(utf8_to_u32(truth))));
}

double qa_f1_zh_score(const std::string& prediction, const std::string& truth, const JiebaSegmenter& jieba) {
  auto tokens = [&](const std::string& text) {
    std::vector<std::u32string> out;
    for (const auto& w : jieba_words(jieba, text)) {
      std::u32string n = longbench_normalize_zh_answer(w);
      if (!n.empty()) out.push_back(std::move(n));
    }
    return out;
  };
  return longbench_token_f1(tokens(prediction), tokens(truth));
}

double rouge_score(const std::string& prediction, const std::string& truth, int max_traceback_calls) {
  return rouge_l_f(utf8_to_u32(prediction), utf8_to_u32(truth), max_traceback_calls).f;
}

double rouge_zh_score(const std::string& prediction, const std::string& truth, const JiebaSegmenter& jieba) {
  return rouge_l_f(join_with_spaces(jieba_words(jieba, prediction)),
                   join_with_spaces(jieba_words(jieba, truth)), kRougeZhMaxTracebackCalls)
      .f;
}

double classification_score(const std::string& prediction, const std::string& truth,
                            const std::vector<std::string>& all_classes) {
  std::vector<std::string> matches;
  for (const auto& name : all_classes) {
    if (prediction.find(name) != std::string::npos) matches.push_back(name);
  }
  // `for term in list: ... list.remove(term)`: Python's list iterator is an index, and
  // remove() drops the FIRST equal element, so the element after a removal is skipped.
  for (size_t index = 0; index < matches.size();) {
    const std::string term = matches[index++];
    if (truth.find(term) != std::string::npos && term != truth) {
      for (size_t k = 0; k < matches.size(); ++k) {
        if (matches[k] == term) {
          matches.erase(matches.begin() + static_cast<std::ptrdiff_t>(k));
          break;
        }
      }
    }
  }
  for (const auto& m : matches) {
    if (m == truth) return 1.0 / static_cast<double>(matches.size());
  }
  return 0.0;
}

double retrieval_score(const std::string& prediction, const std::string& truth) {
  std::u32string id;
  if (!find_prefixed_number(utf8_to_u32(truth), U"Paragraph ", &id)) {
    throw std::invalid_argument("retrieval answer \"" + truth + "\" has no \"Paragraph N\"");
  }
  return share_equal(find_numbers(utf8_to_u32(prediction)), id);
}

double retrieval_zh_score(const std::string& prediction, const std::string& truth) {
  std::u32string id;
  if (!find_prefixed_number(utf8_to_u32(truth), U"段落", &id)) {
    throw std::invalid_argument("retrieval answer \"" + truth + "\" has no \"段落N\"");
  }
  return share_equal(find_numbers(utf8_to_u32(prediction)), id);
}

double count_score(const std::string& prediction, const std::string& truth) {
  return share_equal(find_numbers(utf8_to_u32(prediction)), utf8_to_u32(truth));
}

int fuzz_ratio(const std::string& a, const std::string& b) {
  if (a == b) return 100;
  if (a.empty() || b.empty()) return 0;
  const std::u32string x = utf8_to_u32(a), y = utf8_to_u32(b);
  const double total = static_cast<double>(x.size() + y.size());
  const double distance = total - 2.0 * static_cast<double>(lcs_length(x, y));  // indel
  const double ratio = 1.0 - distance / total;
  return static_cast<int>(std::nearbyint(100 * ratio));  // round half to even
}

double code_sim_score(const std::string& prediction, const std::string& truth) {
  std::string line;
  for (const std::u32string& candidate : python_split_on(lstrip_newlines(utf8_to_u32(prediction)), U'\n')) {
    const std::string utf8 = u32_to_utf8(candidate);
    if (utf8.find('`') == std::string::npos && utf8.find('#') == std::string::npos &&
        utf8.find("//") == std::string::npos) {
      line = utf8;
      break;
    }
  }
  return fuzz_ratio(line, truth) / 100.0;
}

std::string first_line_of_prediction(const std::string& prediction) {
  return u32_to_utf8(python_split_on(lstrip_newlines(utf8_to_u32(prediction)), U'\n').front());
}

}  // namespace sb
