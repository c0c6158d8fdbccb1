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
        if (!kept_keys) {
          mb.predicted_ms = predictor_->microbatch_ms(lengths, mb.budget, options_.total_layers);
          continue;
        }
        std::vector<int64_t> references;
        for (int64_t length : lengths) references.push_back(reference_budget_for_length(options_, *reference_, length, false));
        mb.predicted_ms = predictor_->microbatch_ms(lengths, references, options_.total_layers);
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

int64_t reference_budget_for_length(const BudgetOptions& options, const BudgetEstimator& reference, int64_t length,
                                    bool clamp_to_dst) {
  // The prior may lie above what the sequence can keep at all: nothing changes above that.
  const int64_t expected =
      std::min<int64_t>(std::llround(reference.expected_budget(length)), saturating_budget(options, length));
  return clamp_to_dst ? std::clamp<int64_t>(expected, options.dst.k_min, options.dst.k_max) : std::max<int64_t>(1, expected);
}

std::vector<int64_t> kept_keys_budgets(const BudgetOptions& options, const BudgetEstimator& reference,
                                       const std::vector<int64_t>& lengths, int64_t k) {
  const auto longest = static_cast<size_t>(std::max_element(lengths.begin(), lengths.end()) - lengths.begin());
  std::vector<int64_t> budgets(lengths.size(), k);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (i != longest) budgets[i] = std::min(k, reference_budget_for_length(options, reference, lengths[i], true));
  }
  return budgets;
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
