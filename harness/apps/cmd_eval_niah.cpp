#include <CLI/CLI.hpp>

#include <iostream>

#include "harness/apps/cli_checks.h"
#include "harness/apps/eval_subcommands.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/heldout_perplexity.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/niah.h"

namespace sb::cli {

EvalSubcommand register_eval_niah(CLI::App& eval) {
  struct Flags {
    EvalModelFlags model;
    NiahOptions options;
    std::string out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand("niah", "Needle in a haystack over a grid of context lengths x depths");
  sub->footer(
      "Hides \"The special magic number is: <7 digits>.\" at each depth (percent) of a context of each length "
      "(tokens), asks for the number, and scores 1 when the answer contains it as a whole run of digits. Writes "
      "<out>/niah.json (scores[depth][length], mean) and <out>/niah_cells.jsonl (every cell; a rerun resumes). "
      "Draw it with scripts/plot_niah.py <out>/niah.json.");
  add_eval_model_flags(sub, flags->model);
  sub->add_option("--out", flags->out, "Output folder")->required();
  sub->add_option("--haystack", flags->options.haystack, "A text file, or synthetic")->capture_default_str();
  sub->add_option("--lengths", flags->options.lengths, "Context lengths in tokens")->delimiter(',')->capture_default_str();
  sub->add_option("--depths", flags->options.depths, "Needle depths in percent")->delimiter(',')->capture_default_str();
  sub->add_option("--samples", flags->options.samples, "Needles per cell")->check(at_least(1))->capture_default_str();
  sub->add_option("--max-new-tokens", flags->options.max_new_tokens, "Tokens to generate")->capture_default_str();
  sub->add_option("--seed", flags->options.seed, "Seed of the needles and the synthetic haystack")->capture_default_str();
  return {sub, [flags]() {
    NiahOptions options = flags->options;
    options.out_dir = flags->out;
    apply_generation_flags(flags->model, options);
    ModelFolder model = load_eval_model(flags->model);
    const auto grid = run_niah(model, options, std::cerr);
    std::cout << "niah mean score " << grid["mean"].get<double>() << " (" << (options.out_dir / "niah.json").string()
              << ")\n";
    return 0;
  }};
}

EvalSubcommand register_eval_ppl(CLI::App& eval) {
  struct Flags {
    EvalModelFlags model;
    HeldoutOptions options;
    std::string input, out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand("ppl", "Perplexity / mean token NLL on held-out JSON lines");
  sub->footer(
      "Each line is {\"text\": ...} or {\"input_ids\": [...]}. Documents are cut into non-overlapping windows of "
      "--max-length tokens, each scored on its own, or with --stride into sliding windows that score only the "
      "tokens after the previous window; nll = total NLL / scored tokens (natural log), ppl = exp(nll). "
      "--bucket-tokens adds the NLL by position in the window (by_position). Prints the JSON result; --out also "
      "writes it (atomically).");
  add_eval_model_flags(sub, flags->model);
  sub->add_option("--input", flags->input, "JSON-lines file")->required();
  sub->add_option("--max-length", flags->options.window, "Window in tokens")->capture_default_str();
  sub->add_option("--limit", flags->options.limit, "Only the first N documents (0: all)")->check(at_least(0));
  sub->add_option("--stride", flags->options.stride, "Sliding windows advanced by this many tokens (0: disjoint)")
      ->check(at_least(0));
  sub->add_option("--bucket-tokens", flags->options.bucket_tokens,
                  "Also report the NLL by position in buckets of this many tokens (0: no)")
      ->check(at_least(0));
  sub->add_option("--out", flags->out, "Also write the result to this JSON file");
  return {sub, [flags]() {
    HeldoutOptions options = flags->options;
    options.data = flags->input;
    ModelFolder model = load_eval_model(flags->model);
    const std::string text = python_json_dumps(heldout_perplexity(model, options), 2) + "\n";
    if (!flags->out.empty()) write_file_atomic(flags->out, text);
    std::cout << text;
    return 0;
  }};
}

}  // namespace sb::cli
