#pragma once
// What RULER's generators read besides the task: the tokenizer's counts, wonderwords'
// word lists, the essay haystack, the QA data and the seed (docs/ruler.md, "Inputs").

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sb {

// sorted(set(f"{adj}-{noun}" for adj in adjectives for noun in nouns)), niah's key words,
// held as (adjective, noun) index pairs in that order rather than 6 million strings.
class RulerWordPairs {
 public:
  RulerWordPairs(std::vector<std::string> adjectives, std::vector<std::string> nouns);
  size_t size() const { return pairs_.size(); }
  std::string at(size_t i) const;

 private:
  std::vector<std::string> adjectives_, nouns_;
  std::vector<std::pair<uint32_t, uint32_t>> pairs_;
};

struct RulerInputs {
  // Tokens of a text under the model's tokenizer, no special tokens added (RULER's
  // TOKENIZER.text_to_tokens for an HF tokenizer).
  std::function<int64_t(const std::string&)> count_tokens;
  uint64_t seed = 42;
  // wonderwords 2.2.0's nounlist.txt, adjectivelist.txt, verblist.txt, each line rstrip()'d.
  std::vector<std::string> nouns, adjectives, verbs;
  // The essay haystack as RULER splits it: re.sub(r"\s+", " ", text).split(" ").
  std::vector<std::string> essay_words;
  // cwe's pool when a list needs more distinct words than wonderwords has (RULER's
  // english_words.json values); empty: such lengths are refused.
  std::vector<std::string> cwe_fallback_words;
  std::filesystem::path squad, hotpotqa;  // SQuAD v2.0 dev, HotpotQA dev distractor (JSON)

  const RulerWordPairs& word_pairs();  // built on first use (a few seconds)

 private:
  std::shared_ptr<RulerWordPairs> word_pairs_;
};

// A word list file as wonderwords reads it: its lines, each with trailing whitespace
// removed. ConfigError naming the file when it is missing.
std::vector<std::string> read_ruler_word_list(const std::filesystem::path& file);

// wonderwords' assets folder: --words-dir, $SB_WONDERWORDS_DIR, or the project's Python
// environments (wonderwords 2.2.0 preferred).
std::filesystem::path locate_wonderwords_assets(const std::string& explicit_dir, const std::string& flag);

// The essay text: "synthetic" (seeded English sentences, docs/ruler.md), a .json file
// holding {"text": ...} (RULER's PaulGrahamEssays.json), or any other file's whole text.
std::string read_ruler_haystack(const std::string& source, uint64_t seed);
// re.sub(r"\s+", " ", text).split(" ") with Python's whitespace.
std::vector<std::string> ruler_essay_words(const std::string& text);
// Sentences of an essay text [our rule, for nltk's punkt]: re.split(r"(?<=[.!?])\s+", text.strip()).
std::vector<std::string> ruler_sentences(const std::string& text);

}  // namespace sb
