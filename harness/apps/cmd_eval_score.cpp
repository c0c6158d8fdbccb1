#include <CLI/CLI.hpp>

#include <iostream>

#include "harness/apps/eval_subcommands.h"
#include "harness/eval/longbench_scorer.h"

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

}  // namespace sb::cli
