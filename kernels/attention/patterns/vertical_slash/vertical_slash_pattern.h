#pragma once
// MTraining's vertical-slash pattern ("vertical_slash"; docs/vertical_slash.md): each
// (sequence, query head) keeps the key columns and diagonals its last queries' attention
// ranks highest (vertical_slash_index.h). Budget axis: kept keys per query; the fixed
// budget is the pattern's own rule (top-p or top-k).

#include <cstdint>
#include <memory>

#include "kernels/attention/patterns/attention_pattern.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// Rounds of the level search under TP (vertical_slash_sharded_budget.h) the simulator
// counts: what 2 of 2 measured searches took (at most 14).
inline constexpr double kVerticalSlashLevelSearchRounds = 13;

struct VerticalSlashOptions {
  VerticalSlashParams params;  // the index's rules
  // The kept keys per query SAB and DST assume for a sequence length the layers have not
  // reported the rule's own choice for yet (their estimators' prior).
  int64_t expected_keys = 1024;
};

class VerticalSlashPattern : public AttentionPattern {
 public:
  explicit VerticalSlashPattern(VerticalSlashOptions options) : options_(options) {}
  const VerticalSlashOptions& options() const { return options_; }
  const VerticalSlashParams& params() const { return options_.params; }

  std::string name() const override { return "vertical_slash"; }
  std::string title() const override { return "vertical-slash"; }
  bool same(const AttentionPattern& other) const override;
  // The same index rules (expected_keys is the planner's prior only).
  bool same_selection(const AttentionPattern& other) const override;
  BudgetAxis budget_axis() const override { return BudgetAxis::kKeptKeys; }
  int64_t default_budget() const override { return options_.expected_keys; }
  // Kept keys per query: powers of two from 64 below the longest sample's dense mean,
  // that mean (everything kept) and the estimators' prior.
  std::vector<int64_t> profile_budgets(int64_t longest_sample, int64_t dst_k_max) const override;
  // The index's rules that change a layer's time under a budget: its blocks, the queries
  // it reads, and the forced entries and caps that bound the kept keys.
  std::vector<std::pair<std::string, int64_t>> profile_fields() const override;
  std::unique_ptr<AttentionBackend> make_backend() const override;
  std::shared_ptr<RingPatternSelector> make_ring_selector() const override;
  // CUDA: the fused block-sparse kernels (bfloat16, head_dim 64 or 128); the CPU kernel
  // computes in float32 or float64.
  std::optional<AttentionTrainingProblem> training_problem(const AttentionTrainingSetting& setting) const override;
  // L x min(b, (L + 1) / 2): every query keeps b keys, at most the dense mean.
  double attended_pairs(int64_t length, int64_t budget) const override;
  // The index: 2 D per (last query, key) for the last min(last_queries, L) queries.
  double selection_forward_flops(int64_t length, int64_t q_heads, int64_t head_dim) const override;
  // The index under CP (vertical_slash_ring_index.h), per layer, float64: the last queries
  // (N x Hq x D, N the last queries of all sequences), their score maxima and softmax
  // denominators (N x Hq each), the column and diagonal sums (Hq x 2 x L per sequence) and
  // the coverage of the lists run (Hq per sequence). A request adds the references'
  // coverage, and a floor one per step of the floor's lockstep binary search, taken as
  // ceil(log2(2 L)) for the longest L, and one for the floor levels.
  std::vector<SelectionAllreduces> ring_selection_allreduces(const std::vector<int64_t>& lengths, bool budgeted,
                                                             bool floor, int64_t query_heads, int64_t kv_heads,
                                                             int64_t head_dim) const override;
  // One sum for the layer's statistics; with budgets the level search's: one for its ends
  // and [our rule] kVerticalSlashLevelSearchRounds rounds.
  double tensor_parallel_sums_per_layer(bool floor, bool budgeted) const override;
  double kept_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                    double scale) const override;
  at::Tensor reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const PackedSequences& sequences, double scale, int64_t first_row) const override;
  std::function<void()> selection_step(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                                       double scale) const override;

 private:
  VerticalSlashOptions options_;
};

AttentionOptions vertical_slash_attention_options(VerticalSlashOptions options);
AttentionOptions vertical_slash_attention_options(const VerticalSlashParams& params);

}  // namespace sb
