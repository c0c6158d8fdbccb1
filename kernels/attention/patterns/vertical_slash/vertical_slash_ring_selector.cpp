#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_selector.h"

#include <optional>
#include <utility>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_budget.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_index.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_pattern.h"
#include "kernels/attention/ring/ring_attention.h"

namespace sb {

VerticalSlashRingSelector::VerticalSlashRingSelector(VerticalSlashParams params) : params_(params) {
  params_.validate();
}

RingCallPattern VerticalSlashRingSelector::select(const RingSelectionInputs& in) {
  const VerticalSlashBudgetRequest request{in.request.top_k, in.request.coverage_floor_ratio};
  std::optional<VerticalSlashBudgetedIndex> budget;
  if (request.empty()) {
    index_ = vertical_slash_ring_index(in.q, in.k, in.geometry, params_, in.scale, in.context, in.call);
  } else {
    budget = vertical_slash_ring_budgeted_index(in.q, in.k, in.geometry, params_, in.scale, request, in.context,
                                                in.call, in.head_shard_sum);
    index_ = std::move(budget->index);
  }
  RingCallPattern pattern = vertical_slash_ring_pattern(index_, in.geometry.layout);
  // Each rank computes only its own queries' pairs: the statistics count them from the
  // index every rank shares.
  const PackedSequences& sequences = in.geometry.sequences;
  std::vector<int64_t> pairs(index_.size(), 0);
  for (size_t s = 0; s < pairs.size(); ++s) {
    const int64_t length = sequences.length(static_cast<int64_t>(s));
    if (length == 0) continue;
    for (const VerticalSlashHeadIndex& head : index_[s]) pairs[s] += vertical_slash_kept_pairs(head, length);
  }
  pattern.stats = vertical_slash_layer_stats(in.layer, index_, sequences, pairs, in.head_shard_sum,
                                             budget ? &*budget : nullptr, in.q.size(1));
  // The pattern's own rule: its kept keys are the reference.
  if (!budget) pattern.stats.reference_top_k = pattern.stats.top_k;
  return pattern;
}

}  // namespace sb
