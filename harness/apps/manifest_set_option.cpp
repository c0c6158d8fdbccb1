#include "harness/apps/manifest_set_option.h"

#include <CLI/CLI.hpp>

namespace sb::cli {
namespace {

// Single-quoted for a POSIX shell when it holds anything but plain path characters.
std::string shell_word(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                              "_-.,/:=+@%") == std::string::npos) {
    return text;
  }
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

void add_manifest_set_option(CLI::App& command, std::vector<std::string>& sets) {
  command.add_option("--set", sets,
                     "Override a manifest value before it is parsed, PATH=VALUE (repeatable): a dotted path "
                     "(train.lr, data.jsonl.path, methods.<index or method name>.dst.p) and a JSON value or "
                     "plain text; the resolved manifest records it")
      ->take_all()
      ->allow_extra_args(false);
}

std::string manifest_command_line(const std::string& command, const std::string& manifest,
                                  const std::vector<std::string>& sets) {
  std::string line = "sparsebalance " + command + " " + shell_word(manifest);
  for (const std::string& set : sets) line += " --set " + shell_word(set);
  return line;
}

}  // namespace sb::cli
