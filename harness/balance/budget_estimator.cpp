#include "harness/balance/budget_estimator.h"

#include <stdexcept>
#include <string>

#include "common/length_bucket.h"

namespace sb {

BudgetEstimator::BudgetEstimator(BudgetEstimatorOptions options) : options_(options) {
  if (!(options_.ema_alpha > 0 && options_.ema_alpha <= 1)) {
    throw std::invalid_argument("budget estimator: ema_alpha must be in (0, 1]");
  }
  if (options_.default_budget < 1) throw std::invalid_argument("budget estimator: default budget must be >= 1");
}

int64_t BudgetEstimator::bucket_of(int64_t length) { return power_of_two_bucket(length); }

double BudgetEstimator::expected_budget(int64_t length) const {
  const auto it = ema_.find(bucket_of(length));
  return it == ema_.end() ? static_cast<double>(options_.default_budget) : it->second;
}

void BudgetEstimator::observe(int64_t length, double budget) {
  const int64_t bucket = bucket_of(length);
  const auto it = ema_.find(bucket);
  if (it == ema_.end() && options_.first_observation_replaces_default) {
    ema_[bucket] = budget;
    return;
  }
  const double previous = it == ema_.end() ? static_cast<double>(options_.default_budget) : it->second;
  ema_[bucket] = (1.0 - options_.ema_alpha) * previous + options_.ema_alpha * budget;
}

nlohmann::json BudgetEstimator::to_json() const {
  nlohmann::json buckets = nlohmann::json::object();
  for (const auto& [bucket, value] : ema_) buckets[std::to_string(bucket)] = value;
  return {{"ema_alpha", options_.ema_alpha}, {"default_budget", options_.default_budget}, {"buckets", buckets}};
}

void BudgetEstimator::load_json(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("buckets") || !state["buckets"].is_object()) {
    throw std::invalid_argument("budget estimator state: expected {\"buckets\": {...}}");
  }
  std::map<int64_t, double> loaded;
  for (const auto& [key, value] : state["buckets"].items()) {
    if (!value.is_number()) throw std::invalid_argument("budget estimator state: bucket " + key + " is not a number");
    loaded[std::stoll(key)] = value.get<double>();
  }
  ema_ = std::move(loaded);
}

}  // namespace sb
