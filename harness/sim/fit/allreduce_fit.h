#pragma once
// Fits the intra-node link's bandwidth (cluster.intra_node.fit_from) to the collectives of
// measured runs, so that a simulation of this machine communicates as fast as its
// collectives really did rather than at an assumed figure (on the 2-core CPU machines
// Gloo's all-reduce of qwen2-tiny's 3.3 MB took 3.9 ms on average, where 20 Gbit/s would
// give 1.5 ms). Two kinds of observation, both on the intra-node link:
//
// DP gradient all-reduces: per measured (non-warm-up) iteration and pipeline stage whose
// gradient group has two or more ranks (its DP ranks, each with all its CP ranks), the time from the
// last of them entering its all-reduce event
// to the last leaving it (timeline_events.jsonl): the collective's own duration, without
// the wait for the slowest rank, which the simulator produces itself. Each has the ring
// model's payload 2 (n - 1) / n x bytes (n ranks, bytes the stage's as the simulator
// sends them, stage_dp_allreduce_bytes of the run's manifest.resolved.json) and latency
// term 2 (n - 1) alpha
// (harness/sim/cluster_model.h), alpha the manifest's intra_node.alpha_us. With tied
// embeddings over a pipeline the first and last stages are left out: their all-reduce
// event also holds the embedding's all-reduce between them, a wait for the other stage.
//
// TP collectives (runs with tp > 1 and cp = 1; they give no DP observation: their
// all-reduce event also holds the TP group's sums of the tensors every TP rank holds
// whole): per measured
// iteration and micro-batch, the mean over
// the TP ranks of `tp_comm_ms` (records.jsonl: each rank's time inside its TP
// collectives, summed over the stages), with the traffic the simulator charges for that
// micro-batch (tensor_parallel_comm_model.h, forward and backward of every stage). The
// mean, waits for the other TP ranks included: a TP rank's micro-batch lasts its compute
// plus that time, and the simulator's TP ranks compute alike.
//
// Fit: bandwidth = sum of payloads / sum of (duration - latency term): the model then
// reproduces the measured collectives' total, hence their mean. The mean, not the median:
// the DP wait the bubble fraction averages takes every slow all-reduce in full.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/sim/tensor_parallel_comm_model.h"

namespace sb {

struct AllreduceObservation {
  double ms = 0;              // DP: last entry to last exit; TP: the micro-batch's collectives
  CollectiveTraffic traffic;  // what the model moves in that time, per rank
  bool tensor_parallel = false;  // a TP micro-batch (else a DP all-reduce)
};

// A DP ring all-reduce of `bytes` over `ranks` ranks taking `ms`. Throws
// std::invalid_argument for fewer than 2 ranks or no bytes.
AllreduceObservation ring_allreduce_observation(double ms, int64_t ranks, double bytes);

// One observation per measured (iteration, stage) of the run folder with >= 2 DP ranks,
// or, with tp > 1, one per measured (iteration, micro-batch). Throws ConfigError naming the
// file when the run's manifest.resolved.json does not parse.
std::vector<AllreduceObservation> allreduce_observations(const std::filesystem::path& run_dir);

struct AllreduceFit {
  double bandwidth_gbps = 0;
  double mean_ms = 0;             // mean measured duration
  int64_t samples = 0;            // DP (iteration, stage) and TP (iteration, micro-batch) observations
  int64_t tensor_parallel_samples = 0;  // of which TP
  std::vector<std::string> runs;  // run folders they came from
};

// The fit over `observations` (see above). Throws std::invalid_argument when there are
// none, or when the latency terms alone take as long as the measured all-reduces.
AllreduceFit fit_allreduce_bandwidth(const std::vector<AllreduceObservation>& observations, double alpha_us);

// Every measured run under results_dir (measured_runs.h). Throws ConfigError naming
// json_path in manifest_file when the folder is missing, when no run has a DP all-reduce
// or TP collectives in a measured iteration, or when alpha_us leaves no time for the
// payload.
AllreduceFit fit_allreduce_from_results(const std::filesystem::path& results_dir, double alpha_us,
                                        const std::string& manifest_file, const std::string& json_path);

}  // namespace sb
