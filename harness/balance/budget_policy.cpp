#include "harness/balance/budget_policy.h"

#include <stdexcept>
#include <utility>

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

// The names of one DST option's values, in the order the docs list them; `what` names
// the option in errors.
template <class Value>
struct OptionNames {
  const char* what;
  std::vector<std::pair<std::string, Value>> entries;

  Value from_name(const std::string& name) const {
    for (const auto& [n, v] : entries) {
      if (n == name) return v;
    }
    std::string known;
    for (const auto& entry : entries) known += (known.empty() ? "" : ", ") + entry.first;
    throw std::invalid_argument(std::string("unknown ") + what + " \"" + name + "\"; known: " + known);
  }
  std::string name_of(Value value) const {
    for (const auto& [n, v] : entries) {
      if (v == value) return n;
    }
    throw std::logic_error(std::string(what) + ": a value without a name");
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : entries) out.push_back(entry.first);
    return out;
  }
};

// Function-local, so that they exist before any use, even from another file's static
// initialisation.
const OptionNames<DstAnchor>& anchors() {
  static const OptionNames<DstAnchor> names{
      "DST anchor", {{"mean", DstAnchor::kMean}, {"min", DstAnchor::kMin}, {"max", DstAnchor::kMax}}};
  return names;
}
const OptionNames<DstBottleneckRule>& bottleneck_rules() {
  static const OptionNames<DstBottleneckRule> names{
      "DST bottleneck rule", {{"smallest", DstBottleneckRule::kSmallest}, {"largest", DstBottleneckRule::kLargest}}};
  return names;
}
const OptionNames<DstRaiseRule>& raise_rules() {
  static const OptionNames<DstRaiseRule> names{
      "DST raise rule",
      {{"anchor", DstRaiseRule::kAnchor}, {"none", DstRaiseRule::kNone}, {"dp_slack", DstRaiseRule::kDpSlack}}};
  return names;
}

}  // namespace

DstAnchor dst_anchor_from_name(const std::string& name) { return anchors().from_name(name); }
std::string dst_anchor_name(DstAnchor anchor) { return anchors().name_of(anchor); }
std::vector<std::string> dst_anchor_names() { return anchors().names(); }

DstBottleneckRule dst_bottleneck_rule_from_name(const std::string& name) { return bottleneck_rules().from_name(name); }
std::string dst_bottleneck_rule_name(DstBottleneckRule rule) { return bottleneck_rules().name_of(rule); }
std::vector<std::string> dst_bottleneck_rule_names() { return bottleneck_rules().names(); }

DstRaiseRule dst_raise_rule_from_name(const std::string& name) { return raise_rules().from_name(name); }
std::string dst_raise_rule_name(DstRaiseRule rule) { return raise_rules().name_of(rule); }
std::vector<std::string> dst_raise_rule_names() { return raise_rules().names(); }

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
