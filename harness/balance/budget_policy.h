#pragma once
// The budget-policy interface: after batching, decide the attention budget (MoBA top-k)
// of every micro-batch of the global batch. Policies are chosen by name in the manifest
// (methods[].budget): "fixed" (k0 everywhere) or "dst" (docs: sparsebalance.md 1.5).
// Both fill PlannedMicroBatch::predicted_ms when a latency predictor is available.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/balance/batch_plan.h"
#include "harness/balance/budget_estimator.h"
#include "common/option_names.h"
#include "harness/latency/latency_predictor.h"

namespace sb {

enum class DstAnchor { kMean, kMin, kMax };
const OptionNames<DstAnchor>& dst_anchor_options();  // "mean" | "min" | "max"

// Which feasible budget a bottleneck micro-batch takes (see dst_budget.h).
enum class DstBottleneckRule { kSmallest, kLargest };
const OptionNames<DstBottleneckRule>& dst_bottleneck_options();  // "smallest" | "largest"

// What happens to micro-batches predicted below the anchor (see dst_budget.h).
enum class DstRaiseRule { kAnchor, kNone, kDpSlack };
const OptionNames<DstRaiseRule>& dst_raise_options();  // "anchor" | "none" | "dp_slack"

struct DstOptions {
  DstAnchor anchor = DstAnchor::kMean;
  double p = 0.1;       // coverage may fall to (1 - p) * C(k0) at most
  int64_t k_min = 1;    // budgets never below
  int64_t k_max = 64;   // budgets never above
  DstBottleneckRule bottleneck = DstBottleneckRule::kSmallest;
  DstRaiseRule raise = DstRaiseRule::kAnchor;
};

// methods[].budget.
enum class BudgetKind { kFixed, kDst };
const OptionNames<BudgetKind>& budget_kind_options();  // "fixed" | "dst"

struct BudgetOptions {
  BudgetKind kind = BudgetKind::kFixed;
  int64_t top_k = 32;          // k0: the fixed budget, and DST's reference budget
  int64_t block_size = 256;    // attention block size (for the blocks a sequence has)
  int64_t total_layers = 1;    // decoder layers over all stages
  DstOptions dst;
};

class BudgetPolicy {
 public:
  virtual ~BudgetPolicy() = default;
  virtual std::string name() const = 0;
  // sample_lengths: tokens of each sample of the global batch (plan positions index it).
  virtual void assign(GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths) = 0;
};

// predictor may be null for "fixed" (predicted_ms then stays unknown); "dst" needs one
// (std::invalid_argument otherwise). floor_estimate (optional, "dst" only): the expected
// coverage-floor budget by length (see dst_budget.h). Both must outlive the policy.
std::unique_ptr<BudgetPolicy> make_budget_policy(const BudgetOptions& options,
                                                 const LatencyPredictor* predictor,
                                                 const BudgetEstimator* floor_estimate = nullptr);

}  // namespace sb
