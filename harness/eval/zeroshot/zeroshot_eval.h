#pragma once
// Zero-shot multiple choice as lm-evaluation-harness scores it (zeroshot_tasks.h for the
// tasks, continuation_loglikelihood.h for the scoring), on local copies of the tasks'
// data, written in lm-eval's output layout. docs/zeroshot.md.
//
// Per document: acc = 1 when the choice with the highest loglikelihood is the gold one;
// acc_norm the same after dividing each loglikelihood by its choice's length in
// characters (ties: the first choice). Per task: the means, and their standard errors
// sample_stddev / sqrt(n) ("N/A" for one document), as lm-eval reports them.
//
// Outputs under out_dir:
//   samples_<task>.jsonl  one line per document (doc_id, doc, target, arguments, resps,
//                         filtered_resps, acc, acc_norm, ...), appended as scored: a
//                         rerun resumes after the last complete line
//   results.json          lm-eval's results layout ("results", "versions", "n-shot",
//                         "n-samples", "higher_is_better", "configs", "config") plus
//                         "sparsebalance": the averages and the run's context
// The returned object is results.json's content.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "harness/eval/model_folder.h"

namespace sb {

struct ZeroShotOptions {
  // <task>.jsonl (or <task>.json, one array) per task: the scored split's rows in the
  // Hugging Face dataset's columns (scripts/data/convert_zeroshot.py writes them).
  std::filesystem::path data_dir;
  std::vector<std::string> tasks;  // empty: every task of zeroshot_tasks()
  int64_t limit = 0;               // only the first N documents of each task (0: all)
  // 0: one document at a time, its choices sharing their prefix in a KV cache; N > 0:
  // documents packed into batches of up to N input tokens (no shared prefix), fewer and
  // larger forwards for a GPU. The scores agree to float rounding either way.
  int64_t batch_tokens = 0;
  std::filesystem::path out_dir;
  std::string model_args;          // how the model was loaded, for results.json's config
};

// lm-eval's predictions: the first choice with the largest log-likelihood (acc), or with
// the largest log-likelihood per character of the choice (acc_norm; code points, not
// bytes: lm-eval's byte variant is acc_bytes).
size_t zeroshot_choice(const std::vector<double>& loglikelihoods);
size_t zeroshot_choice_normalized(const std::vector<double>& loglikelihoods, const std::vector<std::string>& choices);

// The task names a run scores: options.tasks, or all of them.
std::vector<std::string> zeroshot_task_names(const ZeroShotOptions& options);

// The paper's average over the tasks run: acc_norm where the task reports it, acc where
// it does not (BoolQ, WinoGrande) [our rule, docs/zeroshot.md].
extern const char* const kZeroShotAverageRule;

nlohmann::ordered_json run_zeroshot(ModelFolder& model, const ZeroShotOptions& options, std::ostream& progress);

}  // namespace sb
