#include "harness/eval/eval_suite.h"

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/longbench/longbench_scorer.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/routing_coverage.h"
#include "kernels/attention/core/attention_backend.h"

namespace sb {
namespace {

using nlohmann::ordered_json;

// Columns of a v1 summary (longbench_scorer.h): the overall average and categories, and
// the English / Chinese table averages.
void add_longbench_columns(const ordered_json& summary, ordered_json& columns) {
  if (summary.contains("overall")) {
    for (const auto& [key, value] : summary["overall"].items()) {
      columns[key == "average" ? std::string("longbench_avg") : "longbench_" + key] = value;
    }
  }
  if (summary.contains("english")) columns["longbench_en_avg"] = summary["english"]["average"];
  if (summary.contains("chinese")) columns["longbench_zh_avg"] = summary["chinese"]["average"];
}

}  // namespace

ordered_json run_eval_suite(ModelFolder& model, const EvalSpec& spec, const std::filesystem::path& out_dir,
                            std::ostream& progress, const EvalRunInputs& run) {
  const Dataset* synthetic_data = run.synthetic_data;
  ordered_json columns = ordered_json::object();
  if (spec.longbench) {
    LongBenchPredictOptions options = *spec.longbench;
    options.out_dir = out_dir / "longbench";
    options.chat = spec.chat;
    options.repetition_penalty = spec.repetition_penalty;
    predict_longbench(model, options, progress);
    LazyJieba jieba(spec.jieba_dir, "$.eval.jieba_dir");
    const ordered_json summary = score_and_write_longbench(options.out_dir, options.longbench_e, jieba);
    if (options.longbench_e) {
      for (const char* bin : kLongBenchEBins) {
        const ordered_json& s = summary[bin];
        if (s.contains("overall")) columns[std::string("longbench_e_avg_") + bin] = s["overall"]["average"];
      }
    } else {
      add_longbench_columns(summary, columns);
    }
  }
  if (spec.longbench_v2) {
    LongBenchV2Options options = *spec.longbench_v2;
    options.out_dir = out_dir / "longbench_v2";
    options.chat = spec.chat;
    options.repetition_penalty = spec.repetition_penalty;
    const ordered_json result = predict_longbench_v2(model, options, progress);
    for (const auto& [key, value] : result.items()) {
      if (key != "counts") columns["longbench_v2_" + key] = value;
    }
  }
  if (spec.niah) {
    NiahOptions options = *spec.niah;
    options.out_dir = out_dir / "niah";
    options.chat = spec.chat;
    options.repetition_penalty = spec.repetition_penalty;
    columns["niah_score"] = run_niah(model, options, progress)["mean"];
  }
  if (spec.heldout) {
    const ordered_json result = heldout_perplexity(model, *spec.heldout);
    write_file_atomic(out_dir / "heldout.json", python_json_dumps(result, 2) + "\n");
    columns["heldout_nll"] = result["nll"];
    columns["heldout_ppl"] = result["ppl"];
    columns["heldout_tokens"] = result["tokens"];
  }
  if (spec.zeroshot) {
    ZeroShotOptions options = *spec.zeroshot;
    options.out_dir = out_dir / "zeroshot";
    options.model_args = "pretrained=" + model.dir.string();
    const ordered_json result = run_zeroshot(model, options, progress);
    columns["zeroshot_avg"] = result["sparsebalance"]["average"];
    columns["zeroshot_acc_avg"] = result["sparsebalance"]["acc_average"];
    for (const auto& [task, r] : result["results"].items()) {
      columns["zeroshot_" + task] = r.contains("acc_norm,none") ? r["acc_norm,none"] : r["acc,none"];
    }
  }
  if (spec.ruler) {
    RulerOptions options = *spec.ruler;
    options.out_dir = out_dir / "ruler";
    const ordered_json result = run_ruler(model, options, progress);
    double sum = 0;
    for (const auto& [length, average] : result["average"].items()) {
      columns["ruler_" + length] = average;
      sum += average.get<double>();
    }
    if (!result["average"].empty()) columns["ruler_avg"] = sum / static_cast<double>(result["average"].size());
  }
  if (spec.synthetic) {
    if (synthetic_data == nullptr) {
      throw ConfigError("", "$.eval.synthetic", "needs the synthetic data of a training run",
                        "use it in an experiment manifest with data.source \"synthetic\"");
    }
    ordered_json result;
    progress << "scoring " << spec.synthetic->samples << " held-out synthetic samples\n";
    result["attention"] = synthetic_heldout(model.model, *synthetic_data, *spec.synthetic);
    for (const auto& [key, value] : result["attention"].items()) {
      if (key != "samples" && key != "target_tokens") columns["synthetic_" + key] = value;
    }
    if (spec.synthetic->dense_reference) {
      const std::shared_ptr<AttentionBackend> own = model.model->attention_backend_ptr();
      if (run.dense_reference.empty()) {
        throw ConfigError("", "$.eval.synthetic.dense_reference", "needs the dense attention of a training run",
                          "use it in an experiment manifest, or set dense_reference to false");
      }
      model.model->set_attention_backend(run.dense_reference.make_backend());
      result["dense"] = synthetic_heldout(model.model, *synthetic_data, *spec.synthetic);
      model.model->set_attention_backend(own);
      for (const auto& [key, value] : result["dense"].items()) {
        if (key != "samples" && key != "target_tokens") columns["synthetic_dense_" + key] = value;
      }
    }
    write_file_atomic(out_dir / "synthetic.json", python_json_dumps(result, 2) + "\n");
  }
  if (spec.coverage) {
    const RoutingCoverageOptions& options = *spec.coverage;
    if (synthetic_data == nullptr) {
      throw ConfigError("", "$.eval.coverage", "needs the synthetic data of a training run",
                        "use it in an experiment manifest with data.source \"synthetic\"");
    }
    if (options.block_size < 1 || options.top_k < 1) {
      throw ConfigError("", "$.eval.coverage", "has no MoBA block size or top_k to route with",
                        "set eval.coverage.block_size and eval.coverage.top_k");
    }
    ordered_json result;
    progress << "routing " << options.samples << " held-out synthetic samples (MoBA block " << options.block_size
             << ", k0 " << options.top_k << ")\n";
    result["after"] = routing_coverage(model.model, *synthetic_data, options);
    if (options.before && run.starting_model) {
      Qwen2ForCausalLM start = run.starting_model();
      const at::Tensor like = model.model->parameters().front();
      start->to(like.device(), like.scalar_type());
      result["before"] = routing_coverage(start, *synthetic_data, options);
    }
    write_file_atomic(out_dir / "coverage.json", python_json_dumps(result, 2) + "\n");
  }
  write_file_atomic(out_dir / "eval_columns.json", python_json_dumps(columns, 2) + "\n");
  return columns;
}

}  // namespace sb
