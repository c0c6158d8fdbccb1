#pragma once
// SAB, sparsity-aware batching (docs: sparsebalance.md 1.4): each sample's cost is its
// predicted latency (the latency predictor, summed over all layers, at the budget the
// BudgetEstimator expects for its length); then the two-stage LPT of two_stage_lpt.h
// balances predicted latency across DP ranks and bin-packs each rank's samples into
// micro-batches with the max-tokens capacity.

#include "harness/balance/batching_policy.h"
#include "harness/balance/budget_estimator.h"
#include "harness/latency/latency_predictor.h"

namespace sb {

class SabBatching : public BatchingPolicy {
 public:
  // predictor and estimator must outlive the policy. total_layers: decoder layers of the
  // model (all stages).
  SabBatching(const LatencyPredictor& predictor, const BudgetEstimator& estimator, int64_t total_layers);
  std::string name() const override { return "sab"; }
  GlobalBatchPlan plan(const BatchingInput& input) override;

  // The cost SAB gives one sample of this length.
  double sample_cost_ms(int64_t length) const;

 private:
  // The same for the sample of a one-sequence vector (plan() reuses one for every sample).
  double sample_cost_ms(const std::vector<int64_t>& alone) const;

  const LatencyPredictor& predictor_;
  const BudgetEstimator& estimator_;
  int64_t total_layers_;
};

}  // namespace sb
