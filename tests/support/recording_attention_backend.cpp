#include "tests/support/recording_attention_backend.h"

namespace sb::test {

at::Tensor RecordingAttentionBackend::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const PackedSequences& sequences, double scale, int64_t layer) {
  AttentionLayerStats stats;
  stats.layer = layer;
  const int64_t k_used = current_.top_k.empty() ? 5 : current_.top_k.front();
  stats.top_k.assign(static_cast<size_t>(sequences.num_sequences()), k_used);
  stats.coverage.assign(stats.top_k.size(), expected_coverage(layer, k_used));
  stats.coverage_mean = expected_coverage(layer, k_used);
  pending_.push_back(stats);
  return dense_.forward(q, k, v, sequences, scale, layer);
}

at::Tensor RecordingAttentionBackend::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     double scale) {
  return dense_.forward_cached(q, k, v, scale);
}

void RecordingAttentionBackend::set_budget_request(const AttentionBudgetRequest& request) {
  current_ = request;
  requests.push_back(request);
}

std::vector<AttentionLayerStats> RecordingAttentionBackend::take_layer_stats() {
  std::vector<AttentionLayerStats> taken;
  taken.swap(pending_);
  return taken;
}

GlobalBatchPlan BudgetingBatching::plan(const BatchingInput& input) {
  GlobalBatchPlan plan = SequentialBatching::plan(input);
  for (size_t d = 0; d < plan.ranks.size(); ++d) {
    for (size_t j = 0; j < plan.ranks[d].size(); ++j) {
      plan.ranks[d][j].budget = static_cast<int64_t>(2 + 3 * d + j);
      plan.ranks[d][j].predicted_ms = static_cast<double>(plan.ranks[d][j].tokens) / 10.0;
    }
  }
  return plan;
}

}  // namespace sb::test
