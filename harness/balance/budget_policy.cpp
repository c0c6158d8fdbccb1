#include "harness/balance/budget_policy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "harness/balance/dst_budget.h"
#include "common/option_names.h"

namespace sb {
namespace {

// kKeyBlocks: k0 for every micro-batch. kKeptKeys: no budget (0: the pattern's own rule),
// predicted at the reference estimator's kept keys for the longest sequence. No floor.
class FixedBudget : public BudgetPolicy {
 public:
  FixedBudget(const BudgetOptions& options, const LatencyPredictor* predictor, const BudgetEstimator* reference)
      : options_(options), predictor_(predictor), reference_(reference) {}
  std::string name() const override { return "fixed"; }
  void assign(GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths) override {
    const bool kept_keys = options_.axis == BudgetAxis::kKeptKeys;
    for (auto& rank : plan.ranks) {
      for (PlannedMicroBatch& mb : rank) {
        mb.budget = kept_keys ? 0 : options_.top_k;
        if (predictor_ == nullptr) continue;
        const std::vector<int64_t> lengths = microbatch_lengths(mb, sample_lengths);
        const double budget =
            kept_keys ? reference_->expected_budget(*std::max_element(lengths.begin(), lengths.end()))
                      : static_cast<double>(mb.budget);
        mb.predicted_ms = predicted_ms_at(*predictor_, lengths, budget, options_.total_layers);
      }
    }
  }

 private:
  BudgetOptions options_;
  const LatencyPredictor* predictor_;
  const BudgetEstimator* reference_;
};

}  // namespace

// Function-local, so that they exist before any use, even from another file's static
// initialisation.
const OptionNames<DstAnchor>& dst_anchor_options() {
  static const OptionNames<DstAnchor> names{
      "DST anchor", {{"mean", DstAnchor::kMean}, {"min", DstAnchor::kMin}, {"max", DstAnchor::kMax}}};
  return names;
}
const OptionNames<DstBottleneckRule>& dst_bottleneck_options() {
  static const OptionNames<DstBottleneckRule> names{
      "DST bottleneck rule", {{"smallest", DstBottleneckRule::kSmallest}, {"largest", DstBottleneckRule::kLargest}}};
  return names;
}
const OptionNames<DstRaiseRule>& dst_raise_options() {
  static const OptionNames<DstRaiseRule> names{
      "DST raise rule",
      {{"anchor", DstRaiseRule::kAnchor}, {"none", DstRaiseRule::kNone}, {"dp_slack", DstRaiseRule::kDpSlack}}};
  return names;
}
const OptionNames<BudgetKind>& budget_kind_options() {
  static const OptionNames<BudgetKind> names{"budget policy", {{"fixed", BudgetKind::kFixed}, {"dst", BudgetKind::kDst}}};
  return names;
}

int64_t saturating_budget(const BudgetOptions& options, int64_t length) {
  if (options.axis == BudgetAxis::kKeptKeys) return (length + 2) / 2;
  return (length + options.block_size - 1) / options.block_size;
}

double predicted_ms_at(const LatencyPredictor& predictor, const std::vector<int64_t>& lengths, double budget,
                       int64_t total_layers) {
  const auto below = static_cast<int64_t>(std::floor(budget));
  const double above_share = budget - static_cast<double>(below);
  const double at_below = predictor.microbatch_ms(lengths, below, total_layers);
  if (above_share <= 0) return at_below;
  return (1.0 - above_share) * at_below + above_share * predictor.microbatch_ms(lengths, below + 1, total_layers);
}

std::unique_ptr<BudgetPolicy> make_budget_policy(const BudgetOptions& options,
                                                 const LatencyPredictor* predictor,
                                                 BudgetEstimates estimates) {
  if (options.top_k < 1) throw std::invalid_argument("budget policy: top_k must be >= 1");
  if (options.axis == BudgetAxis::kKeptKeys && estimates.reference == nullptr) {
    throw std::invalid_argument("budget policy: kept-keys budgets need the reference estimator");
  }
  switch (options.kind) {
    case BudgetKind::kFixed:
      return std::make_unique<FixedBudget>(options, predictor, estimates.reference);
    case BudgetKind::kDst:
      if (predictor == nullptr) {
        throw std::invalid_argument("the dst budget policy needs a latency profile (methods[].profile)");
      }
      return std::make_unique<DstBudget>(options, *predictor, estimates);
  }
  throw std::logic_error("make_budget_policy: unhandled BudgetKind");
}

}  // namespace sb
