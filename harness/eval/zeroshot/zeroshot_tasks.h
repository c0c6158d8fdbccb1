#pragma once
// The zero-shot multiple-choice tasks as lm-evaluation-harness 0.4.13 defines them
// (lm_eval/tasks/<task>/*.yaml and their utils.py): which split is scored, the prompt
// (doc_to_text), the choices (doc_to_choice), the gold index (doc_to_target), the
// metrics and the task version. docs/zeroshot.md lists every rule.
//
// A document becomes one loglikelihood request (context, continuation) per choice, as
// lm-eval's ConfigurableTask.construct_requests builds them with target_delimiter " ":
//   one context:    (doc_to_text, " " + choice) for each choice (ARC, BoolQ, ...)
//   many contexts:  (choice context, " " + doc_to_target) for each choice (WinoGrande's
//                   partial scoring: the sentence up to the blank with each option
//                   filled in, scored on the same rest of the sentence)

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace sb {

struct ZeroShotRequest {
  std::string context;
  std::string continuation;
};

struct ZeroShotDoc {
  std::vector<ZeroShotRequest> requests;  // one per choice, in choice order
  // doc_to_choice's strings: acc_norm divides each loglikelihood by its length in
  // characters (code points), as lm-eval's process_results does.
  std::vector<std::string> choices;
  int64_t gold = 0;  // index into choices
  // doc_to_target as lm-eval logs it in a sample's "target": the gold index, or for
  // WinoGrande the scored rest of the sentence.
  nlohmann::ordered_json target;
};

struct ZeroShotTask {
  std::string name;          // lm-eval's task name (arc_easy, ...)
  std::string dataset;       // the Hugging Face dataset lm-eval loads (path/name)
  std::string split;         // the split lm-eval scores: test when the task has one
  double version = 1.0;      // metadata.version
  bool has_acc_norm = false; // acc_norm in metric_list (acc always is)
  // Builds the requests of one document (a row of the split in the dataset's own
  // columns). ConfigError naming `where` (file:line) and the JSON path for a row that
  // lacks a column, has a wrong type, or whose answer is not one of its choices.
  ZeroShotDoc (*make_doc)(const nlohmann::ordered_json& row, const std::string& where);
};

// Every task, in the order of the paper's zero-shot table: arc_easy, arc_challenge,
// boolq, hellaswag, piqa, winogrande, openbookqa.
const std::vector<ZeroShotTask>& zeroshot_tasks();

// ConfigError naming `what` (a flag or JSON path) and the known names for another name.
const ZeroShotTask& zeroshot_task(const std::string& name, const std::string& what);

// HellaSwag's text cleaning (lm_eval/tasks/hellaswag/utils.py preprocess): strip, " [title]"
// -> ". ", every "[...]" on one line removed (the shortest match, as re's "\[.*?\]"), then
// each "  " -> " " (one left-to-right pass, as str.replace).
std::string hellaswag_preprocess(const std::string& text);

}  // namespace sb
