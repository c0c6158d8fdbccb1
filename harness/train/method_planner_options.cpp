#include "harness/train/method_planner_options.h"

#include "models/qwen2/qwen2_config.h"

namespace sb {

BatchPlannerOptions method_planner_options(const Manifest& m, int64_t dp) {
  const MethodSection& method = m.methods.at(0);
  BatchPlannerOptions o;
  o.batching = method.batching;
  o.budget.kind = method.budget;
  // A pattern without a budget plans with BudgetOptions' defaults (its budgets go unused).
  const AttentionPattern& pattern = method.attention.pattern();
  if (pattern.budget_axis() != BudgetAxis::kNone) {
    o.budget.axis = pattern.budget_axis();
    o.budget.top_k = pattern.default_budget();
    o.budget.block_size = pattern.budget_unit_tokens();
  }
  o.budget.total_layers = m.model.config.num_hidden_layers;
  o.budget.dst = method.dst;
  o.sab_ema_alpha = method.sab.ema_alpha;
  o.latency_calibration_alpha = method.latency_calibration.enabled ? method.latency_calibration.ema_alpha : 0.0;
  o.dp = dp;
  o.max_tokens = m.train.max_tokens_per_microbatch;
  o.max_samples = m.train.max_samples_per_microbatch;
  return o;
}

}  // namespace sb
