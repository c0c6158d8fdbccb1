#pragma once
// Sliding-window attention with sinks as a pattern ("sliding_window";
// sliding_window_rule.h, docs/sliding_window.md). Budget axis: the window W in tokens per
// query (key blocks of one token); the fixed budget is the options' window.

#include <cstdint>
#include <memory>

#include "kernels/attention/patterns/attention_pattern.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"

namespace sb {

class SlidingWindowPattern : public AttentionPattern {
 public:
  explicit SlidingWindowPattern(SlidingWindowOptions options) : options_(options) {}
  const SlidingWindowOptions& options() const { return options_; }

  std::string name() const override { return "sliding_window"; }
  std::string title() const override { return "sliding-window"; }
  bool same(const AttentionPattern& other) const override;
  // The same sinks (the window is the budget; the block grid only tiles the ring).
  bool same_selection(const AttentionPattern& other) const override;
  BudgetAxis budget_axis() const override { return BudgetAxis::kKeyBlocks; }
  int64_t default_budget() const override { return options_.window; }
  int64_t budget_unit_tokens() const override { return 1; }
  // Windows doubling from 64 below the longest sample, that sample's length (everything
  // kept), the default window and DST's cap (each at most the longest sample).
  std::vector<int64_t> profile_budgets(int64_t longest_sample, int64_t dst_k_max) const override;
  std::vector<std::pair<std::string, int64_t>> profile_fields() const override {
    return {{"block_size", options_.block_size}, {"sink_tokens", options_.sink_tokens}};
  }
  std::unique_ptr<AttentionBackend> make_backend() const override;
  std::shared_ptr<RingPatternSelector> make_ring_selector() const override;
  // Under CP on GPUs: refused (the ring's band runs on the CPU steps only).
  std::optional<AttentionTrainingProblem> training_problem(const AttentionTrainingSetting& setting) const override;
  // sliding_window_pairs.
  double attended_pairs(int64_t length, int64_t budget) const override;
  // The coverage of the last queries: 2 D per (last query, key).
  double selection_forward_flops(int64_t length, int64_t q_heads, int64_t head_dim) const override;
  // Under CP: the last queries, their score maxima and softmax denominators, and the kept
  // mass by window (sliding_window_ring_selector.h).
  std::vector<SelectionAllreduces> ring_selection_allreduces(const std::vector<int64_t>& lengths, bool budgeted,
                                                             bool floor, int64_t query_heads, int64_t kv_heads,
                                                             int64_t head_dim) const override;
  // The coverage table over every head: one sum per layer.
  double tensor_parallel_sums_per_layer(bool /*floor*/, bool /*budgeted*/) const override { return 1.0; }
  double kept_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                    double scale) const override;
  at::Tensor reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const PackedSequences& sequences, double scale, int64_t first_row) const override;
  std::function<void()> selection_step(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                                       double scale) const override;

 private:
  SlidingWindowOptions options_;
};

AttentionOptions sliding_window_attention_options(SlidingWindowOptions options);

}  // namespace sb
