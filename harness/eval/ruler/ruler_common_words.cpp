// RULER's common words extraction (scripts/data/synthetic/common_words_extraction.py): a
// numbered list where 10 words repeat more often than the rest; one solved example first.
#include <algorithm>
#include <cmath>

#include "harness/eval/ruler/python_random.h"
#include "harness/eval/ruler/ruler_generators.h"
#include "harness/eval/ruler/ruler_size_search.h"

namespace sb {
namespace {

// Python's float floor division a // b (CPython's float_floor_div: fmod, then the
// quotient rounded to the nearest integer it is within 0.5 of).
double python_floor_divide(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

std::string numbered(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? " " : "") + std::to_string(i + 1) + ". " + words[i];
  return out;
}

class CommonWordsGenerator {
 public:
  CommonWordsGenerator(const RulerTask& task, int64_t max_length, RulerInputs& inputs)
      : task_(task), max_length_(max_length), inputs_(inputs), rng_(inputs.seed) {
    template_ = ruler_full_template(RulerFamily::kCommonWords);
    pool_ = inputs.nouns;
    pool_.insert(pool_.end(), inputs.adjectives.begin(), inputs.adjectives.end());
    pool_.insert(pool_.end(), inputs.verbs.begin(), inputs.verbs.end());
    std::sort(pool_.begin(), pool_.end());
    pool_.erase(std::unique(pool_.begin(), pool_.end()), pool_.end());
    PythonRandom(inputs.seed).shuffle(pool_);
  }

  // get_example: (the numbered list, its common words).
  std::pair<std::string, std::vector<std::string>> example(size_t num_words, int64_t common_repeats,
                                                           int64_t uncommon_repeats) {
    const std::vector<std::string>* source = &pool_;
    if (num_words > pool_.size()) {
      if (num_words > inputs_.cwe_fallback_words.size()) {
        throw std::runtime_error(task_.name + " at " + std::to_string(max_length_) + " tokens needs " +
                                 std::to_string(num_words) + " distinct words, more than wonderwords' " +
                                 std::to_string(pool_.size()) +
                                 (inputs_.cwe_fallback_words.empty()
                                      ? std::string(": pass --cwe-words (RULER's english_words.json)")
                                      : " and the " + std::to_string(inputs_.cwe_fallback_words.size()) +
                                            " of --cwe-words"));
      }
      source = &inputs_.cwe_fallback_words;
    }
    std::vector<std::string> picked;
    for (size_t i : rng_.sample(source->size(), num_words)) picked.push_back((*source)[i]);
    const size_t common_count = std::min(picked.size(), static_cast<size_t>(task_.num_cw));
    std::vector<std::string> common(picked.begin(), picked.begin() + static_cast<std::ptrdiff_t>(common_count));
    std::vector<std::string> list;
    for (int64_t r = 0; r < common_repeats; ++r) list.insert(list.end(), common.begin(), common.end());
    for (int64_t r = 0; r < uncommon_repeats; ++r) {
      list.insert(list.end(), picked.begin() + static_cast<std::ptrdiff_t>(common_count), picked.end());
    }
    PythonRandom(inputs_.seed).shuffle(list);
    return {numbered(list), common};
  }

  // generate_input_output: one solved example (20 or 40 words), then the question.
  RulerDraw generate(size_t num_words) {
    const bool short_prompt = max_length_ < 4096;
    auto [shot_context, shot_answer] = short_prompt ? example(20, 3, 1) : example(40, 10, 3);
    auto [context, answer] = short_prompt ? example(num_words, 6, 1) : example(num_words, task_.freq_cw, task_.freq_ucw);
    const std::string shot = format_ruler_template(template_, {{"context", shot_context}}) + " " + numbered(shot_answer);
    return {shot + "\n" + format_ruler_template(template_, {{"context", context}}), answer, 0};
  }

  std::vector<RulerRecord> samples(int64_t num_samples) {
    const int64_t budget = ruler_template(RulerFamily::kCommonWords).tokens_to_generate;
    const int64_t incremental = 10;
    const double per_word = static_cast<double>(inputs_.count_tokens(generate(4096).prompt)) / 4096.0;
    const auto estimate = static_cast<int64_t>(python_floor_divide(static_cast<double>(max_length_), per_word)) * 2;
    const RulerSizing sizing{incremental, std::max(estimate, incremental * 2), max_length_, budget, 0, task_.name};
    std::vector<RulerRecord> records;
    for (RulerDraw& d : ruler_sized_samples(
             num_samples, sizing, inputs_.count_tokens,
             [&](int64_t n) { return generate(static_cast<size_t>(n)).prompt; },
             [&](int64_t, int64_t n) { return generate(static_cast<size_t>(n)); })) {
      records.push_back(split_ruler_prompt(RulerFamily::kCommonWords, d.prompt, static_cast<int64_t>(records.size()),
                                           d.outputs, d.length));
    }
    return records;
  }

 private:
  const RulerTask& task_;
  int64_t max_length_;
  RulerInputs& inputs_;
  PythonRandom rng_;
  std::string template_;
  std::vector<std::string> pool_;  // sorted(set(nouns + adjs + verbs)), shuffled by Random(seed)
};

}  // namespace

std::vector<RulerRecord> generate_common_words(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                               RulerInputs& inputs) {
  return CommonWordsGenerator(task, max_length, inputs).samples(num_samples);
}

}  // namespace sb
