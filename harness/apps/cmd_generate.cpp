#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <sstream>

#include "common/errors.h"
#include "harness/apps/attention_flags.h"
#include "harness/apps/cli_checks.h"
#include "harness/apps/commands.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/eval/model_folder.h"
#include "models/qwen2/qwen2_generate.h"

namespace sb::cli {
namespace {

struct GenerateFlags {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  int64_t max_new_tokens = 32;
  std::vector<int64_t> stop_ids;
  bool ignore_eos = false;
  AttentionCommandFlags attention{"dense", {}};
};

std::vector<int64_t> parse_id_list(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw ConfigError("--prompt-ids", "", "\"" + item + "\" is not an integer",
                        "give comma-separated token ids, e.g. 1,2,3");
    }
  }
  return ids;
}

}  // namespace

Command register_generate(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* sub = app.add_subcommand("generate", "Greedy generation with a KV cache");
  sub->footer(
      "Prints {\"ids\": [generated ids], \"text\": \"...\"} (text when the model folder has "
      "tokenizer.json). Stops after --max-new-tokens or on a stop token (kept in the output): "
      "--stop-id values if given, else config.json's eos_token_id, unless --ignore-eos.");
  sub->add_option("--model", flags->model, "HF checkpoint folder")->required();
  auto* prompt = sub->add_option("--prompt", flags->prompt, "Prompt text (needs tokenizer.json)");
  auto* ids = sub->add_option("--prompt-ids", flags->prompt_ids, "Prompt token ids, e.g. 1,2,3");
  prompt->excludes(ids);
  sub->add_option("--max-new-tokens", flags->max_new_tokens, "Tokens to generate at most")
      ->check(at_least(0))
      ->capture_default_str();
  sub->add_option("--stop-id", flags->stop_ids, "Stop token id (repeatable)");
  sub->add_flag("--ignore-eos", flags->ignore_eos, "Do not stop on config.json's eos_token_id");
  add_attention_flags(sub, flags->attention, AttentionFlagSet::kCommand, "Attention backend");
  return [flags]() {
    if (flags->prompt.empty() && flags->prompt_ids.empty()) {
      throw ConfigError("--prompt", "", "no prompt given", "pass --prompt TEXT or --prompt-ids 1,2,3");
    }
    ModelFolder folder = load_model_folder(flags->model, attention_of(flags->attention, AttentionFlagSet::kCommand));
    const std::vector<int64_t> prompt_ids = flags->prompt_ids.empty()
                                                ? folder.encode(flags->prompt, "--prompt")
                                                : parse_id_list(flags->prompt_ids);
    std::vector<int64_t> stop_ids = flags->stop_ids;
    if (stop_ids.empty() && !flags->ignore_eos) stop_ids = folder.eos_token_ids;
    std::vector<int64_t> generated;
    try {
      generated = qwen2_generate_greedy(folder.model, prompt_ids, GreedyOptions{flags->max_new_tokens, stop_ids});
    } catch (const std::invalid_argument& e) {
      throw ConfigError("--prompt", "", e.what(), "shorten the prompt or --max-new-tokens");
    }
    nlohmann::json out{{"ids", generated}};
    if (folder.tokenizer) out["text"] = folder.tokenizer->decode(generated);
    std::cout << out.dump() << "\n";
    return 0;
  };
}

}  // namespace sb::cli
