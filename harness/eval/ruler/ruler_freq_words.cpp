// RULER's frequent words extraction (scripts/data/synthetic/freq_words_extraction.py):
// coded 6-letter words drawn with Zipf frequencies (the most frequent one is the noise
// token "..."); the answer is the next three by frequency.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/eval/ruler/python_random.h"
#include "harness/eval/ruler/ruler_generators.h"
#include "harness/eval/ruler/ruler_size_search.h"

namespace sb {
namespace {

constexpr int64_t kCodedWordLength = 6;
// scipy.special.zeta(2.0): the only exponent RULER's tasks use.
constexpr double kZeta2 = 1.6449340668482264;

class FreqWordsGenerator {
 public:
  FreqWordsGenerator(const RulerTask& task, int64_t max_length, RulerInputs& inputs)
      : task_(task), inputs_(inputs), rng_(inputs.seed) {
    if (task.alpha != 2.0) throw std::invalid_argument(task.name + ": only alpha 2.0 is supported");
    template_ = ruler_full_template(RulerFamily::kFreqWords);
    max_words_len_ = max_length - ruler_template(RulerFamily::kFreqWords).tokens_to_generate;
    vocab_size_ = max_words_len_ / 50;
    incremental_ = max_words_len_ / 32;
    if (vocab_size_ < 4) {
      throw RulerTooShort(task.name + " needs at least 250 tokens (4 coded words), got " + std::to_string(max_length));
    }
  }

  // A fresh vocabulary: vocab_size distinct 6-letter words, sorted, shuffled by
  // Random(seed), the first replaced by "...".
  void draw_vocab() {
    std::vector<std::string> vocab;
    const auto word = [&] {
      std::string w;
      for (size_t i : rng_.choices(26, kCodedWordLength)) w.push_back(static_cast<char>('a' + i));
      return w;
    };
    for (int64_t i = 0; i < vocab_size_; ++i) vocab.push_back(word());
    while (true) {
      std::vector<std::string> sorted = vocab;
      std::sort(sorted.begin(), sorted.end());
      sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      if (static_cast<int64_t>(sorted.size()) >= vocab_size_) {
        vocab = std::move(sorted);
        break;
      }
      vocab.push_back(word());
    }
    PythonRandom(inputs_.seed).shuffle(vocab);
    vocab[0] = "...";
    vocab_ = std::move(vocab);
  }

  // gen_text: word r (1-based rank) int(N * r^-alpha / zeta(alpha)) times, shuffled by
  // Random(seed).
  std::string text(int64_t num_words) const {
    std::vector<const std::string*> words;
    for (size_t r = 0; r < vocab_.size(); ++r) {
      const double count = static_cast<double>(num_words) * std::pow(static_cast<double>(r + 1), -task_.alpha) / kZeta2;
      for (int64_t c = 0; c < static_cast<int64_t>(count); ++c) words.push_back(&vocab_[r]);
    }
    PythonRandom(inputs_.seed).shuffle(words);
    std::string context;
    for (size_t i = 0; i < words.size(); ++i) context += (i ? " " : "") + *words[i];
    return format_ruler_template(template_, {{"context", context}});
  }

  // generate_input_output: with num_words < 0 grow from max_len / 6 until the text
  // reaches max_len and step back once; otherwise shrink while it exceeds max_len.
  std::pair<std::string, int64_t> generate(int64_t num_words) {
    draw_vocab();
    const int64_t max_len = max_words_len_;
    if (num_words > 0) {
      while (inputs_.count_tokens(text(num_words)) > max_len) num_words -= incremental_;
    } else {
      num_words = max_len / kCodedWordLength;
      while (inputs_.count_tokens(text(num_words)) < max_len) num_words += incremental_;
      num_words -= incremental_;
    }
    return {text(num_words), num_words};
  }

  std::vector<RulerRecord> samples(int64_t num_samples) {
    const int64_t budget = ruler_template(RulerFamily::kFreqWords).tokens_to_generate;
    const int64_t words = generate(-1).second;
    std::vector<RulerRecord> records;
    for (int64_t index = 0; index < num_samples; ++index) {
      const std::string prompt = generate(words).first;
      const std::vector<std::string> answer(vocab_.begin() + 1, vocab_.begin() + 4);
      records.push_back(
          split_ruler_prompt(RulerFamily::kFreqWords, prompt, index, answer, inputs_.count_tokens(prompt) + budget));
    }
    return records;
  }

 private:
  const RulerTask& task_;
  RulerInputs& inputs_;
  PythonRandom rng_;
  std::string template_;
  int64_t max_words_len_ = 0, vocab_size_ = 0, incremental_ = 0;
  std::vector<std::string> vocab_;
};

}  // namespace

std::vector<RulerRecord> generate_freq_words(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                             RulerInputs& inputs) {
  return FreqWordsGenerator(task, max_length, inputs).samples(num_samples);
}

}  // namespace sb
