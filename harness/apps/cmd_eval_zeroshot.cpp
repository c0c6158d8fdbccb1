#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>

#include "harness/apps/cli_checks.h"
#include "harness/apps/eval_subcommands.h"
#include "harness/eval/zeroshot/zeroshot_eval.h"

namespace sb::cli {

EvalSubcommand register_eval_zeroshot(CLI::App& eval) {
  struct Flags {
    EvalModelFlags model;
    ZeroShotOptions options;
    std::string data, out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand("zeroshot", "Zero-shot multiple choice as lm-evaluation-harness scores it");
  sub->footer(
      "Tasks: arc_easy, arc_challenge, boolq, hellaswag, piqa, winogrande, openbookqa (lm-eval 0.4.13's prompts, "
      "choices and metrics; plain prompts, no chat template). --data holds <task>.jsonl per task, the scored split "
      "in the Hugging Face dataset's columns (scripts/data/convert_zeroshot.py converts the published parquet). "
      "Writes <out>/samples_<task>.jsonl (a rerun resumes) and <out>/results.json in lm-eval's layout, with the "
      "average over the tasks (acc_norm where a task has it, else acc) under \"sparsebalance\". docs/zeroshot.md.");
  add_eval_load_flags(sub, flags->model);
  sub->add_option("--data", flags->data, "Folder with <task>.jsonl per task")->required();
  sub->add_option("--out", flags->out, "Output folder")->required();
  sub->add_option("--tasks", flags->options.tasks, "Tasks to score (default: all)")->delimiter(',');
  sub->add_option("--limit", flags->options.limit, "Only the first N documents of each task (0: all)")
      ->check(at_least(0));
  sub->add_option("--batch-tokens", flags->options.batch_tokens,
                  "Pack documents into batches of up to N input tokens (0: one document at a time, its choices "
                  "sharing their prefix)")
      ->check(at_least(0));
  return {sub, [flags]() {
    ZeroShotOptions options = flags->options;
    options.data_dir = flags->data;
    options.out_dir = flags->out;
    options.model_args = "pretrained=" + flags->model.model + ",attention=" + eval_attention_args(flags->model.attention) +
                         ",device=" + flags->model.device + ",dtype=" + flags->model.dtype;
    ModelFolder model = load_eval_model(flags->model);
    const auto results = run_zeroshot(model, options, std::cerr);
    std::cout << std::fixed << std::setprecision(4);
    for (const auto& [task, r] : results["results"].items()) {
      std::cout << task << ": acc " << r["acc,none"].get<double>();
      if (r.contains("acc_norm,none")) std::cout << ", acc_norm " << r["acc_norm,none"].get<double>();
      std::cout << " (" << r["sample_len"].get<int64_t>() << " docs)\n";
    }
    std::cout << "average " << results["sparsebalance"]["average"].get<double>() << " ("
              << (options.out_dir / "results.json").string() << ")\n";
    return 0;
  }};
}

}  // namespace sb::cli
