#include "harness/runner/run_evaluation.h"

#include "harness/eval/routing_coverage.h"
#include "harness/patterns/attention_patterns.h"

#include "common/errors.h"
#include "harness/data/dataset.h"
#include "harness/eval/eval_suite.h"
#include "harness/eval/model_folder.h"
#include "harness/train/checkpoint.h"
#include "harness/train/initial_model.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {

namespace fs = std::filesystem;

fs::path evaluation_dir(const fs::path& run_dir) { return run_dir / "eval"; }

bool evaluation_pending(const RunSpec& run, const fs::path& run_dir) {
  return run.manifest.eval.has_value() && fs::exists(run_dir / "status.json") &&
         !fs::exists(evaluation_dir(run_dir) / "eval_columns.json");
}

void evaluate_run(const RunSpec& run, const fs::path& run_dir, std::ostream& log) {
  const Manifest& m = run.manifest;
  const std::optional<fs::path> checkpoint = latest_checkpoint(run_dir);
  if (!checkpoint) {
    throw ConfigError(run_dir.string(), "", "has no checkpoint to evaluate",
                      "rerun it with --force (runs with an eval block save a checkpoint at the end)");
  }
  const AttentionOptions& attention = m.methods.at(0).attention;
  log << "evaluating " << run.name << " (" << checkpoint->string() << ", " << attention.name() << " attention) into "
      << evaluation_dir(run_dir).string() << "\n";
  ModelFolder folder =
      load_model_folder(*checkpoint, attention);
  if (!folder.tokenizer && m.data.source == DataSource::kJsonl) folder.tokenizer = Tokenizer::from_file(m.data.jsonl.tokenizer);
  place_model(folder, m.train.device_name(), m.train.precision == Qwen2Precision::kBFloat16Mixed ? "bfloat16" : "float32");
  std::unique_ptr<Dataset> data;
  if (m.data.source == DataSource::kSynthetic) {
    data = make_dataset(m.data, m.seed, dataset_limits(m));
  }
  EvalSpec spec = *m.eval;
  if (spec.coverage) {  // the run's MoBA geometry unless the section names its own
    const auto [block_size, top_k] = routing_geometry(attention);
    if (spec.coverage->block_size == 0) spec.coverage->block_size = block_size;
    if (spec.coverage->top_k == 0) spec.coverage->top_k = top_k;
    // MoBA's resolved attention names its gate when not the block gate.
    if (spec.coverage->gate.empty()) {
      spec.coverage->gate = attention_plugin(attention).to_json(attention.pattern()).value("gate", "block");
    }
  }
  EvalRunInputs inputs;
  inputs.synthetic_data = data.get();
  inputs.dense_reference = default_attention_options();
  inputs.starting_model = [&m, &attention] {
    return initial_model(m, std::shared_ptr<AttentionBackend>(attention.make_backend()));
  };
  fs::create_directories(evaluation_dir(run_dir));
  run_eval_suite(folder, spec, evaluation_dir(run_dir), log, inputs);
}

}  // namespace sb
