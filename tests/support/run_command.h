#pragma once
// Runs a shell command for tests and returns its exit code and combined output.

#include <filesystem>
#include <string>

namespace sb::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::string& command);

// The built CLI (build/sparsebalance), quoted for the shell.
std::string sparsebalance_binary();

// An empty folder under the system temp dir, unique to this process and name.
std::filesystem::path fresh_temp_dir(const std::string& name);

}  // namespace sb::test
