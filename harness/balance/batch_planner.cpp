#include "harness/balance/batch_planner.h"

#include <algorithm>
#include <stdexcept>

#include "harness/balance/dst_budget.h"

namespace sb {
namespace {

// On the kept-keys axis the estimators start from the pattern's prior, a guess rather than a
// budget that ran: a bucket's first report replaces it (budget_estimator.h).
bool guessed_prior(const BatchPlannerOptions& options) { return options.budget.axis == BudgetAxis::kKeptKeys; }

}  // namespace

BatchPlanner::BatchPlanner(const BatchPlannerOptions& options,
                           std::shared_ptr<const LatencyPredictor> predictor)
    : options_(options),
      predictor_(std::move(predictor)),
      estimator_(BudgetEstimatorOptions{options.sab_ema_alpha, options.budget.top_k, guessed_prior(options)}),
      floor_estimator_(BudgetEstimatorOptions{options.sab_ema_alpha,
                                              DstBudget::floor_prior(options.budget.top_k, options.budget.dst.p),
                                              guessed_prior(options)}),
      reference_estimator_(BudgetEstimatorOptions{options.sab_ema_alpha, options.budget.top_k, true}) {
  if (options_.latency_calibration_alpha > 0 && predictor_) {
    calibration_.emplace(options_.latency_calibration_alpha);
    auto calibrated = std::make_shared<LatencyPredictor>(*predictor_);
    calibrated->set_microbatch_scale([this](int64_t tokens) { return calibration_->factor(tokens); });
    predictor_ = std::move(calibrated);
  }
  BatchingDependencies dependencies{predictor_.get(), &estimator_, options_.budget.total_layers};
  batching_ = make_batching_policy(options_.batching, dependencies);
  budget_ = make_budget_policy(options_.budget, predictor_.get(), BudgetEstimates{&floor_estimator_, &reference_estimator_});
}

GlobalBatchPlan BatchPlanner::plan(const std::vector<int64_t>& sample_lengths) {
  GlobalBatchPlan plan = batching_->plan(
      BatchingInput{sample_lengths, options_.dp, options_.max_tokens, options_.max_samples});
  budget_->assign(plan, sample_lengths);
  return plan;
}

void BatchPlanner::observe(const GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths,
                           const std::vector<std::vector<double>>& realized_budgets,
                           const std::vector<std::vector<double>>& realized_floors,
                           const std::vector<double>& sample_budgets, const std::vector<double>& sample_references) {
  if (realized_budgets.size() != plan.ranks.size()) {
    throw std::invalid_argument("BatchPlanner::observe: one budget list per DP rank needed");
  }
  if (!realized_floors.empty() && realized_floors.size() != plan.ranks.size()) {
    throw std::invalid_argument("BatchPlanner::observe: one floor list per DP rank needed");
  }
  for (const std::vector<double>* per_sample : {&sample_budgets, &sample_references}) {
    if (!per_sample->empty() && per_sample->size() != sample_lengths.size()) {
      throw std::invalid_argument("BatchPlanner::observe: one per-sequence value per sample needed");
    }
  }
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    if (realized_budgets[r].size() != plan.ranks[r].size()) {
      throw std::invalid_argument("BatchPlanner::observe: one budget per micro-batch needed");
    }
    for (size_t m = 0; m < plan.ranks[r].size(); ++m) {
      int64_t longest = 0;
      for (int64_t s : plan.ranks[r][m].samples) {
        const auto i = static_cast<size_t>(s);
        const bool own_budget = !sample_budgets.empty() && sample_budgets[i] > 0;
        estimator_.observe(sample_lengths.at(i), own_budget ? sample_budgets[i] : realized_budgets[r][m]);
        if (!sample_references.empty() && sample_references[i] > 0) {
          reference_estimator_.observe(sample_lengths.at(i), sample_references[i]);
        }
        longest = std::max(longest, sample_lengths.at(i));
      }
      if (realized_floors.empty()) continue;
      if (realized_floors[r].size() != plan.ranks[r].size()) {
        throw std::invalid_argument("BatchPlanner::observe: one floor per micro-batch needed");
      }
      if (realized_floors[r][m] > 0) floor_estimator_.observe(longest, realized_floors[r][m]);
    }
  }
}

void BatchPlanner::observe_latencies(const GlobalBatchPlan& plan, const std::vector<std::vector<double>>& measured_ms) {
  if (!calibration_) return;
  if (measured_ms.size() != plan.ranks.size()) {
    throw std::invalid_argument("BatchPlanner::observe_latencies: one latency list per DP rank needed");
  }
  std::vector<LatencyObservation> iteration;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    if (measured_ms[r].size() != plan.ranks[r].size()) {
      throw std::invalid_argument("BatchPlanner::observe_latencies: one latency per micro-batch needed");
    }
    for (size_t m = 0; m < plan.ranks[r].size(); ++m) {
      const PlannedMicroBatch& mb = plan.ranks[r][m];
      if (mb.predicted_ms <= 0) continue;
      // The plan predicted with the factor the calibration still holds: undo it.
      iteration.push_back({mb.tokens, mb.predicted_ms / calibration_->factor(mb.tokens), measured_ms[r][m]});
    }
  }
  calibration_->observe(iteration);
}

double BatchPlanner::last_anchor_ms() const {
  const auto* dst = dynamic_cast<const DstBudget*>(budget_.get());
  return dst != nullptr ? dst->last_anchor_ms() : -1.0;
}

nlohmann::json BatchPlanner::state() const {
  nlohmann::json state{{"budget_estimator", estimator_.to_json()},
                       {"floor_estimator", floor_estimator_.to_json()},
                       {"reference_estimator", reference_estimator_.to_json()}};
  if (calibration_) state["latency_calibration"] = calibration_->to_json();
  return state;
}

void BatchPlanner::load_state(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("budget_estimator")) {
    throw std::invalid_argument("batch planner state: missing budget_estimator");
  }
  estimator_.load_json(state["budget_estimator"]);
  // Checkpoints written before the floor estimator existed resume from its prior.
  if (state.contains("floor_estimator")) floor_estimator_.load_json(state["floor_estimator"]);
  if (state.contains("reference_estimator")) reference_estimator_.load_json(state["reference_estimator"]);
  // A calibration resumes when both the state and this run have one; otherwise it starts
  // from its prior (a checkpoint of a run without calibration).
  if (calibration_ && state.contains("latency_calibration")) calibration_->load_json(state["latency_calibration"]);
}

}  // namespace sb
