#include "harness/balance/budget_policy.h"

#include <stdexcept>
#include <utility>

#include "harness/balance/dst_budget.h"
#include "common/option_names.h"

namespace sb {
namespace {

// k0 for every micro-batch; no floor.
class FixedBudget : public BudgetPolicy {
 public:
  FixedBudget(const BudgetOptions& options, const LatencyPredictor* predictor)
      : options_(options), predictor_(predictor) {}
  std::string name() const override { return "fixed"; }
  void assign(GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths) override {
    for (auto& rank : plan.ranks) {
      for (PlannedMicroBatch& mb : rank) {
        mb.budget = options_.top_k;
        if (predictor_ != nullptr) {
          mb.predicted_ms = predictor_->microbatch_ms(microbatch_lengths(mb, sample_lengths),
                                                      mb.budget, options_.total_layers);
        }
      }
    }
  }

 private:
  BudgetOptions options_;
  const LatencyPredictor* predictor_;
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

std::unique_ptr<BudgetPolicy> make_budget_policy(const BudgetOptions& options,
                                                 const LatencyPredictor* predictor,
                                                 const BudgetEstimator* floor_estimate) {
  if (options.top_k < 1) throw std::invalid_argument("budget policy: top_k must be >= 1");
  switch (options.kind) {
    case BudgetKind::kFixed:
      return std::make_unique<FixedBudget>(options, predictor);
    case BudgetKind::kDst:
      if (predictor == nullptr) {
        throw std::invalid_argument("the dst budget policy needs a latency profile (methods[].profile)");
      }
      return std::make_unique<DstBudget>(options, *predictor, floor_estimate);
  }
  throw std::logic_error("make_budget_policy: unhandled BudgetKind");
}

}  // namespace sb
