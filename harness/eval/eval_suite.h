#pragma once
// Evaluates one loaded model (+ tokenizer) with an eval spec (eval_spec.h): the library
// entry point behind a manifest's `eval` block and `sparsebalance eval suite`.
//
// Outputs under out_dir: longbench/ (prediction files, result.json, summary.json),
// longbench_v2/ (longbench_v2.jsonl, longbench_v2_result.json), niah/ (niah.json,
// niah_cells.jsonl), heldout.json, and eval_columns.json (atomically), the metric
// columns it returns, one flat JSON object for report tables:
//   longbench_avg                       overall average (mean of the six categories)
//   longbench_en_avg, longbench_zh_avg  English / Chinese table averages (when present)
//   longbench_<category>                overall table, per category (single_doc_qa, ...)
//   longbench_e_avg_<bin>               LongBench-E: overall average per length bin
//   longbench_v2_<group>                overall, easy, hard, short, medium, long (percent)
//   niah_score                          mean over the grid's cells
//   heldout_nll, heldout_ppl, heldout_tokens
//   synthetic_loss, synthetic_token_accuracy, synthetic_exact_match   (synthetic.json;
//   synthetic_dense_* the same with dense attention when dense_reference)
// Every run resumes: predictions already on disk are kept.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <ostream>

#include "harness/data/dataset.h"
#include "harness/eval/eval_spec.h"
#include "harness/eval/model_folder.h"

namespace sb {

// synthetic_data: the run's data set, needed by spec.synthetic (a ConfigError naming
// $.eval.synthetic without it).
nlohmann::ordered_json run_eval_suite(ModelFolder& model, const EvalSpec& spec, const std::filesystem::path& out_dir,
                                      std::ostream& progress, const Dataset* synthetic_data = nullptr);

}  // namespace sb
