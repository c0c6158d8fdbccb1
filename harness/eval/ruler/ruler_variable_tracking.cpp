// RULER's variable tracking (scripts/data/synthetic/variable_tracking.py): a chain of
// assignments "VAR B = VAR A " hidden among noise lines, one value to trace back; every
// prompt opens with a one-shot example whose names and value are redrawn per sample.
#include <algorithm>

#include "harness/eval/longbench/python_text.h"
#include "harness/eval/ruler/python_random.h"
#include "harness/eval/ruler/ruler_generators.h"
#include "harness/eval/ruler/ruler_size_search.h"

namespace sb {
namespace {


class VariableTrackingGenerator {
 public:
  VariableTrackingGenerator(const RulerTask& task, int64_t max_length, RulerInputs& inputs)
      : task_(task), max_length_(max_length), inputs_(inputs), rng_(inputs.seed), np_(static_cast<uint32_t>(inputs.seed)) {
    template_ = ruler_full_template(RulerFamily::kVariableTracking);
  }

  std::string random_letters(size_t k) {
    std::string out;
    for (size_t i : rng_.choices(26, k)) out.push_back(static_cast<char>('A' + i));
    return out;
  }

  // generate_chains: names (3 letters for the example, 5 otherwise), redrawn until
  // distinct; chain c = "VAR n0 = value", then "VAR n(j+1) = VAR nj " per hop.
  std::pair<std::vector<std::vector<std::string>>, std::vector<std::vector<std::string>>> chains(bool is_icl) {
    const size_t k = is_icl ? 3 : 5;
    const int64_t hops = is_icl ? std::min<int64_t>(10, task_.num_hops) : task_.num_hops;
    const size_t width = static_cast<size_t>(hops + 1);
    std::vector<std::string> names;
    for (size_t i = 0; i < width * static_cast<size_t>(task_.num_chains); ++i) names.push_back(random_letters(k));
    const auto distinct = [&] {
      std::vector<std::string> sorted = names;
      std::sort(sorted.begin(), sorted.end());
      return static_cast<size_t>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
    };
    while (distinct() < width * static_cast<size_t>(task_.num_chains)) names.push_back(random_letters(k));
    std::vector<std::vector<std::string>> vars, lines;
    for (size_t i = 0; i < names.size(); i += width) {
      vars.emplace_back(names.begin() + static_cast<std::ptrdiff_t>(i),
                        names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), i + width)));
      const std::string value = is_icl ? "12345" : std::to_string(np_.randint(10000, 99999));
      lines.push_back({"VAR " + vars.back()[0] + " = " + value});
      // A partial last group (names appended after a duplicate) raises IndexError in RULER.
      if (vars.back().size() < width) throw RulerRetry("variable names ran short");
      for (int64_t j = 0; j < hops; ++j) {
        lines.back().push_back("VAR " + vars.back()[static_cast<size_t>(j) + 1] + " = VAR " + vars.back()[static_cast<size_t>(j)] + " ");
      }
    }
    return {vars, lines};
  }

  // generate_input_output on the noise haystack.
  RulerDraw generate(int64_t num_noises, bool is_icl) {
    auto [vars, lines] = chains(is_icl);
    std::string value = lines[0][0].substr(lines[0][0].rfind('=') + 1);
    value = u32_to_utf8(python_strip(utf8_to_u32(value)));
    std::vector<std::string> sentences(static_cast<size_t>(num_noises), kRulerNoiseLine);
    for (const auto& chain : lines) {
      if (chain.size() > sentences.size()) throw RulerRetry("more chain lines than noise lines");
      std::vector<size_t> at = rng_.sample(sentences.size(), chain.size());
      std::sort(at.begin(), at.end());
      for (size_t j = 0; j < chain.size(); ++j) {
        sentences.insert(sentences.begin() + static_cast<std::ptrdiff_t>(at[j] + j), chain[j]);
      }
    }
    std::string context;
    for (size_t i = 0; i < sentences.size(); ++i) context += (i ? "\n" : "") + sentences[i];
    context = python_replace(context, ". \n", ".\n");
    const int64_t hops = is_icl ? std::min<int64_t>(10, task_.num_hops) : task_.num_hops;
    return {format_ruler_template(template_, {{"context", context}, {"query", value}, {"num_v", std::to_string(hops + 1)}}),
            vars[0], 0};
  }

  // randomize_icl: the example's answer names (its last num_hops + 1 words) and its value
  // 12345 replaced by fresh ones, every occurrence.
  std::string randomized(std::string example) {
    std::vector<std::u32string> words = python_split_whitespace(utf8_to_u32(example));
    const size_t take = std::min(words.size(), static_cast<size_t>(task_.num_hops + 1));
    for (size_t w = words.size() - take; w < words.size(); ++w) {
      const std::string item = u32_to_utf8(words[w]);
      example = python_replace(example, item, random_letters(words[w].size()));
    }
    return python_replace(example, "12345", std::to_string(np_.randint(10000, 99999)));
  }

  // sys_vartrack_w_noise_random: the example run (icl empty: 500 tokens, no budget) or the
  // task's run with the example.
  std::vector<RulerRecord> run(int64_t num_samples, int64_t max_length, const std::string& icl) {
    const bool with_icl = !icl.empty();
    const int64_t budget = with_icl ? ruler_template(RulerFamily::kVariableTracking).tokens_to_generate : 0;
    int64_t incremental = with_icl ? (max_length_ < 4096 ? 5 : 10) : 5;
    const int64_t example_tokens = with_icl ? inputs_.count_tokens(icl) : 0;
    const bool is_icl = !with_icl;
    const int64_t upper = ruler_search_upper(max_length, inputs_.count_tokens(generate(incremental, is_icl).prompt), incremental);
    const RulerSizing sizing{incremental, upper, max_length, budget, example_tokens, task_.name};
    const auto draw = [&](int64_t, int64_t n) {
      RulerDraw d = generate(n, is_icl);
      if (with_icl) {
        const size_t cutoff = d.prompt.find(template_.substr(0, 20));
        d.prompt = d.prompt.substr(0, cutoff) + randomized(icl) + "\n" + d.prompt.substr(cutoff);
      }
      return d;
    };
    std::vector<RulerRecord> records;
    for (RulerDraw& d : ruler_sized_samples(num_samples, sizing, inputs_.count_tokens,
                                            [&](int64_t n) { return generate(n, is_icl).prompt; }, draw)) {
      const auto index = static_cast<int64_t>(records.size());
      if (with_icl) {
        records.push_back(split_ruler_prompt(RulerFamily::kVariableTracking, d.prompt, index, d.outputs, d.length));
      } else {
        RulerRecord r;  // the example keeps its answer prefix
        r.index = index;
        r.input = d.prompt;
        r.outputs = d.outputs;
        r.length = d.length;
        records.push_back(std::move(r));
      }
    }
    return records;
  }

 private:
  const RulerTask& task_;
  int64_t max_length_;
  RulerInputs& inputs_;
  PythonRandom rng_;
  NumpyLegacyRandom np_;
  std::string template_;
};

}  // namespace

std::vector<RulerRecord> generate_variable_tracking(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                                    RulerInputs& inputs) {
  VariableTrackingGenerator generator(task, max_length, inputs);
  const RulerRecord example = generator.run(1, 500, "").front();
  std::string icl = example.input + " ";
  for (size_t i = 0; i < example.outputs.size(); ++i) icl += (i ? " " : "") + example.outputs[i];
  icl += "\n";
  return generator.run(num_samples, max_length, icl);
}

}  // namespace sb
