#include "harness/eval/ruler/ruler_inputs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/niah.h"
#include "harness/eval/python_package_dir.h"
#include "models/tokenizer/utf8.h"

namespace sb {

namespace fs = std::filesystem;

namespace {

// Compares the strings a + "-" + b without building them.
int compare_pair(const std::string& a1, const std::string& b1, const std::string& a2, const std::string& b2) {
  const std::string_view x[3] = {a1, "-", b1};
  const std::string_view y[3] = {a2, "-", b2};
  size_t xi = 0, xo = 0, yi = 0, yo = 0;
  while (true) {
    while (xi < 3 && xo == x[xi].size()) ++xi, xo = 0;
    while (yi < 3 && yo == y[yi].size()) ++yi, yo = 0;
    if (xi == 3 || yi == 3) return (xi == 3 ? 0 : 1) - (yi == 3 ? 0 : 1);
    const auto cx = static_cast<unsigned char>(x[xi][xo++]);
    const auto cy = static_cast<unsigned char>(y[yi][yo++]);
    if (cx != cy) return cx < cy ? -1 : 1;
  }
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(file.string(), "", "cannot be read", "check the path");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

RulerWordPairs::RulerWordPairs(std::vector<std::string> adjectives, std::vector<std::string> nouns)
    : adjectives_(std::move(adjectives)), nouns_(std::move(nouns)) {
  pairs_.reserve(adjectives_.size() * nouns_.size());
  for (uint32_t a = 0; a < adjectives_.size(); ++a) {
    for (uint32_t n = 0; n < nouns_.size(); ++n) pairs_.emplace_back(a, n);
  }
  // UTF-8 bytes order as Python orders str (by code point).
  const auto less = [this](const auto& p, const auto& q) {
    return compare_pair(adjectives_[p.first], nouns_[p.second], adjectives_[q.first], nouns_[q.second]) < 0;
  };
  std::sort(pairs_.begin(), pairs_.end(), less);
  const auto same = [this](const auto& p, const auto& q) {
    return compare_pair(adjectives_[p.first], nouns_[p.second], adjectives_[q.first], nouns_[q.second]) == 0;
  };
  pairs_.erase(std::unique(pairs_.begin(), pairs_.end(), same), pairs_.end());
}

std::string RulerWordPairs::at(size_t i) const {
  const auto& [a, n] = pairs_.at(i);
  return adjectives_[a] + "-" + nouns_[n];
}

const RulerWordPairs& RulerInputs::word_pairs() {
  if (!word_pairs_) word_pairs_ = std::make_shared<RulerWordPairs>(adjectives, nouns);
  return *word_pairs_;
}

std::vector<std::string> read_ruler_word_list(const fs::path& file) {
  const std::string text = read_text(file);
  std::vector<std::string> words;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool last = end == std::string::npos;
    if (last) end = text.size();
    const std::u32string line = utf8_to_u32(std::string_view(text).substr(start, end - start), file.string());
    size_t keep = line.size();
    while (keep > 0 && is_python_space(line[keep - 1])) --keep;
    words.push_back(u32_to_utf8(std::u32string_view(line).substr(0, keep)));
    start = end + 1;
  }
  return words;
}

fs::path locate_wonderwords_assets(const std::string& explicit_dir, const std::string& flag) {
  PythonPackageQuery query;
  query.package = "wonderwords";
  query.version = "2.2.0";
  query.env_var = "SB_WONDERWORDS_DIR";
  query.flag = flag;
  query.subdir = "assets";
  query.purpose = "for RULER's keys and word lists";
  query.usable = [](const fs::path& dir) {
    return fs::exists(dir / "nounlist.txt") && fs::exists(dir / "adjectivelist.txt") && fs::exists(dir / "verblist.txt");
  };
  return locate_python_package_dir(query, explicit_dir);
}

std::string read_ruler_haystack(const std::string& source, uint64_t seed) {
  if (source == "synthetic") return niah_synthetic_haystack(seed, 4000);
  const fs::path file(source);
  const std::string text = read_text(file);
  if (file.extension() != ".json") return text;
  try {
    return nlohmann::json::parse(text).at("text").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(source, "$.text", std::string("is not a JSON string: ") + e.what(),
                      "give RULER's PaulGrahamEssays.json ({\"text\": ...}) or a plain text file");
  }
}

std::vector<std::string> ruler_essay_words(const std::string& text) {
  const std::u32string cps = utf8_to_u32(text, "the haystack");
  std::vector<std::string> words(1);
  for (size_t i = 0; i < cps.size();) {
    if (is_python_space(cps[i])) {
      while (i < cps.size() && is_python_space(cps[i])) ++i;
      words.emplace_back();
      continue;
    }
    utf8::append(words.back(), cps[i++]);
  }
  return words;
}

std::vector<std::string> ruler_sentences(const std::string& text) {
  const std::u32string cps = python_strip(utf8_to_u32(text, "the haystack"));
  std::vector<std::string> sentences(1);
  for (size_t i = 0; i < cps.size();) {
    const char32_t previous = i > 0 ? cps[i - 1] : 0;
    if (is_python_space(cps[i]) && (previous == U'.' || previous == U'!' || previous == U'?')) {
      while (i < cps.size() && is_python_space(cps[i])) ++i;
      sentences.emplace_back();
      continue;
    }
    utf8::append(sentences.back(), cps[i++]);
  }
  return sentences;
}

}  // namespace sb
