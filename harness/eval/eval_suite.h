#pragma once
// Evaluates one loaded model (+ tokenizer) with an eval spec (eval_spec.h): the library
// entry point behind a manifest's `eval` block and `sparsebalance eval suite`.
//
// Outputs under out_dir: longbench/ (prediction files, result.json, summary.json),
// longbench_v2/ (longbench_v2.jsonl, longbench_v2_result.json), niah/ (niah.json,
// niah_cells.jsonl), heldout.json, zeroshot/ (samples_<task>.jsonl, results.json), ruler/
// (RULER's layout per length, ruler.json), and
// eval_columns.json (atomically), the metric columns it returns, one flat JSON object
// for report tables:
//   longbench_avg                       overall average (mean of the six categories)
//   longbench_en_avg, longbench_zh_avg  English / Chinese table averages (when present)
//   longbench_<category>                overall table, per category (single_doc_qa, ...)
//   longbench_e_avg_<bin>               LongBench-E: overall average per length bin
//   longbench_v2_<group>                overall, easy, hard, short, medium, long (percent)
//   niah_score                          mean over the grid's cells
//   heldout_nll, heldout_ppl, heldout_tokens
//   zeroshot_avg                        zero-shot average: acc_norm where a task has it, else acc
//   zeroshot_acc_avg                    the same over acc alone
//   zeroshot_<task>                     the task's acc_norm (acc for boolq, winogrande)
//   ruler_<L>                           RULER: mean task score at length L (percent)
//   ruler_avg                           the mean of ruler_<L> over the lengths
//   synthetic_loss, synthetic_token_accuracy, synthetic_exact_match   (synthetic.json;
//   synthetic_dense_* the same with dense attention when dense_reference)
// and coverage.json ({"after": routing_coverage of the model, "before": of the starting
// weights when asked}; no columns: it describes the routing, not accuracy).
// Every run resumes: predictions already on disk are kept.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <ostream>

#include "harness/data/dataset.h"
#include "harness/eval/eval_spec.h"
#include "harness/eval/model_folder.h"

namespace sb {

// What a run's evaluation has beyond a model folder.
struct EvalRunInputs {
  // The run's data set, needed by spec.synthetic and spec.coverage (a ConfigError naming
  // the section without it).
  const Dataset* synthetic_data = nullptr;
  // The weights the run started from (harness/train/initial_model.h), for
  // spec.coverage->before; absent: no "before".
  std::function<Qwen2ForCausalLM()> starting_model;
  // What spec.synthetic->dense_reference scores with: dense causal attention
  // (harness/patterns' default_attention_options); empty: a ConfigError naming the key.
  AttentionOptions dense_reference;
};

// spec.coverage's block_size and top_k must be resolved (>= 1) by the caller.
nlohmann::ordered_json run_eval_suite(ModelFolder& model, const EvalSpec& spec, const std::filesystem::path& out_dir,
                                      std::ostream& progress, const EvalRunInputs& run = {});

}  // namespace sb
