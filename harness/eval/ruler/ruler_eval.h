#pragma once
// RULER's synthetic benchmark end to end (docs/ruler.md): per length, each task's samples
// generated natively (ruler_generators.h) into RULER's data layout, predicted greedily
// by the model, scored as RULER scores them (ruler_score.h).
//
// Outputs under out_dir, RULER's layout per length L:
//   <L>/data/<task>/validation.jsonl  the samples (reused when complete and drawn with the
//                                     same settings, recorded in generation.json beside
//                                     them; other settings are a ConfigError)
//   <L>/pred/<task>.jsonl             predictions, appended as made (a rerun resumes)
//   <L>/pred/summary.csv              evaluate.py's table
//   ruler.json                        scores[task][L], the mean over the tasks per L
//                                     (RULER's own code computes no average), the options
//                                     and the run's context

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "harness/eval/model_folder.h"

namespace sb {

struct RulerOptions {
  std::vector<int64_t> lengths = {4096};
  int64_t samples = 500;
  std::vector<std::string> tasks;       // empty: every task whose inputs were given (qa_1, qa_2 need their files)
  std::string haystack = "synthetic";   // essay text: "synthetic", a text file or PaulGrahamEssays.json
  std::filesystem::path squad, hotpotqa;
  std::filesystem::path cwe_words;      // RULER's english_words.json (cwe past wonderwords' pool)
  std::string words_dir;                // wonderwords' assets; empty: located
  uint64_t seed = 42;
  bool prepare_only = false;            // write the samples, predict nothing
  std::filesystem::path out_dir;
};

// The tasks a run covers: options.tasks, or all but the QA tasks whose file is missing.
std::vector<std::string> ruler_task_names(const RulerOptions& options);

nlohmann::ordered_json run_ruler(ModelFolder& model, const RulerOptions& options, std::ostream& progress);

}  // namespace sb
