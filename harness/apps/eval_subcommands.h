#pragma once
// The subcommands of `sparsebalance eval`, one registrar per file (cmd_eval_*.cpp);
// cmd_eval.cpp creates the `eval` parent and runs whichever one was parsed.

#include <memory>
#include <string>
#include <utility>

#include "harness/apps/attention_flags.h"
#include "harness/apps/commands.h"
#include "harness/eval/longbench/longbench_prompt.h"
#include "harness/eval/model_folder.h"

namespace CLI {
class App;
}

namespace sb::cli {

using EvalSubcommand = std::pair<CLI::App*, Command>;

// Flags of every subcommand that loads a model and prompts it.
struct EvalModelFlags {
  std::string model;
  AttentionCommandFlags attention{"dense", {}};
  std::string device = "cpu";
  std::string dtype = "float32";
  bool no_chat = false;
  std::string system_prompt = kQwenDefaultSystemPrompt;
  bool no_system_prompt = false;
  double repetition_penalty = 1.0;
};
// --model, --attention and its pattern's flags, --device, --dtype: what loading the
// model needs.
void add_eval_load_flags(CLI::App* sub, EvalModelFlags& flags);
// Those and the prompt style and decoding flags.
void add_eval_model_flags(CLI::App* sub, EvalModelFlags& flags);
ModelFolder load_eval_model(const EvalModelFlags& flags);
// "moba" and the resolved attention's other keys: ",attention.block_size=64,...".
std::string eval_attention_args(const AttentionCommandFlags& flags);
ChatStyle chat_style_of(const EvalModelFlags& flags);
// Sets the prompt style and decoding flags on LongBench, LongBench v2 or NIAH options.
template <typename Options>
void apply_generation_flags(const EvalModelFlags& flags, Options& options) {
  options.chat = chat_style_of(flags);
  options.repetition_penalty = flags.repetition_penalty;
}

EvalSubcommand register_eval_nll(CLI::App& eval);
EvalSubcommand register_eval_score(CLI::App& eval);
EvalSubcommand register_eval_score_v2(CLI::App& eval);
EvalSubcommand register_eval_longbench(CLI::App& eval);
EvalSubcommand register_eval_longbench_v2(CLI::App& eval);
EvalSubcommand register_eval_niah(CLI::App& eval);
EvalSubcommand register_eval_ppl(CLI::App& eval);
EvalSubcommand register_eval_zeroshot(CLI::App& eval);
EvalSubcommand register_eval_ruler(CLI::App& eval);
EvalSubcommand register_eval_ruler_score(CLI::App& eval);
EvalSubcommand register_eval_suite(CLI::App& eval);

}  // namespace sb::cli
