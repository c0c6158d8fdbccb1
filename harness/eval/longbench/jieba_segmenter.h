#pragma once
// Chinese word segmentation as jieba 0.42.1's jieba.cut(text, cut_all=False, HMM=True)
// ("precise mode"), the segmenter upstream LongBench scores its Chinese tasks with.
//
// Why a C++ reimplementation rather than calling Python: the scorer is the part users
// must trust, runs inside the harness (also after training, without a Python process)
// and must be fast; jieba's algorithm is small and fully determined by its data files,
// which are read from the installed jieba package itself, so there is no copy of the
// dictionary to drift. tests/python/test_longbench_jieba.py compares the two on a large
// mixed corpus.
//
// The algorithm, on code points:
//  1. the text splits into runs of [\u4E00-\u9FD5a-zA-Z0-9+#&._%-] and the rest; outside
//     the runs, "\r\n" and each whitespace character are words, every other character
//     is its own word;
//  2. a run becomes a DAG of dictionary words (dict.txt words with frequency > 0; every
//     prefix of a word is a key, with frequency 0 if not a word itself); the route
//     maximises sum(log(freq or 1) - log(total)) from the right, ties to the longer word;
//  3. consecutive one-character pieces of the route are buffered: a buffer of several
//     characters that is not itself a dictionary word goes through the HMM (jieba_hmm.h),
//     one that is a word is emitted character by character.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "harness/eval/longbench/jieba_hmm.h"

namespace sb {

class JiebaSegmenter {
 public:
  // jieba_dir is the installed package folder (site-packages/jieba): dict.txt and
  // finalseg/prob_*.py are read from it. Throws std::runtime_error naming the file.
  static JiebaSegmenter load(const std::filesystem::path& jieba_dir);

  std::vector<std::u32string> cut(const std::u32string& text) const;
  std::vector<std::string> cut_utf8(std::string_view text) const;

  const std::filesystem::path& dir() const { return dir_; }
  // The version in the package's dist-info folder beside it ("" when not found).
  const std::string& version() const { return version_; }

 private:
  void cut_run(const std::u32string& run, std::vector<std::u32string>& out) const;
  int64_t frequency(const std::u32string& word) const;  // 0 when absent

  std::filesystem::path dir_;
  std::string version_;
  std::unordered_map<std::u32string, int64_t> freq_;
  int64_t total_ = 0;
  double log_total_ = 0;
  JiebaHmm hmm_;
};

// Where jieba is installed, in this order: `explicit_dir` when not empty; $SB_JIEBA_DIR;
// the project's Python environments ($SB_CACHE_DIR, else ~/.cache/sparsebalance:
// venv-*/lib/python3*/site-packages/jieba, preferring version 0.42.1). Throws
// ConfigError (naming `flag`) with how to install or point at it when none is found.
std::filesystem::path locate_jieba_dir(const std::string& explicit_dir, const std::string& flag);

}  // namespace sb
