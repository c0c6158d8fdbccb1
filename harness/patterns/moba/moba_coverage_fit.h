#pragma once
// Fits the simulator's Zipf coverage exponent (coverage_model.h) to the routing-score
// coverage that real runs recorded, so that DST's floor in simulation comes from
// measured routing, not from an assumed exponent (docs/simulator.md).
//
// Observations, one per (micro-batch, layer) of every measured (non-warm-up) iteration
// of the runs' records.jsonl: the layer's effective budget layer_budgets[k][l] (rounded
// to the nearest integer), its coverage layer_coverage[k][l], and the sequence lengths
// microbatch_lengths[k] (records without them: one sequence of microbatch_tokens[k]).
// The backend averages C over every (head, query block) row of the micro-batch, so the
// model's value for packed lengths L_i is the mean of C(L_i, k) weighted by the query
// blocks of each sequence.
//
// Fit: the exponent s in [0, max_exponent] minimising the sum of squared coverage
// errors, by a grid of step 0.05 followed by golden-section refinement around the best
// grid point (to 1e-4).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/attention/patterns/moba/moba_gate.h"

namespace sb {

struct CoverageObservation {
  std::vector<int64_t> lengths;  // sequences of the micro-batch
  int64_t budget = 1;            // the layer's effective budget
  double coverage = 0;           // the layer's recorded C
};

struct CoverageFit {
  double exponent = 0;
  double rmse = 0;                   // root mean squared coverage error at the fit
  int64_t points = 0;                // observations used
  std::vector<std::string> runs;     // run folders the observations came from
};

// Observations of one run folder's records.jsonl (measured iterations; micro-batches
// without layer statistics are skipped).
std::vector<CoverageObservation> coverage_observations(const std::filesystem::path& records_file);

// The model's coverage of one observation at exponent s.
double modelled_coverage(const CoverageObservation& o, double exponent, int64_t block_size);

CoverageFit fit_coverage_exponent(const std::vector<CoverageObservation>& observations, int64_t block_size,
                                  double max_exponent = 4.0);

// Every measured run under `results_dir` (the folder itself, or its sub-folders, that
// hold records.jsonl and a context.json not marked simulated) whose resolved manifest
// uses MoBA with this block size and gate. Throws ConfigError naming `json_path` in
// `manifest_file` when the folder is missing or yields no observation.
CoverageFit fit_coverage_from_results(const std::filesystem::path& results_dir, int64_t block_size, MobaGate gate,
                                      const std::string& manifest_file, const std::string& json_path);

}  // namespace sb
