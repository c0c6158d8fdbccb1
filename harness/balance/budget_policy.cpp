#include "harness/balance/budget_policy.h"

#include <stdexcept>

#include "harness/balance/dst_budget.h"

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

DstAnchor dst_anchor_from_name(const std::string& name) {
  if (name == "mean") return DstAnchor::kMean;
  if (name == "min") return DstAnchor::kMin;
  if (name == "max") return DstAnchor::kMax;
  throw std::invalid_argument("unknown DST anchor \"" + name + "\"; known: mean, min, max");
}

std::string dst_anchor_name(DstAnchor anchor) {
  switch (anchor) {
    case DstAnchor::kMean:
      return "mean";
    case DstAnchor::kMin:
      return "min";
    case DstAnchor::kMax:
      return "max";
  }
  throw std::logic_error("dst_anchor_name: unknown anchor");
}

DstBottleneckRule dst_bottleneck_rule_from_name(const std::string& name) {
  if (name == "smallest") return DstBottleneckRule::kSmallest;
  if (name == "largest") return DstBottleneckRule::kLargest;
  throw std::invalid_argument("unknown DST bottleneck rule \"" + name + "\"; known: smallest, largest");
}

std::string dst_bottleneck_rule_name(DstBottleneckRule rule) {
  switch (rule) {
    case DstBottleneckRule::kSmallest:
      return "smallest";
    case DstBottleneckRule::kLargest:
      return "largest";
  }
  throw std::logic_error("dst_bottleneck_rule_name: unknown rule");
}

DstRaiseRule dst_raise_rule_from_name(const std::string& name) {
  if (name == "anchor") return DstRaiseRule::kAnchor;
  if (name == "none") return DstRaiseRule::kNone;
  if (name == "dp_slack") return DstRaiseRule::kDpSlack;
  throw std::invalid_argument("unknown DST raise rule \"" + name + "\"; known: anchor, none, dp_slack");
}

std::string dst_raise_rule_name(DstRaiseRule rule) {
  switch (rule) {
    case DstRaiseRule::kAnchor:
      return "anchor";
    case DstRaiseRule::kNone:
      return "none";
    case DstRaiseRule::kDpSlack:
      return "dp_slack";
  }
  throw std::logic_error("dst_raise_rule_name: unknown rule");
}

std::vector<std::string> budget_policy_names() { return {"fixed", "dst"}; }

std::unique_ptr<BudgetPolicy> make_budget_policy(const BudgetOptions& options,
                                                 const LatencyPredictor* predictor,
                                                 const BudgetEstimator* floor_estimate) {
  if (options.top_k < 1) throw std::invalid_argument("budget policy: top_k must be >= 1");
  if (options.name == "fixed") return std::make_unique<FixedBudget>(options, predictor);
  if (options.name == "dst") {
    if (predictor == nullptr) {
      throw std::invalid_argument("the dst budget policy needs a latency profile (methods[].profile)");
    }
    return std::make_unique<DstBudget>(options, *predictor, floor_estimate);
  }
  throw std::invalid_argument("unknown budget policy \"" + options.name + "\"; known: fixed, dst");
}

}  // namespace sb
