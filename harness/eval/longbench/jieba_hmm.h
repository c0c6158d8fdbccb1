#pragma once
// jieba's unknown-word model (jieba/finalseg, version 0.42.1): a 4-state HMM over
// characters (B begin, M middle, E end, S single) decoded with Viterbi. The tables are
// read from jieba's own prob_start.py, prob_trans.py and prob_emit.py, which are Python
// literals `P={...}` of log probabilities; a small reader for exactly that literal form
// (dicts, quoted strings with \u escapes, floats) loads them, no conversion step needed.
//
// cut(text) reproduces finalseg.cut: runs of [\u4E00-\u9FD5] go through Viterbi; the
// rest is split by ([a-zA-Z0-9]+(?:\.\d+)?%?) with every non-empty piece kept.

#include <array>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace sb {

class JiebaHmm {
 public:
  // finalseg_dir holds prob_start.py, prob_trans.py, prob_emit.py. Throws
  // std::runtime_error naming the file (and line) when one is missing or malformed.
  static JiebaHmm load(const std::filesystem::path& finalseg_dir);

  std::vector<std::u32string> cut(const std::u32string& text) const;

 private:
  // State order B, E, M, S: the alphabetical order in which Python's tuple max breaks
  // ties between equal probabilities.
  static constexpr int kStates = 4;
  std::vector<std::u32string> cut_han(const std::u32string& text) const;

  std::array<double, kStates> start_{};
  std::array<std::array<double, kStates>, kStates> trans_{};  // [from][to]
  std::array<std::unordered_map<char32_t, double>, kStates> emit_;
};

}  // namespace sb
