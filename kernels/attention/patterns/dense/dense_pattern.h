#pragma once
// Dense causal attention as a pattern ("dense"): every query attends to every earlier key
// of its sequence. The baseline every sparse pattern is compared against; no budget.

#include <cstdint>
#include <memory>

#include "kernels/attention/patterns/attention_pattern.h"

namespace sb {

class DensePattern : public AttentionPattern {
 public:
  std::string name() const override { return "dense"; }
  std::string title() const override { return "dense"; }
  bool same(const AttentionPattern& other) const override { return other.name() == name(); }
  BudgetAxis budget_axis() const override { return BudgetAxis::kNone; }
  // A dense profile records block_size 0.
  std::vector<std::pair<std::string, int64_t>> profile_fields() const override { return {{"block_size", 0}}; }
  std::unique_ptr<AttentionBackend> make_backend() const override;
  // The ring's tiles of kDenseRingBlock tokens.
  std::shared_ptr<RingPatternSelector> make_ring_selector() const override;
  // L (L + 1) / 2.
  double attended_pairs(int64_t length, int64_t budget) const override;
  double kept_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                    double scale) const override;
  at::Tensor reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const PackedSequences& sequences, double scale, int64_t first_row) const override;
};

// The tokens per attention block dense attention's ring cuts its shards into (compute
// tiles only: the result does not depend on it).
inline constexpr int64_t kDenseRingBlock = 256;

AttentionOptions dense_attention_options();

// Dense causal attention over one sequence of `length` tokens: Hq L (L + 1) / 2 pairs.
double dense_causal_attended_pairs(int64_t q_heads, int64_t length);

}  // namespace sb
