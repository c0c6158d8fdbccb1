#include "harness/eval/ruler/ruler_tasks.h"

#include <stdexcept>

#include "common/errors.h"

namespace sb {

const RulerTemplate& ruler_template(RulerFamily family) {
  static const RulerTemplate niah{
      "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. I will "
      "quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic {type_needle_v} for "
      "{query} mentioned in the provided text?",
      " The special magic {type_needle_v} for {query} mentioned in the provided text are", 128};
  static const RulerTemplate variable_tracking{
      "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\nQuestion: "
      "Find all variables that are assigned the value {query} in the text above.",
      " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are assigned "
      "the value {query}, they are: ",
      30};
  static const RulerTemplate common_words{
      "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
      "appear most often.\n{context}\nQuestion: What are the 10 most common words in the above list?",
      " Answer: The top 10 words that appear most often in the list are:", 120};
  static const RulerTemplate freq_words{
      "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
      "appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. "
      "What are the three most frequently appeared words in the above coded text?",
      " Answer: According to the coded text above, the three most frequently appeared words are:", 50};
  static const RulerTemplate qa{
      "Answer the question based on the given documents. Only give me the answer and do not output any other "
      "words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the given "
      "documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}",
      " Answer:", 32};
  switch (family) {
    case RulerFamily::kNiah: return niah;
    case RulerFamily::kVariableTracking: return variable_tracking;
    case RulerFamily::kCommonWords: return common_words;
    case RulerFamily::kFreqWords: return freq_words;
    case RulerFamily::kQa: return qa;
  }
  throw std::logic_error("ruler_template: unknown family");
}

std::string ruler_full_template(RulerFamily family) {
  const RulerTemplate& t = ruler_template(family);
  return t.text + t.answer_prefix;
}

const char* const kRulerNoiseLine =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

namespace {

RulerTask niah(const char* name, const char* haystack, const char* key, const char* value, int64_t k, int64_t v,
               int64_t q) {
  RulerTask t;
  t.name = name;
  t.family = RulerFamily::kNiah;
  t.haystack = haystack;
  t.needle_k = key;
  t.needle_v = value;
  t.num_needle_k = k;
  t.num_needle_v = v;
  t.num_needle_q = q;
  return t;
}

RulerTask of_family(const char* name, RulerFamily family, const char* dataset = "") {
  RulerTask t;
  t.name = name;
  t.family = family;
  t.dataset = dataset;
  if (family == RulerFamily::kVariableTracking) t.haystack = "noise";
  return t;
}

}  // namespace

const std::vector<RulerTask>& ruler_tasks() {
  static const std::vector<RulerTask> tasks = {
      niah("niah_single_1", "noise", "words", "numbers", 1, 1, 1),
      niah("niah_single_2", "essay", "words", "numbers", 1, 1, 1),
      niah("niah_single_3", "essay", "words", "uuids", 1, 1, 1),
      niah("niah_multikey_1", "essay", "words", "numbers", 4, 1, 1),
      niah("niah_multikey_2", "needle", "words", "numbers", 1, 1, 1),
      niah("niah_multikey_3", "needle", "uuids", "uuids", 1, 1, 1),
      niah("niah_multivalue", "essay", "words", "numbers", 1, 4, 1),
      // num_needle_k = max(num_needle_k, num_needle_q), as niah.py sets it
      niah("niah_multiquery", "essay", "words", "numbers", 4, 1, 4),
      of_family("vt", RulerFamily::kVariableTracking),
      of_family("cwe", RulerFamily::kCommonWords),
      of_family("fwe", RulerFamily::kFreqWords),
      of_family("qa_1", RulerFamily::kQa, "squad"),
      of_family("qa_2", RulerFamily::kQa, "hotpotqa"),
  };
  return tasks;
}

const RulerTask& ruler_task(const std::string& name, const std::string& what) {
  std::string known;
  for (const RulerTask& task : ruler_tasks()) {
    if (task.name == name) return task;
    known += (known.empty() ? "" : ", ") + task.name;
  }
  throw ConfigError(what, "", "unknown RULER task \"" + name + "\"", "use one of " + known);
}

bool ruler_scores_any_reference(RulerFamily family) { return family == RulerFamily::kQa; }

std::string format_ruler_template(const std::string& text, const std::map<std::string, std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '{') {
      out += text[i++];
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string::npos) throw std::invalid_argument("template has an unclosed \"{\"");
    const std::string name = text.substr(i + 1, close - i - 1);
    const auto it = fields.find(name);
    if (it == fields.end()) throw std::invalid_argument("template field {" + name + "} has no value");
    out += it->second;
    i = close + 1;
  }
  return out;
}

nlohmann::ordered_json ruler_record_json(const RulerRecord& record) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["index"] = record.index;
  j["input"] = record.input;
  j["outputs"] = record.outputs;
  j["length"] = record.length;
  j["length_w_model_temp"] = record.length;  // model_template_token = 0
  j["answer_prefix"] = record.answer_prefix;
  if (record.token_position_answer) j["token_position_answer"] = *record.token_position_answer;
  return j;
}

RulerRecord ruler_record_from_json(const nlohmann::ordered_json& line, const std::string& where) {
  try {
    RulerRecord r;
    r.index = line.at("index").get<int64_t>();
    r.input = line.at("input").get<std::string>();
    r.outputs = line.at("outputs").get<std::vector<std::string>>();
    r.length = line.at("length").get<int64_t>();
    r.answer_prefix = line.at("answer_prefix").get<std::string>();
    if (line.contains("token_position_answer")) r.token_position_answer = line["token_position_answer"].get<int64_t>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(where, "", std::string("is not a RULER sample: ") + e.what(), "use a fresh output folder");
  }
}

}  // namespace sb
