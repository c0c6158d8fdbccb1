#pragma once
// simulation.ring_compute.fit_from: the ring compute factor of
// harness/sim/cp_stage_compute.h fitted to measured context-parallel runs.
//
// Per measured (non-warm-up) iteration, micro-batch and CP rank of a run with cp > 1
// whose attention keeps what the simulated run's keeps (AttentionPattern::same_selection):
//   measured = the CP rank's forward and backward events of the micro-batch on every
//              stage, less the ring_wait events inside them (which hold every wait of the
//              ring, MoBA's block-means all-reduce included: ring_attention.h): its
//              compute, without the waits the ring model makes itself
//   model    = cp_stage_compute on the run's own manifest (layout, cp, model) with the
//              simulated run's profile, summed over the stages:
//              other_ms + factor x attention_unit_ms + step_ms_per_token x step_tokens
// factor and step_ms_per_token minimise the squared error of measured - other_ms over all
// observations (least squares through the origin in two unknowns; when the unconstrained
// solution has a term <= 0, the step term is 0 and the pair term is refitted alone, an
// error if that is not positive either: the runs' ring compute must grow with its pairs). The
// waits and the imbalance stay the ring model's. Each micro-batch's budgets are what its
// record holds, as the pattern's simulation model reads them
// (AttentionSimulation::recorded_budgets), its ring work the model's.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/latency/latency_predictor.h"
#include "harness/patterns/attention_simulation.h"
#include "kernels/attention/patterns/attention_pattern.h"

namespace sb {

struct RingComputeObservation {
  double measured_ms = 0;
  double other_ms = 0;
  double attention_unit_ms = 0;
  double step_tokens = 0;
};

// One run folder's observations; empty unless it ran with cp > 1 and a pattern that keeps
// what `attention` keeps. simulation: the simulated run's model of that pattern (its
// settings count the ring work).
std::vector<RingComputeObservation> ring_compute_observations(const std::filesystem::path& run_dir,
                                                              const LatencyPredictor& predictor,
                                                              const AttentionOptions& attention,
                                                              const AttentionSimulation& simulation);

struct RingComputeFit {
  double factor = 1.0;
  double step_ms_per_token = 0.0;
  double rmse_pct = 0;            // root mean square of (model / measured - 1), in %
  int64_t samples = 0;            // (micro-batch, CP rank) observations
  std::vector<std::string> runs;  // run folders they came from
};

// Throws std::invalid_argument without observations or when the model's other terms
// alone take as long as the measured compute (nothing is left for the ring).
RingComputeFit fit_ring_compute(const std::vector<RingComputeObservation>& observations);

// Over every measured run under results_dir; ConfigError naming json_path in
// manifest_file when none has a usable micro-batch.
RingComputeFit fit_ring_compute_from_results(const std::filesystem::path& results_dir,
                                             const LatencyPredictor& predictor, const AttentionOptions& attention,
                                             const AttentionSimulation& simulation, const std::string& manifest_file,
                                             const std::string& json_path);

}  // namespace sb
