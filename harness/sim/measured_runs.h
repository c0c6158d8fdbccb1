#pragma once
// The run folders whose measurements the simulator may fit its models to: under a
// results folder, the folder itself when it holds records.jsonl and each sub-folder that
// does, sorted by path, leaving out any whose context.json marks it simulated (a model
// fitted to simulations would only confirm itself).

#include <filesystem>
#include <string>
#include <vector>

namespace sb {

// Throws ConfigError naming `json_path` in `manifest_file` when results_dir is not a
// folder; an empty result is the caller's to judge (each fit says what it needed).
std::vector<std::filesystem::path> measured_run_dirs(const std::filesystem::path& results_dir,
                                                     const std::string& manifest_file, const std::string& json_path);

}  // namespace sb
