// sparsebalance: the command-line entry point. Thin by design: each subcommand parses
// its flags and calls the library.
//
// Exit codes: 0 success; 2 usage or configuration error (bad flag, bad manifest,
// conflicting results); 1 runtime failure.

#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <string>

#include "common/errors.h"
#include "harness/apps/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "sparsebalance: train Qwen2.5 with dynamic sparse attention on DP x PP ranks, balance the "
      "work (SparseBalance and baselines), and report speed, imbalance, bubbles and accuracy."};
  app.require_subcommand(1);
  app.fallthrough(false);
  std::map<CLI::App*, sb::cli::Command> commands;
  auto add = [&](sb::cli::Command (*registrar)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    sb::cli::Command command = registrar(app);
    commands[app.get_subcommands({}).at(before)] = std::move(command);
  };
  add(&sb::cli::register_run);
  add(&sb::cli::register_report);
  add(&sb::cli::register_version);
  add(&sb::cli::register_tokenize);
  add(&sb::cli::register_eval);
  add(&sb::cli::register_generate);
  add(&sb::cli::register_profile);
  add(&sb::cli::register_bench);
  add(&sb::cli::register_simulate);

  // CLI11 answers an unknown command with "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::cerr << "error: unknown command \"" << argv[1] << "\"; the commands are " << known
                << " (sparsebalance --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  try {
    for (auto& [sub, command] : commands) {
      if (sub->parsed()) return command();
    }
    std::cerr << "error: no subcommand given; see sparsebalance --help\n";
    return 2;
  } catch (const sb::ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
