#include <CLI/CLI.hpp>

#include <iostream>

#include "harness/apps/cli_checks.h"
#include "harness/apps/eval_subcommands.h"
#include "harness/eval/longbench/longbench_predict.h"
#include "harness/eval/longbench/longbench_scorer.h"
#include "harness/eval/longbench/longbench_v2.h"
#include "harness/eval/longbench/python_json.h"

namespace sb::cli {

EvalSubcommand register_eval_longbench(CLI::App& eval) {
  struct Flags {
    EvalModelFlags model;
    LongBenchPredictOptions options;
    std::string data, config, out, jieba_dir;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand("longbench", "Predict LongBench v1 / LongBench-E as upstream's pred.py, then score");
  sub->footer(
      "Reads <data>/<task>.jsonl (--e: <task>_e.jsonl) and the prompt templates and max new tokens of "
      "<config>/dataset2prompt.json and dataset2maxlen.json. Prompts longer than --max-length tokens keep their "
      "first and last halves (decoded separately, joined as text, tokenized again). The chat template applies "
      "except for trec, triviaqa, samsum, lsht, lcc and repobench-p. Greedy decoding; samsum also stops at a "
      "newline. Predictions are appended to <out>/<task>.jsonl as upstream writes them; a rerun resumes where a "
      "run stopped. Then scores <out> as `eval score` does.");
  add_eval_model_flags(sub, flags->model);
  sub->add_option("--data", flags->data, "Folder of LongBench's <task>.jsonl files")->required();
  sub->add_option("--config", flags->config, "Folder with dataset2prompt.json and dataset2maxlen.json")->required();
  sub->add_option("--out", flags->out, "Prediction folder")->required();
  sub->add_option("--tasks", flags->options.tasks, "Tasks (default: upstream's 21, or 13 with --e)")->delimiter(',');
  sub->add_flag("--e", flags->options.longbench_e, "LongBench-E");
  sub->add_option("--max-length", flags->options.max_length, "Prompt tokens kept by the middle truncation")
      ->capture_default_str();
  sub->add_option("--limit", flags->options.limit, "Only the first N items of each task (0: all)")
      ->check(at_least(0));
  sub->add_option("--jieba-dir", flags->jieba_dir, "jieba's package folder (for scoring the Chinese tasks)");
  return {sub, [flags]() {
    LongBenchPredictOptions options = flags->options;
    options.data_dir = flags->data;
    options.config_dir = flags->config;
    options.out_dir = flags->out;
    apply_generation_flags(flags->model, options);
    ModelFolder model = load_eval_model(flags->model);
    const LongBenchPredictCounts counts = predict_longbench(model, options, std::cerr);
    std::cerr << "predicted " << counts.predicted << " items (" << counts.resumed << " resumed, " << counts.truncated
              << " prompts truncated)\n";
    LazyJieba jieba(flags->jieba_dir);
    const auto summary = score_and_write_longbench(options.out_dir, options.longbench_e, jieba);
    std::cout << format_longbench_summary(summary, options.longbench_e);
    return 0;
  }};
}

EvalSubcommand register_eval_longbench_v2(CLI::App& eval) {
  struct Flags {
    EvalModelFlags model;
    LongBenchV2Options options;
    std::string data, config, out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand("longbench-v2", "Predict and score LongBench v2 (four-choice questions)");
  sub->footer(
      "Prompts with <config>/v2_0shot.txt; truncates the middle to --max-length tokens (v2's rule: one decode); "
      "greedy decoding; parses \"The correct answer is (X)\". Writes <out>/longbench_v2.jsonl (resumable) and "
      "<out>/longbench_v2_result.json: accuracy overall, easy/hard, short/medium/long (percent, one decimal).");
  add_eval_model_flags(sub, flags->model);
  sub->add_option("--data", flags->data, "LongBench v2 data.json (or JSON lines)")->required();
  sub->add_option("--config", flags->config, "Folder with v2_0shot.txt")->required();
  sub->add_option("--out", flags->out, "Output folder")->required();
  sub->add_option("--max-length", flags->options.max_length, "Prompt tokens kept")->capture_default_str();
  sub->add_option("--max-new-tokens", flags->options.max_new_tokens, "Tokens to generate at most")
      ->capture_default_str();
  sub->add_option("--limit", flags->options.limit, "Only the first N questions (0: all)")
      ->check(at_least(0));
  return {sub, [flags]() {
    LongBenchV2Options options = flags->options;
    options.data_file = flags->data;
    options.config_dir = flags->config;
    options.out_dir = flags->out;
    apply_generation_flags(flags->model, options);
    ModelFolder model = load_eval_model(flags->model);
    std::cout << python_json_dumps(predict_longbench_v2(model, options, std::cerr), 4) << "\n";
    return 0;
  }};
}

}  // namespace sb::cli
