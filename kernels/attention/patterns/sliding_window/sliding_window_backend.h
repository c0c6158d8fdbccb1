#pragma once
// Sliding-window attention as an attention backend ("sliding_window"): each forward runs
// every sequence at its window (the request's budget, tokens per query, or the default),
// raised to DST's coverage floor when the request asks for one, and records per layer the
// windows run and the coverage of the last queries' attention (sliding_window_coverage.h).
//
// DST's floor (coverage_floor_ratio r > 0): the smallest window W_f whose call-wide
// coverage is >= r x C(coverage_reference_k), one for the call; sequence s runs
// max(W_s, W_f). Under tensor parallelism the coverage sums over the head shards, so every
// TP rank chooses the same floor from the whole layer.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_coverage.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"

namespace sb {

// The windows one call runs per sequence and its layer statistics: the request's (one
// budget per sequence, or the default) raised to the floor; mass: the call's coverage
// table, already summed over the head shards.
struct SlidingWindowChoice {
  std::vector<int64_t> windows;
  AttentionLayerStats stats;
};
SlidingWindowChoice sliding_window_choice(const AttentionBudgetRequest& request, int64_t default_window,
                                          const SlidingWindowMass& mass, int64_t num_sequences, int64_t layer);

class SlidingWindowAttention : public AttentionBackend {
 public:
  // Throws std::invalid_argument for options that break the rules.
  explicit SlidingWindowAttention(SlidingWindowOptions options);

  std::string name() const override { return "sliding_window"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale, int64_t layer) override;
  void set_budget_request(const AttentionBudgetRequest& request) override { request_ = request; }
  void set_head_shard_sum(std::function<void(std::vector<double>&)> sum) override { head_shard_sum_ = std::move(sum); }
  std::vector<AttentionLayerStats> take_layer_stats() override;
  // The window of a one-budget request, else the default. A prefill (n = L) runs the
  // tiled kernel; a step with a cache attends its masked rows of the cache.
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) override;

 private:
  SlidingWindowOptions options_;
  AttentionBudgetRequest request_;
  std::function<void(std::vector<double>&)> head_shard_sum_;
  std::map<int64_t, AttentionLayerStats> stats_;  // by layer; a rerun replaces its entry
};

}  // namespace sb
