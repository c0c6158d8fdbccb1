#pragma once
// The manifest blocks only `sparsebalance simulate` reads (the real runner ignores them;
// docs/simulator.md):
//
//   "cluster": {"preset": "h200" | "h20" | "a100",      the defaults below
//               "gpus_per_node": 8,
//               "intra_node": {"alpha_us": 3, "bandwidth_gbps": 3600},   NVLink/NVSwitch
//                             (or "fit_from": "results dir": the bandwidth fitted to
//                             measured runs' DP all-reduces, harness/sim/fit/allreduce_fit.h)
//               "inter_node": {"alpha_us": 10, "bandwidth_gbps": 400},   InfiniBand, per GPU
//               "memory_bandwidth_gbps": 38400,                         HBM (optimizer step)
//               "device": "h200"}                  the analytic profile's default device
//   "simulation": {"profile": {"analytic": {"device": "h200", "matmul_efficiency": 0.5,
//                                           "attention_efficiency": 0.3}}
//                             | {"file": "profiles/cpu.json"},
//                  "coverage": {"model": "zipf", "exponent": 1.0 | "fit_from": "results dir",
//                               "rule_keys": 0, "spread": 0},         patterns with an own rule
//                  "latency_noise": {"sigma": 0.08, "rank_sigma": 0.05 | "fit_from": "results dir"},
//                  "iteration_overhead": {"ms": 25 | "fit_from": "results dir"},
//                  "ring_compute": {"factor": 1.0, "step_ms_per_token": 0 | "fit_from": "results dir"},
//                                                                                     cp > 1
//                  "forward_fraction": 0.3333,
//                  "optimizer_ms": -1}
//
// Bandwidths are in gigaBITS per second (Gbit/s, as link speeds are quoted), latencies
// in microseconds. Preset figures are nominal data-sheet numbers, assumptions of this
// project (see cluster_preset in simulation_spec.cpp for their sources); real links
// reach less, so simulated communication is optimistic.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct LinkSection {
  double alpha_us = 0;        // per-message latency (microseconds)
  double bandwidth_gbps = 0;  // Gbit/s per direction per GPU
  // intra_node only: a folder of measured runs (all ranks on one machine) whose DP
  // all-reduces `simulate` fits bandwidth_gbps to, alpha_us kept (a resolved manifest
  // carries both: the folder and the bandwidth fitted from it).
  std::string fit_from;
};

struct ClusterSection {
  std::string preset = "h200";
  int64_t gpus_per_node = 8;
  LinkSection intra_node;
  LinkSection inter_node;
  double memory_bandwidth_gbps = 0;  // HBM, Gbit/s (the optimizer step's memory model)
  std::string device = "h200";       // device_throughput_preset name (analytic profiles)
};

// The defaults of a preset (std::invalid_argument for an unknown name).
ClusterSection cluster_preset(const std::string& name);
std::vector<std::string> cluster_preset_names();  // "h200", "h20", "a100"

struct AnalyticProfileSection {
  std::string device;  // "" in the file: the cluster's device (resolved)
  double matmul_efficiency = 0;     // 0 in the file: the device preset's (resolved)
  double attention_efficiency = 0;  // 0 in the file: the device preset's (resolved)
};

// Where simulated compute times come from: each method's own `profile` (a file), one
// profile file for every method ({"file": ...}), or make_analytic_profile ({"analytic": ...}).
enum class SimProfileSource { kMethod, kFile, kAnalytic };

struct SimProfileSection {
  SimProfileSource source = SimProfileSource::kMethod;
  std::string file;  // kFile (absolute once resolved)
  AnalyticProfileSection analytic;
};

// The coverage model of the method's attention pattern, for DST's floor and the budgets
// its rule keeps (harness/patterns/attention_simulation.h; each pattern's model reads the
// settings it has).
struct CoverageSection {
  std::string model = "zipf";
  double exponent = 1.0;
  // A results folder of measured runs (absolute once resolved; relative paths are from
  // the manifest's folder): when set, `simulate` fits the pattern's settings to what they
  // recorded (AttentionPatternPlugin::fit_coverage) and uses them instead of the given ones.
  std::string fit_from;
  // A pattern with a top_k rule of its own: the keys a late query keeps under the rule
  // (0: the default from the method's counts).
  int64_t rule_keys = 0;
  // A pattern with a rule of its own: how a sequence's kept keys spread over its queries, 0
  // (the same extra keys for every query) .. 1 (a share of the past growing with the
  // position); fitted to measured context-parallel runs' per-rank work when fit_from holds some.
  double spread = 0.0;
};

// Random scatter of real micro-batch times around their predictions
// (harness/sim/latency_noise.h). Absent from the manifest: sigma 0, every micro-batch
// takes exactly its prediction.
struct LatencyNoiseSection {
  double sigma = 0;       // each micro-batch's own scatter
  double rank_sigma = 0;  // shared by a DP rank's micro-batches in one iteration
  // A results folder of measured runs (absolute once resolved): when set, `simulate`
  // fits sigma and rank_sigma to their predicted and measured micro-batch times
  // (harness/sim/fit/latency_noise_fit.h) and uses them instead of the given values.
  std::string fit_from;
  bool enabled() const { return sigma > 0 || rank_sigma > 0 || !fit_from.empty(); }
};

// What a rank spends per iteration outside its micro-batches' compute and the
// communication: drawing and packing the batch, the gradient norm and the optimizer step,
// and the gaps between them (harness/sim/fit/iteration_overhead_fit.h).
// Absent from the manifest: only the optimizer, as optimizer_ms says.
struct IterationOverheadSection {
  double ms = -1;  // per rank and iteration; negative: not given (fit_from gives it)
  // A results folder of measured runs (absolute once resolved): when set, `simulate`
  // takes ms from their timelines and uses it instead of `ms`.
  std::string fit_from;
  bool enabled() const { return ms >= 0 || !fit_from.empty(); }
};

// Context parallelism: what the ring's kernels cost against the profile's single-device
// attention term for the same (query, key) pairs (harness/sim/cp_stage_compute.h).
struct RingComputeSection {
  double factor = 1.0;             // on the profile's attention term, split by pairs
  double step_ms_per_token = 0.0;  // per ring step, layer and query token (forward + backward)
  // A results folder of measured CP runs (absolute once resolved): when set, `simulate`
  // fits both to their compute (harness/sim/fit/ring_compute_fit.h).
  std::string fit_from;
};

struct SimulationSection {
  SimProfileSection profile;
  RingComputeSection ring_compute;
  CoverageSection coverage;
  LatencyNoiseSection latency_noise;
  IterationOverheadSection iteration_overhead;
  // Share of a micro-batch's forward + backward time spent in the forward (the profile
  // measures the sum). Default 1/3: backward = 2 x forward for matmuls.
  double forward_fraction = 1.0 / 3.0;
  // Optimizer step per rank (ms); negative: the memory-bandwidth model of
  // harness/sim/cluster_model.h. Replaced by iteration_overhead when that is given
  // (it includes the optimizer step); the manifest may not give both.
  double optimizer_ms = -1;
};

// path: "$.cluster" / "$.simulation"; file: the manifest (errors, relative paths).
ClusterSection parse_cluster_section(const nlohmann::json& j, const std::string& path, const std::string& file);
SimulationSection parse_simulation_section(const nlohmann::json& j, const std::string& path, const std::string& file,
                                           const ClusterSection* cluster);
nlohmann::json cluster_section_to_json(const ClusterSection& cluster);
nlohmann::json simulation_section_to_json(const SimulationSection& simulation);

}  // namespace sb
