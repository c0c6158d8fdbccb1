#include <CLI/CLI.hpp>

#include <iostream>

#include "common/errors.h"
#include "harness/apps/eval_subcommands.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/eval_suite.h"
#include "harness/eval/longbench/python_json.h"

namespace sb::cli {

EvalSubcommand register_eval_suite(CLI::App& eval) {
  struct Flags {
    std::string model, spec, out;
    AttentionCommandFlags attention{"dense", {}};
    std::string device = "cpu", dtype = "float32";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sub = eval.add_subcommand("suite", "Run an eval spec (a manifest's `eval` block) on a checkpoint");
  sub->footer(
      "SPEC is a JSON file holding the object a manifest's \"eval\" block holds (keys: chat, system_prompt, "
      "jieba_dir, repetition_penalty, longbench, longbench_v2, niah, heldout; \"synthetic\" needs a training run's "
      "data and works only in a manifest; see docs/evaluation.md); relative paths resolve against SPEC's "
      "folder. Writes every evaluation's files under --out and prints the metric columns (also in "
      "<out>/eval_columns.json).");
  sub->add_option("--model", flags->model, "HF checkpoint folder")->required();
  sub->add_option("--spec", flags->spec, "Eval spec JSON file")->required();
  sub->add_option("--out", flags->out, "Output folder")->required();
  add_attention_flags(sub, flags->attention, AttentionFlagSet::kCommand, "Attention backend");
  sub->add_option("--device", flags->device, "cpu, cuda or cuda:N")->capture_default_str();
  sub->add_option("--dtype", flags->dtype, "float32 or bfloat16")->capture_default_str();
  return {sub, [flags]() {
    nlohmann::json block;
    try {
      block = nlohmann::json::parse(read_file(flags->spec));
    } catch (const nlohmann::json::parse_error& e) {
      throw ConfigError(flags->spec, "", std::string("invalid JSON: ") + e.what());
    } catch (const std::runtime_error& e) {
      throw ConfigError(flags->spec, "", e.what(), "check the --spec path");
    }
    const EvalSpec spec =
        parse_eval_spec(block, "$", flags->spec, std::filesystem::absolute(flags->spec).parent_path());
    ModelFolder model = load_model_folder(flags->model, attention_of(flags->attention, AttentionFlagSet::kCommand));
    place_model(model, flags->device, flags->dtype);
    std::cout << python_json_dumps(run_eval_suite(model, spec, flags->out, std::cerr), 2) << "\n";
    return 0;
  }};
}

}  // namespace sb::cli
