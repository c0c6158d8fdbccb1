#include <CLI/CLI.hpp>

#include <iostream>

#include "harness/apps/cli_checks.h"
#include "harness/apps/eval_subcommands.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/ruler/ruler_eval.h"
#include "harness/eval/ruler/ruler_score.h"

namespace sb::cli {

EvalSubcommand register_eval_ruler(CLI::App& eval) {
  struct Flags {
    EvalModelFlags model;
    RulerOptions options;
    std::string out, squad, hotpotqa, cwe_words;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand("ruler", "RULER's synthetic benchmark, generated natively at any length");
  sub->footer(
      "Tasks: niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery, vt, cwe, fwe, qa_1 (--squad), "
      "qa_2 (--hotpotqa), generated with RULER's templates, rules and random streams (seed 42), RULER's base "
      "prompt (no chat template). Writes <out>/<L>/data/<task>/validation.jsonl, <out>/<L>/pred/<task>.jsonl (a "
      "rerun resumes), <out>/<L>/pred/summary.csv and <out>/ruler.json. docs/ruler.md.");
  add_eval_load_flags(sub, flags->model);
  sub->add_option("--out", flags->out, "Output folder")->required();
  sub->add_option("--lengths", flags->options.lengths, "Sequence lengths in tokens (prompt + generation)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--samples", flags->options.samples, "Samples per task and length")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--tasks", flags->options.tasks, "Tasks (default: all; qa_1 and qa_2 when their files are given)")
      ->delimiter(',');
  sub->add_option("--haystack", flags->options.haystack,
                  "Essay haystack: synthetic, a text file, or RULER's PaulGrahamEssays.json")
      ->capture_default_str();
  sub->add_option("--squad", flags->squad, "SQuAD v2.0 dev-v2.0.json (qa_1)");
  sub->add_option("--hotpotqa", flags->hotpotqa, "HotpotQA hotpot_dev_distractor_v1.json (qa_2)");
  sub->add_option("--words-dir", flags->options.words_dir,
                  "wonderwords 2.2.0's assets folder (default: found in the project's Python environment)");
  sub->add_option("--cwe-words", flags->cwe_words, "RULER's english_words.json, for cwe past wonderwords' words");
  sub->add_option("--seed", flags->options.seed, "Seed of every task's generator (RULER: 42)")->capture_default_str();
  sub->add_flag("--prepare-only", flags->options.prepare_only, "Write the samples; predict nothing");
  return {sub, [flags]() {
    RulerOptions options = flags->options;
    options.out_dir = flags->out;
    options.squad = flags->squad;
    options.hotpotqa = flags->hotpotqa;
    options.cwe_words = flags->cwe_words;
    ModelFolder model = load_eval_model(flags->model);
    const auto result = run_ruler(model, options, std::cerr);
    if (!options.prepare_only) std::cout << python_json_dumps(result["average"]) << "\n";
    return 0;
  }};
}

EvalSubcommand register_eval_ruler_score(CLI::App& eval) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = eval.add_subcommand("ruler-score", "Score a RULER prediction folder as RULER's evaluate.py does");
  sub->add_option("PRED_DIR", *dir, "Folder of <task>.jsonl prediction files")->required();
  return {sub, [dir]() {
    for (const RulerTaskScore& s : score_ruler_prediction_dir(*dir)) {
      std::cout << s.task << " " << python_float_repr(s.score) << " (nulls " << s.nulls << ")\n";
    }
    return 0;
  }};
}

}  // namespace sb::cli
