#pragma once
// The budget-policy interface: after batching, decide the attention budget (on the
// pattern's budget axis) of every micro-batch of the global batch. Policies are chosen by name in the manifest
// (methods[].budget): "fixed" (k0 everywhere) or "dst" (docs: sparsebalance.md 1.5).
// Both fill PlannedMicroBatch::predicted_ms when a latency predictor is available.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/balance/batch_plan.h"
#include "harness/balance/budget_estimator.h"
#include "common/option_names.h"
#include "kernels/attention/core/budget_axis.h"
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

// The budget axis (kernels/attention/core/budget_axis.h) as the policies treat it:
//   kKeyBlocks  the fixed budget is k0 = top_k; kNone plans the same way (the budgets go
//               unused);
//   kKeptKeys   the fixed budget is the pattern's own rule, whose kept keys differ from
//               sequence to sequence: the plan sends no budget (0) and predicts each
//               sequence at its reference r(L) (reference_budget_for_length: the
//               reference estimator's value for its length, an EMA per length bucket of
//               the kept keys the rule chose, reported by the layers; top_k before any
//               report). A budget k for a micro-batch is its longest sequence's; every
//               other packed sequence runs min(k, its own r(L)) (kept_keys_budgets).

// methods[].budget.
enum class BudgetKind { kFixed, kDst };
const OptionNames<BudgetKind>& budget_kind_options();  // "fixed" | "dst"

struct BudgetOptions {
  BudgetKind kind = BudgetKind::kFixed;
  BudgetAxis axis = BudgetAxis::kKeyBlocks;
  // kKeyBlocks: k0, the fixed budget and DST's reference budget. kKeptKeys: the kept keys
  // per query assumed for a length no layer has reported yet (the estimators' prior).
  int64_t top_k = 32;
  int64_t block_size = 256;    // kKeyBlocks: attention block size (for the blocks a sequence has)
  int64_t total_layers = 1;    // decoder layers over all stages
  DstOptions dst;
};

// The budget from which a sequence of `length` tokens attends to every earlier key, so
// that a larger one changes nothing: kKeyBlocks ceil(length / block_size); kKeptKeys the
// dense mean of kept keys per query, ceil((length + 1) / 2).
int64_t saturating_budget(const BudgetOptions& options, int64_t length);

// What the planner learns and a budget policy may read (each may be null; all must
// outlive the policy):
//   floor      DST's expected coverage-floor budget by length (dst_budget.h);
//   reference  kKeptKeys: the kept keys per query the pattern's own rule chooses, by
//              length (required by both policies on that axis).
struct BudgetEstimates {
  const BudgetEstimator* floor = nullptr;
  const BudgetEstimator* reference = nullptr;
};

// kKeptKeys: r(L), the reference estimator's kept keys for a sequence of `length` tokens,
// rounded, at most saturating_budget(length), within [k_min, k_max] when clamp_to_dst.
int64_t reference_budget_for_length(const BudgetOptions& options, const BudgetEstimator& reference, int64_t length,
                                    bool clamp_to_dst);
// kKeptKeys: the budget of each packed sequence (`lengths` in packing order) when the
// micro-batch's budget is k: k for its first longest sequence, min(k, r(L)) for the others.
std::vector<int64_t> kept_keys_budgets(const BudgetOptions& options, const BudgetEstimator& reference,
                                       const std::vector<int64_t>& lengths, int64_t k);

class BudgetPolicy {
 public:
  virtual ~BudgetPolicy() = default;
  virtual std::string name() const = 0;
  // sample_lengths: tokens of each sample of the global batch (plan positions index it).
  virtual void assign(GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths) = 0;
};

// predictor may be null for "fixed" (predicted_ms then stays unknown); "dst" needs one
// (std::invalid_argument otherwise), and the kKeptKeys axis needs estimates.reference.
std::unique_ptr<BudgetPolicy> make_budget_policy(const BudgetOptions& options,
                                                 const LatencyPredictor* predictor,
                                                 BudgetEstimates estimates = {});

}  // namespace sb
