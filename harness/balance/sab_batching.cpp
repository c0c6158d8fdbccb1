#include "harness/balance/sab_batching.h"

#include <cmath>

#include "harness/balance/two_stage_lpt.h"

namespace sb {

SabBatching::SabBatching(const LatencyPredictor& predictor, const BudgetEstimator& estimator,
                         int64_t total_layers)
    : predictor_(predictor), estimator_(estimator), total_layers_(total_layers) {}

double SabBatching::sample_cost_ms(int64_t length) const {
  const int64_t budget = std::llround(estimator_.expected_budget(length));
  return predictor_.microbatch_ms({length}, budget, total_layers_);
}

GlobalBatchPlan SabBatching::plan(const BatchingInput& input) {
  check_batching_input(input);
  std::vector<double> costs;
  costs.reserve(input.sample_lengths.size());
  for (int64_t length : input.sample_lengths) costs.push_back(sample_cost_ms(length));
  return plan_two_stage_lpt(input, costs);
}

}  // namespace sb
