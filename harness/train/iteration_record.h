#pragma once
// One line of records.jsonl: what one training iteration did and how long it took.
// Field definitions (docs: README "Metrics"; one definition each, here in code):
//   iter_ms              wall time from iteration start to the end of the optimizer step
//   microbatch_ms[m]     measured forward + backward time of micro-batch m, summed over stages
//   imbalance            max / mean of microbatch_ms over the global batch
//   per_stage_busy_ms[s] compute (forward + backward) time of pipeline stage s
//   per_stage_idle_ms[s] iter_ms - per_stage_busy_ms[s]
//   bubble_fraction      mean over stages of idle / iter_ms; bubble_fraction_max the max
//   balance_overhead_ms  time spent deciding the batching (and budgets) of the iteration
//   loss                 token mean of the cross-entropy over every predicted token of
//                        the global batch (sum of token losses / loss_tokens)
// Fields that are not meaningful for a run (e.g. budgets with dense attention) are
// absent from the JSON, never filled with made-up values.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace sb {

struct IterationRecord {
  int64_t iteration = 0;
  bool warmup = false;  // excluded from medians and rates
  double loss = 0;
  int64_t loss_tokens = 0;
  int64_t tokens = 0;  // all tokens processed (prompt included)
  int64_t sequences = 0;
  double lr = 0;
  double grad_norm = 0;  // global L2 norm before clipping
  double iter_ms = 0;
  std::vector<double> microbatch_ms;
  std::vector<int64_t> microbatch_tokens;
  double imbalance = 0;
  std::vector<double> per_stage_busy_ms;
  std::vector<double> per_stage_idle_ms;
  double bubble_fraction = 0;
  double bubble_fraction_max = 0;
  double balance_overhead_ms = 0;

  // Fills imbalance, per-stage busy/idle and bubble fractions from iter_ms and
  // microbatch_ms for a single pipeline stage.
  void derive_single_stage_metrics();
};

nlohmann::json iteration_record_to_json(const IterationRecord& record);
IterationRecord iteration_record_from_json(const nlohmann::json& json);

// max / mean of the values; 1 for an empty list or a zero mean.
double max_over_mean(const std::vector<double>& values);

}  // namespace sb
