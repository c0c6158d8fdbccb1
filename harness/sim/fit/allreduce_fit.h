#pragma once
// Fits the intra-node link's bandwidth (cluster.intra_node.fit_from) to the DP gradient
// all-reduces of measured runs, so that a simulation of this machine communicates as
// fast as its collectives really did rather than at an assumed figure (on the 2-core
// CPU machines Gloo's all-reduce of qwen2-tiny's 3.3 MB took 3.9 ms on average, where
// 20 Gbit/s would give 1.5 ms).
//
// Observations: per measured (non-warm-up) iteration and pipeline stage whose gradient
// group has two or more ranks (its DP ranks, each with all its CP ranks), the time from the
// last of them entering its all-reduce event
// to the last leaving it (timeline_events.jsonl): the collective's own duration, without
// the wait for the slowest rank, which the simulator produces itself. Each has the ring
// model's payload 2 (n - 1) / n x bytes (n ranks, bytes the stage's as the simulator
// sends them, stage_dp_allreduce_bytes of the run's manifest.resolved.json) and latency
// term 2 (n - 1) alpha
// (harness/sim/cluster_model.h), alpha the manifest's intra_node.alpha_us. With tied
// embeddings over a pipeline the first and last stages are left out: their all-reduce
// event also holds the embedding's all-reduce between them, a wait for the other stage.
// Fit: bandwidth = sum of payloads / sum of (duration - latency term): the model then
// reproduces the measured all-reduces' total, hence their mean. The mean, not the median:
// the DP wait the bubble fraction averages takes every slow all-reduce in full.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sb {

struct AllreduceObservation {
  double ms = 0;             // last entry to last exit
  int64_t ranks = 0;         // ranks in the ring (DP x CP)
  double bytes = 0;          // the stage's gradient bytes
};

// One observation per measured (iteration, stage) of the run folder with >= 2 DP ranks.
// Throws ConfigError naming the file when the run's manifest.resolved.json does not parse.
std::vector<AllreduceObservation> allreduce_observations(const std::filesystem::path& run_dir);

struct AllreduceFit {
  double bandwidth_gbps = 0;
  double mean_ms = 0;             // mean measured duration
  int64_t samples = 0;            // (iteration, stage) observations
  std::vector<std::string> runs;  // run folders they came from
};

// The fit over `observations` (see above). Throws std::invalid_argument when there are
// none, or when the latency terms alone take as long as the measured all-reduces.
AllreduceFit fit_allreduce_bandwidth(const std::vector<AllreduceObservation>& observations, double alpha_us);

// Every measured run under results_dir (measured_runs.h). Throws ConfigError naming
// json_path in manifest_file when the folder is missing, when no run has a DP all-reduce
// in a measured iteration, or when alpha_us leaves no time for the payload.
AllreduceFit fit_allreduce_from_results(const std::filesystem::path& results_dir, double alpha_us,
                                        const std::string& manifest_file, const std::string& json_path);

}  // namespace sb
