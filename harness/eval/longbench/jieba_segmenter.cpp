#include "harness/eval/longbench/jieba_segmenter.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/python_package_dir.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

// re_han_default of jieba: the characters that make up segmentable runs.
bool is_run_char(char32_t c) {
  if (c >= 0x4E00 && c <= 0x9FD5) return true;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '+': case '#': case '&': case '.': case '_': case '%': case '-':
      return true;
    default:
      return false;
  }
}

// bytes.strip(): ASCII whitespace.
std::string_view strip_ascii_space(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

JiebaSegmenter JiebaSegmenter::load(const fs::path& jieba_dir) {
  JiebaSegmenter seg;
  seg.dir_ = jieba_dir;
  seg.version_ = installed_package_version(jieba_dir.parent_path(), "jieba");
  const fs::path dict = jieba_dir / "dict.txt";
  if (!fs::exists(dict)) throw std::runtime_error(dict.string() + " is missing (jieba's dictionary)");
  const std::string text = read_file(dict);
  // As jieba's gen_pfdict: "word freq [tag]" per line; a later duplicate overwrites the
  // frequency but both count in the total; every prefix becomes a key (frequency 0
  // unless it is a word itself).
  size_t line_start = 0;
  int64_t line_number = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = text.size();
    ++line_number;
    const std::string_view line =
        strip_ascii_space(std::string_view(text).substr(line_start, line_end - line_start));
    line_start = line_end + 1;
    const size_t space = line.find(' ');
    const std::string_view word_utf8 = line.substr(0, space);
    std::string_view freq_text = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    freq_text = freq_text.substr(0, freq_text.find(' '));
    char* end = nullptr;
    const std::string freq_string(freq_text);
    const long long freq = std::strtoll(freq_string.c_str(), &end, 10);
    if (space == std::string_view::npos || freq_string.empty() || end != freq_string.c_str() + freq_string.size()) {
      throw std::runtime_error(dict.string() + ":" + std::to_string(line_number) +
                               ": invalid dictionary entry \"" + std::string(line) + "\"");
    }
    const std::u32string word = utf8_to_u32(word_utf8, dict.string() + ":" + std::to_string(line_number));
    seg.freq_[word] = freq;
    seg.total_ += freq;
    for (size_t n = 1; n < word.size(); ++n) seg.freq_.try_emplace(word.substr(0, n), 0);
  }
  if (seg.total_ <= 0) throw std::runtime_error(dict.string() + ": no word frequencies");
  seg.log_total_ = std::log(static_cast<double>(seg.total_));
  seg.hmm_ = JiebaHmm::load(jieba_dir / "finalseg");
  return seg;
}

int64_t JiebaSegmenter::frequency(const std::u32string& word) const {
  const auto it = freq_.find(word);
  return it == freq_.end() ? 0 : it->second;
}

void JiebaSegmenter::cut_run(const std::u32string& run, std::vector<std::u32string>& out) const {
  const size_t n = run.size();
  // DAG: for each start k, the ends i (inclusive) of dictionary words run[k..i].
  std::vector<std::vector<size_t>> dag(n);
  for (size_t k = 0; k < n; ++k) {
    std::u32string frag(1, run[k]);
    size_t i = k;
    while (i < n) {
      const auto it = freq_.find(frag);
      if (it == freq_.end()) break;
      if (it->second != 0) dag[k].push_back(i);
      ++i;
      if (i < n) frag.push_back(run[i]);
    }
    if (dag[k].empty()) dag[k].push_back(k);
  }
  // Best route from the right: route[k] = max over ends x of
  // (log(freq(run[k..x]) or 1) - log(total) + route[x + 1], x).
  std::vector<double> score(n + 1, 0.0);
  std::vector<size_t> end(n + 1, 0);
  for (size_t k = n; k-- > 0;) {
    bool first = true;
    for (size_t x : dag[k]) {
      const int64_t f = frequency(run.substr(k, x + 1 - k));
      const double s = (std::log(static_cast<double>(f != 0 ? f : 1)) - log_total_) + score[x + 1];
      if (first || s > score[k] || (s == score[k] && x > end[k])) {
        score[k] = s;
        end[k] = x;
        first = false;
      }
    }
  }
  std::u32string buffer;  // consecutive one-character words
  auto flush = [&]() {
    if (buffer.empty()) return;
    if (buffer.size() == 1) {
      out.push_back(buffer);
    } else if (frequency(buffer) == 0) {
      for (auto& w : hmm_.cut(buffer)) out.push_back(std::move(w));
    } else {
      for (char32_t c : buffer) out.emplace_back(1, c);
    }
    buffer.clear();
  };
  for (size_t x = 0; x < n;) {
    const size_t y = end[x] + 1;
    if (y - x == 1) {
      buffer.push_back(run[x]);
    } else {
      flush();
      out.push_back(run.substr(x, y - x));
    }
    x = y;
  }
  flush();
}

std::vector<std::u32string> JiebaSegmenter::cut(const std::u32string& text) const {
  std::vector<std::u32string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    if (is_run_char(text[i])) {
      while (j < text.size() && is_run_char(text[j])) ++j;
      cut_run(text.substr(i, j - i), out);
      i = j;
      continue;
    }
    // Outside the runs: "\r\n" and single whitespace characters are words (re_skip),
    // everything else one word per character.
    while (j < text.size() && !is_run_char(text[j])) ++j;
    for (size_t k = i; k < j; ++k) {
      if (text[k] == U'\r' && k + 1 < j && text[k + 1] == U'\n') {
        out.push_back(U"\r\n");
        ++k;
      } else {
        out.emplace_back(1, text[k]);
      }
    }
    i = j;
  }
  return out;
}

std::vector<std::string> JiebaSegmenter::cut_utf8(std::string_view text) const {
  std::vector<std::string> out;
  for (const auto& w : cut(utf8_to_u32(text))) out.push_back(u32_to_utf8(w));
  return out;
}

fs::path locate_jieba_dir(const std::string& explicit_dir, const std::string& flag) {
  PythonPackageQuery query;
  query.package = "jieba";
  query.version = "0.42.1";
  query.env_var = "SB_JIEBA_DIR";
  query.flag = flag;
  query.purpose = "to score the Chinese tasks";
  query.usable = [](const fs::path& dir) { return fs::exists(dir / "dict.txt") && fs::is_directory(dir / "finalseg"); };
  return locate_python_package_dir(query, explicit_dir);
}

}  // namespace sb
