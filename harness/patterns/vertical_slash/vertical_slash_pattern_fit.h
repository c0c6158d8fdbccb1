#pragma once
// Fits the simulator's vertical-slash pattern model (vertical_slash_pattern_model.h) to
// what measured runs of the same pattern recorded (docs/simulator.md, item 4).
//
// Observations from every measured (non-warm-up) iteration of a run's records.jsonl:
//   coverage  one per (micro-batch k, layer l): the sequences' lengths, each sequence's
//             kept keys per query in that layer, and the layer's coverage
//             layer_coverage[k][l] (the backend's mean over the sequences and heads).
//             A record keeps a sequence's kept keys as its mean over the layers
//             (sequence_budgets[k][s]) and a layer's as its mean over the sequences
//             (layer_budgets[k][l]); the observation scales the first by layer l's share,
//             layer_budgets[k][l] / mean over s of sequence_budgets[k][s] (without
//             sequence_budgets every sequence gets the layer's mean).
//   rule      one per packed sequence: its length and the kept keys per query the
//             pattern's own rule chose, sequence_reference_budgets[k][s].
//   work      runs with context parallelism: one per micro-batch, its sequences, their
//             kept keys (sequence_budgets, rounded), the run's CP layout, and each CP
//             rank's share of the kept pairs it computed (cp_kept_pairs[k]).
//
// Fits, in this order:
//   spread     (with work observations; otherwise the rule's is kept) u in [0, 1]
//              minimising the squared error of the ring work model's per-rank shares
//              (ring_vertical_slash_work.h) against the measured ones (grid of 0.05, then
//              golden section);
//   rule_keys  (top_k rules only) the integer in [forced, most] (no further than the
//              longest observed sequence) minimising the squared error of K(L, rule_keys
//              - forced) against the recorded reference kept keys, by scanning every one;
//   exponent   s in [0, 4] minimising the mean squared coverage error, each observation's
//              model value the mean over its sequences of C(L, e) at the level e whose
//              K(L, e) is the sequence's kept keys; for top_p rules plus the mean squared
//              relative error of the rule's kept keys (the exponent sets top_p's level:
//              coverage alone cannot tell exponents apart where the kept keys are nearly
//              dense). Grid of 0.05, then golden section.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern_model.h"
#include "kernels/attention/ring/cp_sharding.h"

namespace sb {

struct VerticalSlashCoverageObservation {
  std::vector<int64_t> lengths;
  std::vector<double> kept_keys;  // per sequence, in this layer
  double coverage = 0;
};

struct VerticalSlashRuleObservation {
  int64_t length = 0;
  double kept_keys = 0;
};

struct VerticalSlashWorkObservation {
  std::vector<int64_t> lengths;
  std::vector<int64_t> kept_keys;  // per sequence
  int64_t cp = 1;
  CpLayout layout;
  int64_t sink = 0, window = 1;
  std::vector<double> measured_share;  // per CP rank, summing to 1
};

struct VerticalSlashObservations {
  std::vector<VerticalSlashCoverageObservation> coverage;
  std::vector<VerticalSlashRuleObservation> rule;
  std::vector<VerticalSlashWorkObservation> work;
};

struct VerticalSlashPatternFit {
  double exponent = 0;
  double coverage_rmse = 0;
  int64_t coverage_points = 0;
  int64_t rule_keys = 0;  // 0 when the rule is top_p (nothing to fit)
  double rule_rmse = 0;   // kept keys per query
  int64_t rule_points = 0;
  double spread = 0;           // the rule's when nothing was fitted
  bool spread_fitted = false;
  double spread_rmse = 0;      // per-rank share of the kept pairs
  int64_t spread_points = 0;   // micro-batches
  std::vector<std::string> runs;
};

// One run folder's observations (work ones only when its resolved manifest has cp > 1;
// ConfigError when that manifest does not parse).
VerticalSlashObservations vertical_slash_observations(const std::filesystem::path& run_dir);
// The same with the run's resolved manifest already read (an empty object: none).
VerticalSlashObservations vertical_slash_observations(const std::filesystem::path& run_dir,
                                                      const nlohmann::json& resolved);

// The model's coverage of one observation (the mean over its sequences).
double modelled_vertical_slash_coverage(const VerticalSlashPatternModel& model,
                                        const VerticalSlashCoverageObservation& o);

// The model's per-rank shares of one work observation at this spread.
std::vector<double> modelled_vertical_slash_work_share(const VerticalSlashWorkObservation& o, double spread);

// `rule` gives the forced and most keys, last_queries, whether the rule is top_k and the
// spread used without work observations (its rule_keys are replaced by the fit). Throws
// std::invalid_argument without coverage observations, or without rule observations for
// a top_k or top_p rule.
VerticalSlashPatternFit fit_vertical_slash_pattern(const VerticalSlashObservations& observations,
                                                   VerticalSlashPatternRule rule);

// Every measured run under results_dir whose resolved manifest's first method runs
// vertical_slash attention with this pattern (equal VerticalSlashParams; expected_keys,
// the planner's prior, may differ). Throws ConfigError naming `json_path` in
// `manifest_file` when none does, or when their records lack what the fits read (naming
// it).
VerticalSlashPatternFit fit_vertical_slash_pattern_from_results(const std::filesystem::path& results_dir,
                                                                const VerticalSlashParams& pattern,
                                                                const VerticalSlashPatternRule& rule,
                                                                const std::string& manifest_file,
                                                                const std::string& json_path);

}  // namespace sb
