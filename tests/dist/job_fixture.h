#pragma once
// Shared by the multi-process tests of whole jobs: small DP x PP manifests, the CLI
// started as a child process, and helpers to watch it (records written, child ranks).

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/worker_processes.h"

namespace sb::test {

// A DP x PP manifest of the small test model: `iterations` steps of a batch of 8
// variable-length sequences, checkpoints every `checkpoint_every` (0: none).
nlohmann::json job_manifest(const std::string& name, int64_t dp, int64_t pp, int64_t iterations,
                            double timeout_s, int64_t checkpoint_every);

std::filesystem::path write_manifest(const std::filesystem::path& dir, const nlohmann::json& manifest);

// `sparsebalance run MANIFEST --results DIR` as a child; env adds variables.
Worker start_cli(const std::filesystem::path& manifest, const std::filesystem::path& results,
                 const std::filesystem::path& log, const std::map<std::string, std::string>& env = {});

// Lines in `file` (0 when missing).
size_t line_count(const std::filesystem::path& file);

// Waits until `file` has at least `lines` lines; false at the deadline.
bool wait_for_lines(const std::filesystem::path& file, size_t lines, std::chrono::seconds deadline);

// The direct children of a process (/proc/<pid>/task/*/children).
std::vector<pid_t> child_processes(pid_t pid);

// Records of a run as JSON objects.
std::vector<nlohmann::json> read_records(const std::filesystem::path& run_dir);

}  // namespace sb::test
