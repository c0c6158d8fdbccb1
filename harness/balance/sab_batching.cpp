#include "harness/balance/sab_batching.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "harness/balance/two_stage_lpt.h"

namespace sb {
namespace {

// Samples per block of the parallel cost pass.
constexpr int64_t kCostBlock = 1024;

}  // namespace

SabBatching::SabBatching(const LatencyPredictor& predictor, const BudgetEstimator& estimator,
                         int64_t total_layers)
    : predictor_(predictor), estimator_(estimator), total_layers_(total_layers) {}

double SabBatching::sample_cost_ms(int64_t length) const {
  std::vector<int64_t> alone{length};
  return sample_cost_ms(alone);
}

double SabBatching::sample_cost_ms(const std::vector<int64_t>& alone) const {
  const int64_t budget = std::llround(estimator_.expected_budget(alone.front()));
  return predictor_.microbatch_ms(alone, budget, total_layers_);
}

GlobalBatchPlan SabBatching::plan(const BatchingInput& input) {
  check_batching_input(input);
  const std::vector<int64_t>& lengths = input.sample_lengths;
  std::vector<double> costs(lengths.size(), 0.0);
  // Each sample's cost on the intra-op threads, in blocks (same values in any order).
  at::parallel_for(0, static_cast<int64_t>(lengths.size()), kCostBlock, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> alone(1);  // one vector for the block's one-sequence micro-batches
    for (int64_t i = begin; i < end; ++i) {
      alone.front() = lengths[static_cast<size_t>(i)];
      costs[static_cast<size_t>(i)] = sample_cost_ms(alone);
    }
  });
  return plan_two_stage_lpt(input, costs);
}

}  // namespace sb
