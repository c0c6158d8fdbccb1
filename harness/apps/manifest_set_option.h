#pragma once
// The `--set PATH=VALUE` option of the commands that read a manifest (run, simulate):
// one registration and one way of writing it into the recorded command line.

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sb::cli {

// Registers the repeatable --set on `command`, collecting the arguments into `sets`.
void add_manifest_set_option(CLI::App& command, std::vector<std::string>& sets);

// "sparsebalance <command> <manifest> --set 'a=b' ..." for context.json.
std::string manifest_command_line(const std::string& command, const std::string& manifest,
                                  const std::vector<std::string>& sets);

}  // namespace sb::cli
