#pragma once
// The subcommands of `sparsebalance eval`, one registrar per file (cmd_eval_*.cpp);
// cmd_eval.cpp creates the `eval` parent and runs whichever one was parsed.

#include <utility>

#include "harness/apps/commands.h"

namespace CLI {
class App;
}

namespace sb::cli {

using EvalSubcommand = std::pair<CLI::App*, Command>;

EvalSubcommand register_eval_nll(CLI::App& eval);
EvalSubcommand register_eval_score(CLI::App& eval);
EvalSubcommand register_eval_score_v2(CLI::App& eval);
EvalSubcommand register_eval_longbench(CLI::App& eval);
EvalSubcommand register_eval_longbench_v2(CLI::App& eval);
EvalSubcommand register_eval_niah(CLI::App& eval);
EvalSubcommand register_eval_ppl(CLI::App& eval);

}  // namespace sb::cli
