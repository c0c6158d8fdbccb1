#pragma once
// Test doubles for the attention-statistics plumbing, used where no sparse backend is
// needed to check that budgets reach the backend and statistics reach the records:
//   RecordingAttentionBackend  dense attention that remembers each budget request and
//                              reports made-up but deterministic per-layer statistics
//                              (effective top_k = requested, or 5 when none;
//                              coverage_mean = 0.5 + 0.01 * layer + 0.001 * top_k)
//   BudgetingBatching          sequential batching that gives micro-batch j of DP rank
//                              d the budget 2 + 3 d + j and a prediction of tokens / 10 ms

#include <memory>
#include <vector>

#include "harness/balance/sequential_batching.h"
#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/dense/dense_causal_attention.h"

namespace sb::test {

class RecordingAttentionBackend : public AttentionBackend {
 public:
  std::string name() const override { return "dense"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale, int64_t layer) override;
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) override;
  void set_budget_request(const AttentionBudgetRequest& request) override;
  std::vector<AttentionLayerStats> take_layer_stats() override;

  static double expected_coverage(int64_t layer, int64_t top_k) { return 0.5 + 0.01 * layer + 0.001 * top_k; }

  std::vector<AttentionBudgetRequest> requests;  // every request, in order

 private:
  DenseCausalAttention dense_;
  AttentionBudgetRequest current_;
  std::vector<AttentionLayerStats> pending_;
};

class BudgetingBatching : public SequentialBatching {
 public:
  GlobalBatchPlan plan(const BatchingInput& input) override;
};

}  // namespace sb::test
