#pragma once
// DST, workload-aware dynamic sparsity tuning (docs: sparsebalance.md 1.5), with this
// project's rules where the paper is silent ([our rule], docs/sparsebalance.md section 3):
//   T(m, k)  predicted latency of micro-batch m at budget k, summed over all stages;
//   A        the anchor: mean, min or max of T(m, k0) over every micro-batch of the
//            global batch (all DP ranks: they synchronize at the gradient all-reduce);
//   k0       the reference budget: top_k on the key-blocks axis; on the kept-keys axis
//            (budget_policy.h) k0(m), the reference estimator's kept keys of
//            the pattern's own rule for m's longest sequence, rounded, at most K(m) below
//            and clamped to [k_min, k_max] (T(m, k) there prices the other packed
//            sequences at min(k, their own reference)): that rule keeps a different number of keys in every
//            sequence, so the anchor is taken over each micro-batch's own k0(m), and k0
//            below reads k0(m);
//   K(m)     saturating_budget of m's longest sequence (key blocks: ceil(max length /
//            unit); kept keys: the dense mean, ceil((max length + 1) / 2)): budgets above
//            it change nothing;
//   bottleneck (T(m, k0) > A), rule "smallest" (the docs' rule as written, default):
//            k_m = the smallest k in [k_min, k0] with T(m, k) <= A, or k_min when none
//            is (best effort: the floor below then decides). T grows with k, so this is
//            k_min whenever any k is feasible: the coverage floor alone sets how far a
//            bottleneck drops, and the anchor only decides which micro-batches are
//            bottlenecks;
//            rule "largest" (dst.bottleneck = "largest"): the largest k in [k_min, k0]
//            with T(m, k) <= A, the least compression that meets the anchor (k_min when
//            none is);
//   below the anchor (T(m, k0) < A), rule "anchor" (dst.raise, the docs' rule, default):
//            k_m = the largest k in [k0, min(k_max, max(k0, K(m)))] with T(m, k) <= A;
//            rule "none": k_m = k0 (DST only compresses);
//            rule "dp_slack": the anchor rule's k_m, but only as far as the DP rank's
//            predicted total (the sum of its micro-batches' predictions) stays within the
//            slowest rank's total after the bottlenecks' budgets: each rank spends that
//            slack on its micro-batches in plan order, each taking the largest budget in
//            (k0, anchor rule's k_m] whose extra predicted time still fits, else k0. The
//            docs' rule raises every micro-batch to the anchor, which lengthens the rank
//            that carries it whenever that rank is the slowest: its micro-batches run one
//            after another (with one DP rank, dp_slack never raises);
//   at the anchor (T(m, k0) == A): k_m = k0, so MIN never raises a budget and MAX never
//            lowers one;
//   every micro-batch carries the coverage floor ratio 1 - p relative to C(k0): each
//            layer runs max(k_m, smallest k with C(k) >= (1 - p) C(k0)), so coverage
//            never falls below (1 - p) C(k0) and p = 0 never lowers it.
//   prediction (floor-aware, [our rule]): the floor is known only once the gates are
//            computed, so the plan predicts micro-batch m at max(k_m, F(m)), F(m) the
//            expected floor of m: the floor estimator's value for m's longest sequence
//            (an EMA per length bucket of the mean-over-layers floors the backend
//            reported, fed by the BatchPlanner). Its prior, before any observation, is
//            ceil((1 - p) k0): C is concave in k (the top-k sum of sorted
//            probabilities), so C(k) >= (k / k0) C(k0) and the floor never exceeds that
//            bound. Without an estimator the plan predicts at k_m (floor ignored).
//            Fractional budgets are predicted by linear interpolation between the two
//            integers around them. The estimate changes predicted_ms only, never the
//            budget the layers receive.
// Budgets are integers; on the key-blocks axis k0 must lie in [k_min, k_max]. On the
// kept-keys axis the layer's floor is the pattern's own (docs/attention_patterns.md): the
// smallest budget keeping (1 - p) of the coverage under the pattern's rule.

#include "harness/balance/budget_policy.h"

namespace sb {

class DstBudget : public BudgetPolicy {
 public:
  DstBudget(const BudgetOptions& options, const LatencyPredictor& predictor, BudgetEstimates estimates = {});
  std::string name() const override { return "dst"; }
  void assign(GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths) override;

  // The anchor A of the last assign() (ms).
  double last_anchor_ms() const { return last_anchor_ms_; }

  // The prior of the floor estimator: ceil((1 - p) k0), the floor's upper bound.
  static int64_t floor_prior(int64_t k0, double p);

 private:
  // k0 of a micro-batch whose longest sequence has this many tokens (see above).
  int64_t reference_budget(int64_t longest) const;
  // The budget of each packed sequence of a micro-batch at budget k: k for all on the
  // key-blocks axis; kept_keys_budgets on the kept-keys one (the longest k, the others at most r(L)).
  std::vector<int64_t> sequence_budgets(const std::vector<int64_t>& lengths, int64_t k) const;
  // T(m, k) on the kept-keys axis: the predicted latency of a micro-batch of these
  // sequences at budget k (each sequence at its own budget).
  double budget_ms(const std::vector<int64_t>& lengths, int64_t k) const;

  BudgetOptions options_;
  const LatencyPredictor& predictor_;
  BudgetEstimates estimates_;
  double last_anchor_ms_ = -1;
};

}  // namespace sb
