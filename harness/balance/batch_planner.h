#pragma once
// Plans every global batch of a run: the batching policy (sequential | lbb | sab), then
// the budget policy (fixed | dst), with the latency predictor when the method has a
// profile. Keeps SAB's budget estimator and feeds it the budgets that ran, and, when the
// method asks for it, calibrates the predictor's micro-batch latency against the measured
// one (latency_calibration.h). Every rank owns one planner built from the same options
// and fed the same observations, so every rank computes the same plans.

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/balance/batching_policy.h"
#include "harness/balance/budget_estimator.h"
#include "harness/balance/budget_policy.h"
#include "harness/latency/latency_calibration.h"
#include "harness/latency/latency_predictor.h"

namespace sb {

struct BatchPlannerOptions {
  BatchingKind batching = BatchingKind::kSequential;
  BudgetOptions budget;       // budget.top_k is also SAB's default budget
  double sab_ema_alpha = 0.2;
  int64_t dp = 1;
  int64_t max_tokens = 4096;  // per micro-batch
  int64_t max_samples = 0;    // per micro-batch; 0 = no limit
  double latency_calibration_alpha = 0;  // EMA weight of the online calibration; 0 = off
};

class BatchPlanner {
 public:
  // predictor: null when the method has no latency profile (then sab and dst are errors:
  // std::invalid_argument).
  // With calibration the planner predicts with its own copy of the predictor, scaled by
  // its calibration; it holds a pointer to itself, hence neither copied nor moved.
  BatchPlanner(const BatchPlannerOptions& options, std::shared_ptr<const LatencyPredictor> predictor);
  BatchPlanner(const BatchPlanner&) = delete;
  BatchPlanner& operator=(const BatchPlanner&) = delete;

  // Throws std::invalid_argument for a sample longer than max_tokens (before planning).
  GlobalBatchPlan plan(const std::vector<int64_t>& sample_lengths);

  // After the iteration ran: realized_budgets[r][m] is the budget micro-batch m of rank r
  // ran with (its planned budget, or the mean effective budget over layers when the
  // backend reported one). Updates SAB's budget estimator (kept for every batching
  // policy, so that the state in a checkpoint never depends on which policy ran).
  // realized_floors (empty, or shaped as realized_budgets): the mean over layers of DST's
  // coverage-floor budget of each micro-batch, <= 0 where no floor was computed. Each
  // positive one updates DST's floor estimator at the micro-batch's longest sequence.
  // sample_budgets, sample_references (empty, or one per sample of the global batch, by
  // plan position): per sequence, the mean over layers of the budget it ran with and of
  // the budget the pattern's own rule chose (kept keys per query, which differ between
  // packed sequences), <= 0 where none was reported. A positive
  // sample_budgets entry replaces its micro-batch's realized budget for SAB's estimator;
  // each positive sample_references entry updates the reference estimator at the
  // sample's own length (budget_policy.h, kKeptKeys).
  void observe(const GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths,
               const std::vector<std::vector<double>>& realized_budgets,
               const std::vector<std::vector<double>>& realized_floors = {},
               const std::vector<double>& sample_budgets = {}, const std::vector<double>& sample_references = {});

  // After the iteration ran: measured_ms[r][m] is the measured latency of micro-batch m of
  // rank r (shaped as the plan; <= 0 where none). Updates the calibration, if on, from the
  // micro-batches the plan predicted. Call it before the next plan().
  void observe_latencies(const GlobalBatchPlan& plan, const std::vector<std::vector<double>>& measured_ms);
  // The calibration, when the method turned it on.
  const LatencyCalibration* calibration() const { return calibration_ ? &*calibration_ : nullptr; }

  // DST's anchor of the last plan (ms), or negative when not DST.
  double last_anchor_ms() const;

  nlohmann::json state() const;           // for checkpoints
  void load_state(const nlohmann::json& state);

  const BatchPlannerOptions& options() const { return options_; }
  const LatencyPredictor* predictor() const { return predictor_.get(); }

 private:
  BatchPlannerOptions options_;
  std::shared_ptr<const LatencyPredictor> predictor_;
  BudgetEstimator estimator_;
  BudgetEstimator floor_estimator_;  // DST's expected coverage floor (dst_budget.h)
  BudgetEstimator reference_estimator_;  // the pattern's own budget by length (kKeptKeys)
  std::optional<LatencyCalibration> calibration_;
  std::unique_ptr<BatchingPolicy> batching_;
  std::unique_ptr<BudgetPolicy> budget_;
};

}  // namespace sb
