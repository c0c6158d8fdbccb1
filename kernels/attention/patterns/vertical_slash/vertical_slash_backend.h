#pragma once
// Vertical-slash attention as an attention backend ("vertical_slash"): each forward
// builds the index of every (sequence, query head) from the call's own q and k
// (vertical_slash_index.h; under a budget request vertical_slash_budget.h) and runs the
// CPU kernel (vertical_slash_attention_cpu.h); per layer it records the pattern's
// coverage of the last queries' attention mass and its kept keys per query.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// A layer's statistics from its index and the (query, key) pairs its mask kept per
// sequence (summed over query heads): coverage per sequence (the mean over its query
// heads) and over the call (the mean over every head); top_k per sequence the kept keys
// per query (pairs over length x query heads, rounded). The one-rank backend passes the
// kernel's pair counts; the context-parallel ring counts them from the index every rank
// shares (each rank computes only its own queries' pairs). budget (a budgeted call; heads:
// the query heads this rank holds) adds per sequence the reference rule's kept keys per
// query (reference_top_k) and k_floor, the kept keys per query the floor levels alone keep
// (the mean over the call's non-empty sequences, rounded; 0 without a floor).
// sum_over_head_shards (tensor parallelism, AttentionBackend::set_head_shard_sum): every
// count above is summed over the TP ranks in one call, so every rank reports the whole layer.
AttentionLayerStats vertical_slash_layer_stats(
    int64_t layer, const std::vector<std::vector<VerticalSlashHeadIndex>>& index, const PackedSequences& sequences,
    const std::vector<int64_t>& kept_pairs_per_sequence,
    const std::function<void(std::vector<double>&)>& sum_over_head_shards = {},
    const VerticalSlashBudgetedIndex* budget = nullptr, int64_t heads = 0);

class VerticalSlashAttention : public AttentionBackend {
 public:
  // Throws std::invalid_argument for params that do not validate.
  explicit VerticalSlashAttention(VerticalSlashParams params);

  std::string name() const override { return "vertical_slash"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale, int64_t layer) override;
  // DST's budget for the following calls: top_k in kept keys per query per sequence (0:
  // the params' rule for that sequence) and the coverage floor ratio; coverage_reference_k
  // and coverage_curve_up_to are ignored. An empty request (no top_k, no floor) restores
  // the params' rule (docs/vertical_slash.md, "Budgets").
  void set_budget_request(const AttentionBudgetRequest& request) override;
  // Tensor parallelism: this rank holds a share of the heads. The params' rule runs per
  // head unchanged, a budget's level is searched with the other shards
  // (vertical_slash_sharded_budget.h), and the statistics sum over the shards.
  void set_head_shard_sum(std::function<void(std::vector<double>&)> sum) override { head_shard_sum_ = std::move(sum); }
  // Per layer: coverage per sequence (mean over its query heads) and over the call;
  // top_k holds each sequence's kept keys per query, averaged over its heads and rows;
  // reference_top_k the same for the params' own rule (equal to top_k without a
  // request); k_floor the call's mean kept keys per query at the floor levels alone.
  std::vector<AttentionLayerStats> take_layer_stats() override;
  // Generation: a prefill of the whole prompt (n = L) runs the pattern; later steps
  // (n < L) attend densely to the cache, as MInference decodes. Records no statistics.
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) override;

  const VerticalSlashParams& params() const { return params_; }

 private:
  VerticalSlashParams params_;
  VerticalSlashBudgetRequest budget_;  // empty: the params' rule
  std::map<int64_t, AttentionLayerStats> stats_;  // by layer; a rerun replaces its entry
  std::function<void(std::vector<double>&)> head_shard_sum_;  // null: this rank holds every head
};

}  // namespace sb
