#include <CLI/CLI.hpp>

#include <iostream>

#include "harness/apps/eval_subcommands.h"
#include "harness/eval/json_records.h"
#include "harness/eval/longbench/longbench_scorer.h"
#include "harness/eval/longbench/longbench_v2.h"
#include "harness/eval/longbench/python_json.h"

namespace sb::cli {

EvalSubcommand register_eval_score(CLI::App& eval) {
  struct Flags {
    std::string dir;
    bool longbench_e = false;
    std::string jieba_dir;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand(
      "score", "Score a LongBench prediction folder exactly as upstream's eval.py (result.json)");
  sub->footer(
      "PRED_DIR holds <task>.jsonl files, one {\"pred\", \"answers\", \"all_classes\", \"length\"} "
      "object per line. Writes PRED_DIR/result.json as upstream's eval.py does ({task: score}; "
      "with --e {task: {\"0-4k\", \"4-8k\", \"8k+\"}}), PRED_DIR/summary.json (category means: "
      "english and chinese tables, lcc and repobench-p in both, and overall = the mean of the six "
      "categories over all tasks), and prints the summary. The Chinese tasks need jieba's files "
      "(--jieba-dir, else $SB_JIEBA_DIR, else the project's Python environment).");
  sub->add_option("PRED_DIR", flags->dir, "Prediction folder")->required();
  sub->add_flag("--e", flags->longbench_e, "LongBench-E: scores per length bin");
  sub->add_option("--jieba-dir", flags->jieba_dir, "jieba's package folder (site-packages/jieba)");
  return {sub, [flags]() {
    LazyJieba jieba(flags->jieba_dir);
    const auto summary = score_and_write_longbench(flags->dir, flags->longbench_e, jieba);
    std::cout << format_longbench_summary(summary, flags->longbench_e);
    std::cout << "wrote " << (std::filesystem::path(flags->dir) / "result.json").string() << " and summary.json\n";
    return 0;
  }};
}

EvalSubcommand register_eval_score_v2(CLI::App& eval) {
  auto file = std::make_shared<std::string>();
  CLI::App* sub = eval.add_subcommand("score-v2", "Accuracy of LongBench v2 predictions (upstream's result.py)");
  sub->footer(
      "FILE holds one prediction per line (or a JSON array) with \"judge\", \"difficulty\" and \"length\", as "
      "`eval longbench-v2` and upstream's pred.py write them. Prints accuracy in percent (one decimal): overall, "
      "easy, hard, short, medium, long, and the counts.");
  sub->add_option("FILE", *file, "Prediction file")->required();
  return {sub, [file]() {
    std::cout << python_json_dumps(score_longbench_v2_records(read_json_records(*file), *file), 4) << "\n";
    return 0;
  }};
}

}  // namespace sb::cli
