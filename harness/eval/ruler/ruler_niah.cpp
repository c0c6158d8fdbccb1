// RULER's needle-in-a-haystack family (scripts/data/synthetic/niah.py): needles
// "One of the special magic {type_needle_v} for {key} is: {value}." hidden in a noise,
// essay or needle haystack; the question asks for the values of one or more keys.
#include <algorithm>
#include <cstdint>

#include "common/errors.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/ruler/python_random.h"
#include "harness/eval/ruler/ruler_generators.h"
#include "harness/eval/ruler/ruler_size_search.h"

namespace sb {
namespace {

constexpr const char* kNeedle = "One of the special magic {type_needle_v} for {key} is: {value}.";
// list(np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int))
constexpr int64_t kDepths[40] = {0,  3,  5,  8,  10, 13, 15, 18, 21, 23, 26, 28, 31, 33, 36, 38, 41, 44, 46, 49,
                                 51, 54, 56, 59, 62, 64, 67, 69, 72, 74, 77, 79, 82, 85, 87, 90, 92, 95, 97, 100};

std::string join(const std::vector<std::string>& parts, const std::string& separator, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) out += separator;
    out += parts[i];
  }
  return out;
}

class NiahGenerator {
 public:
  NiahGenerator(const RulerTask& task, int64_t max_length, RulerInputs& inputs)
      : task_(task), max_length_(max_length), inputs_(inputs), rng_(inputs.seed) {
    template_ = ruler_full_template(RulerFamily::kNiah);
    type_v_ = task.needle_v;
    if (task.num_needle_q * task.num_needle_v == 1) {  // one value asked for: singular wording
      for (const auto& [from, to] : {std::pair<const char*, const char*>{"Some", "A"}, {"are all", "is"}, {"are", "is"},
                                     {"answers", "answer"}}) {
        template_ = python_replace(template_, from, to);
      }
      type_v_.pop_back();  // "numbers" -> "number"
    }
  }

  std::string random_value(const std::string& type) {
    if (type == "numbers") return std::to_string(rng_.randint(1000000, 9999999));
    if (type == "words") {
      const RulerWordPairs& words = inputs_.word_pairs();
      return words.at(rng_.randbelow(words.size()));
    }
    return python_uuid4_string(rng_);  // "uuids"
  }

  std::string needle(const std::string& key, const std::string& value) const {
    return format_ruler_template(kNeedle, {{"type_needle_v", task_.needle_v}, {"key", key}, {"value", value}});
  }

  // niah.py generate_input_output: the prompt (answer prefix included) and the answers.
  RulerDraw generate(int64_t num_haystack) {
    std::vector<std::string> keys, needles;
    std::vector<std::vector<std::string>> values;
    for (int64_t k = 0; k < task_.num_needle_k; ++k) {
      keys.push_back(random_value(task_.needle_k));
      values.emplace_back();
      for (int64_t v = 0; v < task_.num_needle_v; ++v) {
        values.back().push_back(random_value(task_.needle_v));
        needles.push_back(needle(keys.back(), values.back().back()));
      }
    }
    PythonRandom(inputs_.seed).shuffle(needles);  // a fresh Random(seed) per call

    std::string context;
    if (task_.haystack == "essay") {
      const std::vector<std::string>& words = inputs_.essay_words;
      std::vector<std::string> taken;
      for (int64_t i = 0; i < num_haystack; ++i) taken.push_back(words[static_cast<size_t>(i) % words.size()]);
      const std::vector<std::string> sentences = ruler_sentences(join(taken, " ", 0, taken.size()));
      if (needles.size() > 40) throw RulerRetry("more needles than depths");
      std::vector<int64_t> positions;
      for (size_t d : rng_.sample(40, needles.size())) {
        positions.push_back(static_cast<int64_t>(static_cast<double>(sentences.size()) *
                                                 (static_cast<double>(kDepths[d]) / 100.0)));
      }
      std::sort(positions.begin(), positions.end());
      positions.insert(positions.begin(), 0);
      positions.push_back(static_cast<int64_t>(sentences.size()));
      std::vector<std::string> parts;
      for (size_t i = 1; i < positions.size(); ++i) {
        parts.push_back(join(sentences, " ", positions[i - 1], positions[i]));
        if (i - 1 < needles.size()) parts.push_back(needles[i - 1]);
      }
      context = join(parts, " ", 0, parts.size());
    } else {
      std::vector<std::string> lines;
      for (int64_t i = 0; i < num_haystack; ++i) {
        if (task_.haystack == "noise") {
          lines.push_back(kRulerNoiseLine);
        } else {  // "needle": distractors, key drawn before value
          std::string key = random_value(task_.needle_k);
          lines.push_back(needle(key, random_value(task_.needle_v)));
        }
      }
      if (needles.size() > lines.size()) throw RulerRetry("more needles than haystack lines");
      std::vector<size_t> at = rng_.sample(lines.size(), needles.size());
      std::sort(at.rbegin(), at.rend());  // descending: the first needle goes furthest
      for (size_t i = 0; i < at.size(); ++i) lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at[i]), needles[i]);
      context = join(lines, "\n", 0, lines.size());
    }

    std::vector<std::string> queries, answers;
    for (size_t i : rng_.sample(static_cast<size_t>(task_.num_needle_k), static_cast<size_t>(task_.num_needle_q))) {
      queries.push_back(keys[i]);
      answers.insert(answers.end(), values[i].begin(), values[i].end());
    }
    const std::string query =
        queries.size() > 1 ? join(queries, ", ", 0, queries.size() - 1) + ", and " + queries.back() : queries[0];
    return {format_ruler_template(template_, {{"type_needle_v", type_v_}, {"context", context}, {"query", query}}),
            answers, 0};
  }

  std::vector<RulerRecord> samples(int64_t num_samples) {
    const int64_t budget = ruler_template(RulerFamily::kNiah).tokens_to_generate;
    int64_t incremental = task_.haystack == "essay" ? 500 : 25;
    if (task_.haystack != "essay" && max_length_ < 4096) incremental = 5;
    const int64_t upper = ruler_search_upper(max_length_, inputs_.count_tokens(generate(incremental).prompt), incremental);
    const RulerSizing sizing{incremental, upper, max_length_, budget, 0, task_.name};
    std::vector<RulerRecord> records;
    for (RulerDraw& d : ruler_sized_samples(
             num_samples, sizing, inputs_.count_tokens, [&](int64_t n) { return generate(n).prompt; },
             [&](int64_t, int64_t n) { return generate(n); })) {
      RulerRecord record =
          split_ruler_prompt(RulerFamily::kNiah, d.prompt, static_cast<int64_t>(records.size()), d.outputs, d.length);
      // Tokens before the first answer (input[:input.find(answer)]; Python's -1 when
      // absent drops the last character).
      const size_t at = record.input.find(record.outputs[0]);
      std::string before = record.input;
      if (at != std::string::npos) {
        before.resize(at);
      } else if (!before.empty()) {
        std::u32string cps = utf8_to_u32(before, "prompt");
        cps.pop_back();
        before = u32_to_utf8(cps);
      }
      record.token_position_answer = inputs_.count_tokens(before);
      records.push_back(std::move(record));
    }
    return records;
  }

 private:
  const RulerTask& task_;
  int64_t max_length_;
  RulerInputs& inputs_;
  PythonRandom rng_;
  std::string template_, type_v_;
};

}  // namespace

std::vector<RulerRecord> generate_niah(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                       RulerInputs& inputs) {
  if (task.haystack == "essay" && (inputs.essay_words.empty() || inputs.essay_words == std::vector<std::string>{""})) {
    throw ConfigError("--haystack", "", "has no words, and " + task.name + " needs an essay haystack",
                      "give a text file, RULER's PaulGrahamEssays.json, or synthetic");
  }
  return NiahGenerator(task, max_length, inputs).samples(num_samples);
}

}  // namespace sb
