#pragma once
// SAB's lightweight sparsity estimation (docs: sparsebalance.md 1.4): a sample's
// expected attention budget is an exponential moving average of the budgets recently
// chosen for sequences of its length bucket. [our rule]:
//   - buckets are powers of two: bucket(L) = floor(log2(L)) (L >= 1);
//   - an empty bucket's estimate is the default budget k0;
//   - after each iteration every trained sample updates its bucket:
//       e <- (1 - alpha) * e + alpha * k, k = the budget its micro-batch ran with
//     (the mean over layers of the effective budget when the backend reported it);
//   - alpha = ema_alpha (default 0.2);
//   - with first_observation_replaces_default, a bucket's first observation is its
//     estimate (the default was a guess, not a budget that ran: the kept-keys axis's
//     prior, budget_policy.h).
// The state is part of training checkpoints (to_json / from_json).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>

namespace sb {

struct BudgetEstimatorOptions {
  double ema_alpha = 0.2;
  int64_t default_budget = 32;
  bool first_observation_replaces_default = false;
};

class BudgetEstimator {
 public:
  explicit BudgetEstimator(BudgetEstimatorOptions options);

  static int64_t bucket_of(int64_t length);
  double expected_budget(int64_t length) const;
  void observe(int64_t length, double budget);

  nlohmann::json to_json() const;
  // Replaces the state; throws std::invalid_argument for a malformed state.
  void load_json(const nlohmann::json& state);

  const BudgetEstimatorOptions& options() const { return options_; }

 private:
  BudgetEstimatorOptions options_;
  std::map<int64_t, double> ema_;  // bucket -> estimate
};

}  // namespace sb
