#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"

#include <cmath>
#include <stdexcept>

#include "kernels/attention/core/dense_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_attention_cpu.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"
#ifdef SB_WITH_CUDA
#include "kernels/attention/patterns/vertical_slash/cuda/vertical_slash_attention_cuda.h"
#endif

namespace sb {
namespace {

// The pattern's attention on the inputs' device: the CPU kernel, or on a GPU the fused
// block-sparse kernels (docs/vertical_slash.md, "On GPUs").
VerticalSlashAttentionResult attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const PackedSequences& sequences,
                                    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale) {
#ifdef SB_WITH_CUDA
  if (q.is_cuda()) return vertical_slash_attention_cuda(q, k, v, sequences, index, scale);
#endif
  return vertical_slash_attention_cpu(q, k, v, sequences, index, scale);
}

}  // namespace

VerticalSlashAttention::VerticalSlashAttention(VerticalSlashParams params) : params_(params) { params_.validate(); }

AttentionLayerStats vertical_slash_layer_stats(int64_t layer, const std::vector<std::vector<VerticalSlashHeadIndex>>& index,
                                               const PackedSequences& sequences,
                                               const std::vector<int64_t>& kept_pairs_per_sequence,
                                               const std::function<void(std::vector<double>&)>& sum_over_head_shards,
                                               const VerticalSlashBudgetedIndex* budget, int64_t heads) {
  TORCH_CHECK(kept_pairs_per_sequence.size() == index.size(), "vertical-slash stats: one pair count per sequence expected");
  // One vector, summed over the TP ranks' head shards in one all-reduce when the heads are
  // split: per sequence kept pairs, the heads' coverage summed and the head count; then,
  // under a budget, per sequence the reference rule's pairs and the floor levels' pairs,
  // and this rank's query heads. The counts are integers well below 2^53, so their float64
  // sums are exact; the coverage sums may differ from one process's in the last place,
  // added in another order.
  const size_t n = index.size();
  const bool floored = budget != nullptr && !budget->floor_kept_pairs.empty();
  std::vector<double> sums(3 * n + (budget != nullptr ? 2 * n + 1 : 0), 0.0);
  for (size_t s = 0; s < n; ++s) {
    sums[s] = static_cast<double>(kept_pairs_per_sequence[s]);
    for (const VerticalSlashHeadIndex& head : index[s]) sums[n + s] += head.coverage;
    sums[2 * n + s] = static_cast<double>(index[s].size());
    if (budget == nullptr) continue;
    sums[3 * n + s] = static_cast<double>(budget->reference_kept_pairs[s]);
    if (floored) sums[4 * n + s] = static_cast<double>(budget->floor_kept_pairs[s]);
  }
  if (budget != nullptr) sums[5 * n] = static_cast<double>(heads);
  if (sum_over_head_shards) sum_over_head_shards(sums);
  AttentionLayerStats stats;
  stats.layer = layer;
  double coverage_sum = 0, heads_counted = 0;
  for (size_t s = 0; s < n; ++s) {
    const double sequence_heads = sums[2 * n + s];
    stats.coverage.push_back(sums[n + s] / std::max(1.0, sequence_heads));
    coverage_sum += sums[n + s];
    heads_counted += sequence_heads;
    stats.top_k.push_back(vertical_slash_kept_keys_per_query(std::llround(sums[s]), sequences.length(static_cast<int64_t>(s)),
                                                             std::llround(sequence_heads)));
  }
  stats.coverage_mean = heads_counted > 0 ? coverage_sum / heads_counted : 1.0;
  if (budget == nullptr) return stats;
  // The budget's statistics: the reference rule's kept keys per query, and k_floor, the
  // mean over non-empty sequences of the floor levels' kept keys per query (0 without a floor).
  const int64_t all_heads = std::llround(sums[5 * n]);
  double floor_sum = 0;
  int64_t counted = 0;
  for (size_t s = 0; s < n; ++s) {
    const int64_t length = sequences.length(static_cast<int64_t>(s));
    stats.reference_top_k.push_back(vertical_slash_kept_keys_per_query(std::llround(sums[3 * n + s]), length, all_heads));
    if (!floored || length == 0) continue;
    floor_sum += sums[4 * n + s] / (static_cast<double>(length) * static_cast<double>(all_heads));
    ++counted;
  }
  stats.k_floor = counted > 0 ? std::llround(floor_sum / static_cast<double>(counted)) : 0;
  return stats;
}

void VerticalSlashAttention::set_budget_request(const AttentionBudgetRequest& request) {
  budget_ = VerticalSlashBudgetRequest{request.top_k, request.coverage_floor_ratio};
}

at::Tensor VerticalSlashAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           const PackedSequences& sequences, double scale, int64_t layer) {
  if (budget_.empty()) {  // the params' own rule: its kept keys are the reference
    // Each head's lists come from its own attention, so a TP rank's heads need nothing of
    // the others'; the statistics sum over the head shards (docs/tensor_parallel.md).
    const auto index = vertical_slash_index(q, k, sequences, params_, scale);
    VerticalSlashAttentionResult result = attend(q, k, v, sequences, index, scale);
    AttentionLayerStats stats =
        vertical_slash_layer_stats(layer, index, sequences, result.kept_pairs_per_sequence, head_shard_sum_);
    stats.reference_top_k = stats.top_k;
    stats_[layer] = std::move(stats);
    return result.out;
  }
  // Under TP a budget's level is searched with the other ranks' heads (one level per
  // sequence over every head's lists), and the statistics sum over the head shards.
  const VerticalSlashBudgetedIndex chosen =
      vertical_slash_budgeted_index(q, k, sequences, params_, scale, budget_, head_shard_sum_);
  VerticalSlashAttentionResult result = attend(q, k, v, sequences, chosen.index, scale);
  stats_[layer] = vertical_slash_layer_stats(layer, chosen.index, sequences, result.kept_pairs_per_sequence,
                                             head_shard_sum_, &chosen, q.size(1));
  return result.out;
}

std::vector<AttentionLayerStats> VerticalSlashAttention::take_layer_stats() { return take_stats_by_layer(stats_); }

at::Tensor VerticalSlashAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                  double scale) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(0) <= k.size(0),
              "vertical_slash attention (cached): q [n, Hq, D] and k [L, Hkv, D] with n <= L expected");
  // The prefill of a whole prompt: the pattern, as in training. A step with a cache:
  // dense over the cache, as MInference decodes (docs/vertical_slash.md, "Generation").
  if (q.size(0) < k.size(0)) return dense_causal_attention_cached(q, k, v, scale);
  const PackedSequences one = PackedSequences::from_lengths({q.size(0)});
  return attend(q, k, v, one, vertical_slash_index(q, k, one, params_, scale), scale).out;
}

}  // namespace sb
