#include "harness/eval/zeroshot/zeroshot_tasks.h"

#include <algorithm>

#include "common/errors.h"
#include "harness/eval/longbench/python_text.h"

namespace sb {
namespace {

using nlohmann::ordered_json;

const ordered_json& field(const ordered_json& row, const std::string& key, const std::string& where) {
  if (!row.is_object()) throw ConfigError(where, "$", "expected a JSON object (one row of the data set)");
  const auto it = row.find(key);
  if (it == row.end()) {
    throw ConfigError(where, "$." + key, "is missing", "give the rows in the Hugging Face dataset's own columns");
  }
  return *it;
}

std::string text_field(const ordered_json& row, const std::string& key, const std::string& where) {
  const ordered_json& v = field(row, key, where);
  if (!v.is_string()) throw ConfigError(where, "$." + key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

std::u32string code_points(const std::string& text, const std::string& where, const std::string& key) {
  try {
    return utf8_to_u32(text, key);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(where, "$." + key, e.what());
  }
}

int64_t checked_gold(int64_t gold, size_t choices, const std::string& where, const std::string& key) {
  if (gold < 0 || gold >= static_cast<int64_t>(choices)) {
    throw ConfigError(where, "$." + key,
                      "names answer " + std::to_string(gold) + " of " + std::to_string(choices) + " choices");
  }
  return gold;
}

int64_t integer_label(const ordered_json& row, const std::string& key, const std::string& where, size_t choices) {
  const ordered_json& v = field(row, key, where);
  if (!v.is_number_integer()) throw ConfigError(where, "$." + key, "expected an integer label, got " + v.dump());
  return checked_gold(v.get<int64_t>(), choices, where, key);
}

std::vector<std::string> string_list(const ordered_json& v, const std::string& where, const std::string& path) {
  if (!v.is_array() || v.empty()) throw ConfigError(where, path, "expected a non-empty array of strings");
  std::vector<std::string> out;
  for (const auto& item : v) {
    if (!item.is_string()) throw ConfigError(where, path, "expected strings, got " + item.dump());
    out.push_back(item.get<std::string>());
  }
  return out;
}

// One context, each choice as the continuation (lm-eval's target_delimiter " ").
ZeroShotDoc choices_as_continuations(const std::string& context, std::vector<std::string> choices, int64_t gold) {
  ZeroShotDoc doc;
  for (const std::string& choice : choices) doc.requests.push_back({context, " " + choice});
  doc.choices = std::move(choices);
  doc.gold = gold;
  doc.target = gold;
  return doc;
}

// ARC and OpenBookQA: choices {"text": [...], "label": [...]}; the gold index is the
// position of answerKey (OpenBookQA: with leading whitespace stripped) among the labels.
ZeroShotDoc labelled_choices(const ordered_json& row, const std::string& where, const std::string& context,
                             bool lstrip_key) {
  const ordered_json& choices = field(row, "choices", where);
  if (!choices.is_object()) throw ConfigError(where, "$.choices", "expected {\"text\": [...], \"label\": [...]}");
  const std::vector<std::string> text = string_list(field(choices, "text", where), where, "$.choices.text");
  const std::vector<std::string> labels = string_list(field(choices, "label", where), where, "$.choices.label");
  if (labels.size() != text.size()) throw ConfigError(where, "$.choices", "has as many labels as texts");
  std::string key = text_field(row, "answerKey", where);
  if (lstrip_key) {
    const std::u32string cps = code_points(key, where, "answerKey");
    size_t i = 0;
    while (i < cps.size() && is_python_space(cps[i])) ++i;
    key = u32_to_utf8(cps.substr(i));
  }
  const auto it = std::find(labels.begin(), labels.end(), key);
  if (it == labels.end()) throw ConfigError(where, "$.answerKey", "\"" + key + "\" is not one of the choice labels");
  return choices_as_continuations(context, text, it - labels.begin());
}

ZeroShotDoc arc_doc(const ordered_json& row, const std::string& where) {
  return labelled_choices(row, where, "Question: " + text_field(row, "question", where) + "\nAnswer:", false);
}

ZeroShotDoc openbookqa_doc(const ordered_json& row, const std::string& where) {
  return labelled_choices(row, where, text_field(row, "question_stem", where), true);
}

ZeroShotDoc boolq_doc(const ordered_json& row, const std::string& where) {
  const std::string context = text_field(row, "passage", where) + "\nQuestion: " + text_field(row, "question", where) +
                              "?\nAnswer:";
  return choices_as_continuations(context, {"no", "yes"}, integer_label(row, "label", where, 2));
}

ZeroShotDoc piqa_doc(const ordered_json& row, const std::string& where) {
  const std::string context = "Question: " + text_field(row, "goal", where) + "\nAnswer:";
  return choices_as_continuations(context, {text_field(row, "sol1", where), text_field(row, "sol2", where)},
                                  integer_label(row, "label", where, 2));
}

ZeroShotDoc hellaswag_doc(const ordered_json& row, const std::string& where) {
  // process_docs: ctx = ctx_a + " " + ctx_b.capitalize(); the query is
  // preprocess(activity_label + ": " + ctx), the choices preprocess(ending).
  const std::string ctx_b = u32_to_utf8(python_capitalize(code_points(text_field(row, "ctx_b", where), where, "ctx_b")));
  const std::string ctx = text_field(row, "ctx_a", where) + " " + ctx_b;
  const std::string query = hellaswag_preprocess(text_field(row, "activity_label", where) + ": " + ctx);
  std::vector<std::string> choices;
  for (const std::string& ending : string_list(field(row, "endings", where), where, "$.endings")) {
    choices.push_back(hellaswag_preprocess(ending));
  }
  // int(doc["label"]): the published label is a string of digits.
  const ordered_json& label = field(row, "label", where);
  int64_t gold = -1;
  if (label.is_number_integer()) {
    gold = label.get<int64_t>();
  } else if (const std::string* digits = label.get_ptr<const std::string*>();
             digits != nullptr && !digits->empty() && digits->size() < 10 &&
             std::all_of(digits->begin(), digits->end(), [](char c) { return c >= '0' && c <= '9'; })) {
    gold = std::stoll(*digits);
  } else {
    throw ConfigError(where, "$.label", "expected the gold ending's index (\"0\"-\"3\"), got " + label.dump(),
                      "score the validation split: the test split has no labels");
  }
  const size_t n = choices.size();
  return choices_as_continuations(query, std::move(choices), checked_gold(gold, n, where, "label"));
}

ZeroShotDoc winogrande_doc(const ordered_json& row, const std::string& where) {
  // preprocess_winogrande.py: the blank "_" splits the sentence; each option filled in
  // before it is a context, and the rest after it (stripped) is the one continuation.
  const std::string sentence = text_field(row, "sentence", where);
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) throw ConfigError(where, "$.sentence", "has no blank \"_\"");
  const std::string rest =
      u32_to_utf8(python_strip(code_points(sentence.substr(blank + 1), where, "sentence")));
  const std::string answer = text_field(row, "answer", where);
  if (answer != "1" && answer != "2") throw ConfigError(where, "$.answer", "expected \"1\" or \"2\", got \"" + answer + "\"");
  ZeroShotDoc doc;
  for (const char* key : {"option1", "option2"}) {
    doc.choices.push_back(sentence.substr(0, blank) + text_field(row, key, where));
    doc.requests.push_back({doc.choices.back(), " " + rest});
  }
  doc.gold = answer == "1" ? 0 : 1;
  doc.target = rest;
  return doc;
}

}  // namespace

std::string hellaswag_preprocess(const std::string& raw) {
  const std::string titled =
      python_replace(u32_to_utf8(python_strip(utf8_to_u32(raw, "HellaSwag text"))), " [title]", ". ");
  // re.sub("\[.*?\]", "", text): at each "[", the nearest "]" with no newline between
  // ("." matches anything but "\n"); a "[" without one stays. Both brackets and the
  // newline are ASCII, so scanning UTF-8 bytes is scanning characters.
  std::string unbracketed;
  for (size_t i = 0; i < titled.size();) {
    if (titled[i] == '[') {
      const size_t close = titled.find_first_of("]\n", i + 1);
      if (close != std::string::npos && titled[close] == ']') {
        i = close + 1;
        continue;
      }
    }
    unbracketed += titled[i++];
  }
  return python_replace(unbracketed, "  ", " ");
}

const std::vector<ZeroShotTask>& zeroshot_tasks() {
  static const std::vector<ZeroShotTask> tasks = {
      {"arc_easy", "allenai/ai2_arc ARC-Easy", "test", 1.0, true, arc_doc},
      {"arc_challenge", "allenai/ai2_arc ARC-Challenge", "test", 1.0, true, arc_doc},
      {"boolq", "aps/super_glue boolq", "validation", 2.0, false, boolq_doc},
      {"hellaswag", "Rowan/hellaswag", "validation", 1.0, true, hellaswag_doc},
      {"piqa", "baber/piqa", "validation", 1.0, true, piqa_doc},
      {"winogrande", "allenai/winogrande winogrande_xl", "validation", 1.0, false, winogrande_doc},
      {"openbookqa", "allenai/openbookqa main", "test", 1.0, true, openbookqa_doc},
  };
  return tasks;
}

const ZeroShotTask& zeroshot_task(const std::string& name, const std::string& what) {
  std::string known;
  for (const ZeroShotTask& task : zeroshot_tasks()) {
    if (task.name == name) return task;
    known += (known.empty() ? "" : ", ") + task.name;
  }
  throw ConfigError(what, "", "unknown zero-shot task \"" + name + "\"", "use one of " + known);
}

}  // namespace sb
