#pragma once
// RULER's synthetic tasks as its own code defines them (NVIDIA/RULER scripts/synthetic.yaml,
// scripts/data/synthetic/constants.py; docs/ruler.md): the 13 tasks of the default
// benchmark, each a generator family with its arguments, and each family's prompt
// template, answer prefix and generation budget. Prompts use RULER's `base` model
// template: the task template followed by the answer prefix, no chat wrapper.

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sb {

enum class RulerFamily { kNiah, kVariableTracking, kCommonWords, kFreqWords, kQa };

struct RulerTemplate {
  std::string text;           // with {context}, {query}, ... fields
  std::string answer_prefix;  // appended to the text; the model continues after it
  int64_t tokens_to_generate = 0;
};

struct RulerTask {
  std::string name;
  RulerFamily family = RulerFamily::kNiah;
  // niah: haystack "noise" | "essay" | "needle"; keys and values "words" | "numbers" | "uuids"
  std::string haystack, needle_k, needle_v;
  int64_t num_needle_k = 1, num_needle_v = 1, num_needle_q = 1;
  // variable tracking
  int64_t num_chains = 1, num_hops = 4;
  // common words: repeats of the common and uncommon words, common words asked for
  int64_t freq_cw = 30, freq_ucw = 3, num_cw = 10;
  // frequent words: Zipf exponent
  double alpha = 2.0;
  // qa: "squad" | "hotpotqa"
  std::string dataset;
};

const RulerTemplate& ruler_template(RulerFamily family);
// The base model's whole prompt template: the family's template, then its answer prefix.
std::string ruler_full_template(RulerFamily family);
// The noise haystack's line (niah's "noise", variable tracking's filler).
extern const char* const kRulerNoiseLine;
// The 13 tasks in RULER's order: niah_single_1..3, niah_multikey_1..3, niah_multivalue,
// niah_multiquery, vt, cwe, fwe, qa_1, qa_2.
const std::vector<RulerTask>& ruler_tasks();
// ConfigError naming `what` and the known names for another name.
const RulerTask& ruler_task(const std::string& name, const std::string& what);
// qa scores with string_match_part, every other family with string_match_all.
bool ruler_scores_any_reference(RulerFamily family);

// Python's str.format for the named fields of a template: each "{name}" in `text` is
// replaced by fields.at(name); the values are inserted as they are. std::invalid_argument
// for a field the map lacks.
std::string format_ruler_template(const std::string& text, const std::map<std::string, std::string>& fields);

// One generated sample as RULER writes it to <task>/validation.jsonl.
struct RulerRecord {
  int64_t index = 0;                 // the sample's number
  std::string input;                 // the prompt before the answer prefix
  std::vector<std::string> outputs;  // the references
  int64_t length = 0;                // prompt tokens (answer prefix included) + tokens_to_generate
  std::string answer_prefix;
  std::optional<int64_t> token_position_answer;  // niah: tokens before the first answer
};
// {index, input, outputs, length, length_w_model_temp, answer_prefix[, token_position_answer]}
nlohmann::ordered_json ruler_record_json(const RulerRecord& record);
// The inverse; ConfigError naming `where` for a line that is not one.
RulerRecord ruler_record_from_json(const nlohmann::ordered_json& line, const std::string& where);

}  // namespace sb
