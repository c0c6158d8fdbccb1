#pragma once
// The plan of one global batch: which samples each data-parallel rank trains, how they
// are packed into micro-batches (in execution order), and the attention budget of each
// micro-batch. Every rank computes the same plan from the same inputs, so that both
// ends of every pipeline send know the activation shapes.

#include <cstdint>
#include <vector>

namespace sb {

struct PlannedMicroBatch {
  std::vector<int64_t> samples;  // positions in the global batch, packed in this order
  int64_t tokens = 0;            // sum of the samples' lengths
  // Attention budget (MoBA top-k) chosen by the budget policy; 0 = the attention
  // backend's own default (and meaningless for dense attention).
  int64_t budget = 0;
  // Per packed sequence (samples' order), when they differ: kept keys per query
  // (budget_policy.h, kKeptKeys: `budget` is the longest sequence's, the others
  // run at most their own reference). Empty: `budget` for every sequence.
  std::vector<int64_t> sequence_budgets;
  // DST's per-layer coverage floor for this micro-batch (see AttentionBudgetRequest in
  // kernels/attention/core/attention_backend.h): ratio 1 - p relative to the coverage at
  // reference budget k0; ratio 0 = no floor.
  double coverage_floor_ratio = 0.0;
  int64_t coverage_reference_k = 0;
  // Predicted forward + backward latency summed over pipeline stages (ms), from the
  // latency predictor; negative when no predictor was used.
  double predicted_ms = -1.0;
};

struct GlobalBatchPlan {
  std::vector<std::vector<PlannedMicroBatch>> ranks;  // [dp rank][micro-batch]

  int64_t dp() const { return static_cast<int64_t>(ranks.size()); }
  int64_t microbatch_count() const;  // over all DP ranks

  // Throws std::logic_error unless every one of num_samples samples appears exactly
  // once, each micro-batch is non-empty, its `tokens` equals the sum of its samples'
  // lengths and is at most max_tokens.
  void validate(const std::vector<int64_t>& sample_lengths, int64_t max_tokens) const;
};

// Lengths of the samples of one micro-batch, in packing order.
std::vector<int64_t> microbatch_lengths(const PlannedMicroBatch& mb,
                                        const std::vector<int64_t>& sample_lengths);
// The same for every micro-batch of the plan, in plan order (DP rank 0's micro-batches,
// then DP rank 1's, ...), as records.jsonl lists micro-batches.
std::vector<std::vector<int64_t>> plan_microbatch_lengths(const GlobalBatchPlan& plan,
                                                          const std::vector<int64_t>& sample_lengths);

}  // namespace sb
