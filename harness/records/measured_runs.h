#pragma once
// The run folders whose measurements the simulator may fit its models to: under a
// results folder, the folder itself when it holds records.jsonl and each sub-folder that
// does, sorted by path, leaving out any whose context.json marks it simulated (a model
// fitted to simulations would only confirm itself).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/trace/timeline.h"
#include "kernels/attention/ring/cp_sharding.h"

namespace sb {

// Throws ConfigError naming `json_path` in `manifest_file` when results_dir is not a
// folder; an empty result is the caller's to judge (each fit says what it needed).
std::vector<std::filesystem::path> measured_run_dirs(const std::filesystem::path& results_dir,
                                                     const std::string& manifest_file, const std::string& json_path);

// The run's timeline_events.jsonl lines of measured iterations: those whose record in
// records.jsonl is not warm-up (an iteration with a timeline but no record, from a run
// interrupted between the two writes, is left out). Empty without a timeline file.
std::vector<TimelineIteration> measured_timeline_iterations(const std::filesystem::path& run_dir);

// A measured run's context-parallel layout, from its resolved manifest (`resolved`, read
// from `file`): parallelism.cp and, with cp > 1, cp_layout and cp_stripe_tokens. Throws
// ConfigError naming the file and key where they are not what a resolved manifest holds.
struct MeasuredRunLayout {
  int64_t cp = 1;
  CpLayout cp_layout;
};
MeasuredRunLayout measured_run_layout(const nlohmann::json& resolved, const std::string& file);

// What `observe(run_dir)` returns for every measured run under results_dir, concatenated,
// and the runs that gave any. An empty result is the caller's to judge.
template <class Observation>
struct MeasuredObservations {
  std::vector<Observation> all;
  std::vector<std::string> runs;
};

template <class Observation, class Observe>
MeasuredObservations<Observation> observe_measured_runs(const std::filesystem::path& results_dir,
                                                        const std::string& manifest_file,
                                                        const std::string& json_path, Observe observe) {
  MeasuredObservations<Observation> out;
  for (const auto& dir : measured_run_dirs(results_dir, manifest_file, json_path)) {
    std::vector<Observation> some = observe(dir);
    if (some.empty()) continue;
    out.all.insert(out.all.end(), some.begin(), some.end());
    out.runs.push_back(dir.string());
  }
  return out;
}

}  // namespace sb
