#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>

#include "common/errors.h"
#include "harness/apps/cli_checks.h"
#include "harness/apps/commands.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/apps/eval_subcommands.h"
#include "harness/common/atomic_file.h"
#include "harness/common/jsonl_file.h"
#include "harness/eval/model_folder.h"
#include "harness/eval/token_nll.h"

namespace sb::cli {
namespace {

struct NllFlags {
  std::string model;
  std::string input;
  AttentionCommandFlags attention{"dense", {}};
};

// One input line: {"input_ids": [...]} or {"text": "..."}; anything else names the
// file and line.
std::vector<int64_t> read_input_line(const nlohmann::json& line, const ModelFolder& folder,
                                     const std::string& where) {
  if (!line.is_object() || line.size() != 1 ||
      !(line.contains("input_ids") || line.contains("text"))) {
    throw ConfigError(where, "$", "expected {\"input_ids\": [...]} or {\"text\": \"...\"}",
                      "give each line exactly one of the two keys");
  }
  if (line.contains("text")) {
    if (!line["text"].is_string()) throw ConfigError(where, "$.text", "expected a string");
    return folder.encode(line["text"].get<std::string>(), where + " $.text");
  }
  const auto& ids = line["input_ids"];
  if (!ids.is_array()) throw ConfigError(where, "$.input_ids", "expected an array of integers");
  std::vector<int64_t> out;
  for (const auto& id : ids) {
    if (!id.is_number_integer()) {
      throw ConfigError(where, "$.input_ids", "expected integers, got " + id.dump());
    }
    out.push_back(id.get<int64_t>());
  }
  return out;
}

}  // namespace

void add_eval_load_flags(CLI::App* sub, EvalModelFlags& flags) {
  sub->add_option("--model", flags.model, "HF checkpoint folder (config.json, safetensors, tokenizer.json)")
      ->required();
  add_attention_flags(sub, flags.attention, AttentionFlagSet::kCommand, "Attention backend");
  sub->add_option("--device", flags.device, "cpu, cuda or cuda:N")->capture_default_str();
  sub->add_option("--dtype", flags.dtype, "float32 or bfloat16")->capture_default_str();
}

void add_eval_model_flags(CLI::App* sub, EvalModelFlags& flags) {
  add_eval_load_flags(sub, flags);
  sub->add_flag("--no-chat", flags.no_chat, "Prompt without the ChatML chat template (base models)");
  auto* system = sub->add_option("--system-prompt", flags.system_prompt,
                                 "System message of the chat template (default: the one Qwen2.5-Instruct's "
                                 "template inserts when none is given)");
  sub->add_flag("--no-system-prompt", flags.no_system_prompt, "Chat template without a system message")
      ->excludes(system);
  sub->add_option("--repetition-penalty", flags.repetition_penalty,
                  "transformers' repetition penalty on greedy decoding (1: off; transformers' generate applies "
                  "generation_config.json's, 1.05 for Qwen2.5-Instruct)")
      ->check(at_least(1))
      ->capture_default_str();
}

ModelFolder load_eval_model(const EvalModelFlags& flags) {
  ModelFolder folder = load_model_folder(flags.model, attention_of(flags.attention, AttentionFlagSet::kCommand));
  place_model(folder, flags.device, flags.dtype);
  return folder;
}

std::string eval_attention_args(const AttentionCommandFlags& flags) {
  const AttentionOptions attention = attention_of(flags, AttentionFlagSet::kCommand);
  const nlohmann::json resolved = attention_plugin(attention).to_json(attention.pattern());
  std::string args = resolved.at("name").get<std::string>();
  for (const auto& [key, value] : resolved.items()) {
    if (key != "name") args += ",attention." + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return args;
}

ChatStyle chat_style_of(const EvalModelFlags& flags) {
  ChatStyle style;
  style.chat = !flags.no_chat;
  if (flags.no_system_prompt) {
    style.system_prompt.reset();
  } else {
    style.system_prompt = flags.system_prompt;
  }
  return style;
}

EvalSubcommand register_eval_nll(CLI::App& eval) {
  auto flags = std::make_shared<NllFlags>();
  CLI::App* nll = eval.add_subcommand(
      "nll", "Mean token negative log-likelihood of each input line under a model");
  nll->footer(
      "Each line of --input is {\"input_ids\": [...]} or {\"text\": \"...\"} (text needs the "
      "model folder's tokenizer.json). Prints one JSON line per input: {\"nll\": <mean over "
      "the n-1 predicted tokens of -log p, natural log>, \"tokens\": <n-1>}.");
  nll->add_option("--model", flags->model, "HF checkpoint folder (config.json + safetensors)")
      ->required();
  nll->add_option("--input", flags->input, "JSONL file of inputs")->required();
  add_attention_flags(nll, flags->attention, AttentionFlagSet::kCommand, "Attention backend");
  return {nll, [flags]() {
    const std::string input = read_input_file(flags->input, "check the --input path");
    ModelFolder folder = load_model_folder(flags->model, attention_of(flags->attention, AttentionFlagSet::kCommand));
    for_each_jsonl_line(flags->input, input, [&](const std::string& text, const std::string& where) {
      const nlohmann::json line = parse_jsonl_line(text, where, "fix that line");
      std::vector<int64_t> ids = read_input_line(line, folder, where);
      TokenNll result;
      try {
        result = token_nll(folder.model, ids);
      } catch (const std::invalid_argument& e) {
        throw ConfigError(where, "", e.what(), "fix that input");
      }
      std::cout << nlohmann::json{{"nll", result.nll}, {"tokens", result.tokens}}.dump() << "\n";
    });
    return 0;
  }};
}

Command register_eval(CLI::App& app) {
  CLI::App* eval = app.add_subcommand(
      "eval", "Evaluate a model: LongBench (v1, -E, v2), needle-in-a-haystack, perplexity, NLL");
  eval->require_subcommand(1);
  auto subcommands = std::make_shared<std::vector<EvalSubcommand>>();
  for (auto registrar : {&register_eval_nll, &register_eval_score, &register_eval_score_v2,
                         &register_eval_longbench, &register_eval_longbench_v2, &register_eval_niah,
                         &register_eval_ppl, &register_eval_zeroshot, &register_eval_ruler,
                         &register_eval_ruler_score, &register_eval_suite}) {
    subcommands->push_back(registrar(*eval));
  }
  return [subcommands]() {
    for (auto& [sub, command] : *subcommands) {
      if (sub->parsed()) return command();
    }
    return 2;
  };
}

}  // namespace sb::cli
