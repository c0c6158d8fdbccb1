#pragma once
// Subcommands of the sparsebalance CLI. Each file registers its flags on the parent
// app and returns the function that runs it once parsing succeeded; the function
// returns the exit code (0 success, 1 runtime failure; ConfigError -> 2 in main).

#include <functional>

namespace CLI {
class App;
}

namespace sb::cli {

using Command = std::function<int()>;

Command register_run(CLI::App& app);
Command register_report(CLI::App& app);
Command register_version(CLI::App& app);
Command register_tokenize(CLI::App& app);
Command register_eval(CLI::App& app);
Command register_generate(CLI::App& app);
Command register_profile(CLI::App& app);
Command register_bench(CLI::App& app);
Command register_simulate(CLI::App& app);

}  // namespace sb::cli
