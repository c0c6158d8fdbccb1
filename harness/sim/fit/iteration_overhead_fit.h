#pragma once
// Fits the simulator's iteration overhead (simulation.iteration_overhead) to measured
// runs: what a rank spends per iteration outside its micro-batches' compute and the
// communication, which the simulator would otherwise reduce to the optimizer's memory
// traffic.
//
// Observations: per measured (non-warm-up) iteration and DP rank of a run, the time
// from a rank's start to the end of its optimizer step minus its forward, backward,
// pipeline-wait, all-reduce and plan events (timeline_events.jsonl; warm-up flags from
// records.jsonl), the least over the DP rank's pipeline stages. What is left is drawing
// and packing the batch, the gradient norm and the optimizer step, and the untimed gaps
// between events: what the simulator has no model of. The plan is left out because the
// simulator times its own planner call. The least over the stages because the gradient
// norm sums over the pipeline inside the optimizer event: the stages that finished their
// backward first wait there for the last one, a wait the simulated pipeline already has.
// (The tied-embedding all-reduce, inside the all-reduce event, is in neither.)
// Fit: the mean over every observation of every run. The mean, not the median: the
// bubble fraction averages the DP wait, which takes every slow iteration in full (fit to
// runs the report does not flag as contended, runqueue_wait_pct: a shared machine's
// stalls would count too).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sb {

// One value per measured (iteration, DP rank) of the run folder.
std::vector<double> iteration_overhead_samples(const std::filesystem::path& run_dir);

struct IterationOverheadFit {
  double ms = 0;
  int64_t samples = 0;            // (iteration, DP rank) observations
  std::vector<std::string> runs;  // run folders they came from
};

// Every measured run under results_dir (measured_runs.h). Throws ConfigError naming
// json_path in manifest_file when the folder is missing or no run has a measured
// iteration with timeline events.
IterationOverheadFit fit_iteration_overhead_from_results(const std::filesystem::path& results_dir,
                                                         const std::string& manifest_file,
                                                         const std::string& json_path);

}  // namespace sb
