#include "kernels/attention/ring/ring_attention_backend.h"

#include <stdexcept>
#include <utility>

#include "kernels/attention/moba/moba_attention_backend.h"
#include "kernels/attention/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/vertical_slash/vertical_slash_blocks.h"

namespace sb {

RingAttentionBackend::RingAttentionBackend(const AttentionOptions& options, std::shared_ptr<RingContext> context)
    : options_(options), context_(std::move(context)) {
  if (!context_) throw std::invalid_argument("ring attention backend: no CP context");
  if (options_.block_size < 1) {
    throw std::invalid_argument("ring attention backend: block_size must be >= 1, got " +
                                std::to_string(options_.block_size));
  }
}

void RingAttentionBackend::set_context_parallel_sharding(std::shared_ptr<const CpSharding> sharding) {
  if (sharding && sharding->cp() != context_->size()) {
    throw std::invalid_argument("ring attention backend: a sharding over " + std::to_string(sharding->cp()) +
                                " ranks for a CP group of " + std::to_string(context_->size()));
  }
  drain_events();  // the backward steps of the micro-batch set before
  if (sharding != sharding_) geometry_.reset();
  sharding_ = std::move(sharding);
}

void RingAttentionBackend::drain_events() {
  const std::vector<RingStepEvent> events = context_->take_events();
  if (events.empty() || !sharding_) return;
  Work& work = work_[sharding_.get()];
  for (const RingStepEvent& e : events) {
    work.compute_ms += 1e3 * e.compute_s;
    work.kept_pairs += e.kept_pairs;
    work.steps.push_back(e);
  }
}

std::map<const CpSharding*, RingAttentionBackend::Work> RingAttentionBackend::take_work() {
  drain_events();
  return std::exchange(work_, {});
}

at::Tensor RingAttentionBackend::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const PackedSequences& sequences, double scale, int64_t layer) {
  if (!sharding_) {
    throw std::logic_error("ring attention backend (layer " + std::to_string(layer) +
                           "): no micro-batch sharding set; call set_context_parallel_sharding before the forward");
  }
  if (sequences.total_tokens() != sharding_->size_of(context_->rank()) || q.size(0) != sequences.total_tokens()) {
    throw std::invalid_argument("ring attention backend (layer " + std::to_string(layer) + "): " +
                                std::to_string(q.size(0)) + " local tokens, but the sharding gives " +
                                context_->describe(context_->rank()) + " " +
                                std::to_string(sharding_->size_of(context_->rank())));
  }
  RingAttentionSpec spec;
  spec.scale = scale;
  spec.moba = options_.is_moba();
  spec.vertical_slash = options_.is_vertical_slash();
  // Vertical-slash's blocks are its slash blocks; otherwise MoBA's (dense: compute tiles).
  spec.block_size = spec.vertical_slash ? options_.vertical_slash.block_size : options_.block_size;
  if (spec.moba) {
    spec.moba_params = moba_params_for_request(request_, options_.block_size, options_.top_k, scale,
                                               sharding_->sequences().num_sequences(), layer);
    spec.moba_params.sum_over_head_shards = head_shard_sum_;
  }
  if (spec.vertical_slash) {
    spec.vertical_slash_params = options_.vertical_slash;
    spec.vertical_slash_request = VerticalSlashBudgetRequest{request_.top_k, request_.coverage_floor_ratio};
    spec.vertical_slash_head_shard_sum = head_shard_sum_;
  }
  if (!geometry_) geometry_ = RingGeometry::build(*sharding_, spec.block_size, !spec.moba && !spec.vertical_slash);
  RingAttentionResult result = ring_attention(q, k, v, geometry_, spec, context_);
  drain_events();
  if (spec.moba) stats_[layer] = moba_layer_stats(layer, std::move(result.routing));
  if (spec.vertical_slash) {
    const PackedSequences& sequences = sharding_->sequences();
    std::vector<int64_t> pairs(result.vertical_slash_index.size(), 0);
    for (size_t s = 0; s < pairs.size(); ++s) {
      const int64_t length = sequences.length(static_cast<int64_t>(s));
      if (length == 0) continue;
      for (const VerticalSlashHeadIndex& head : result.vertical_slash_index[s]) pairs[s] += vertical_slash_kept_pairs(head, length);
    }
    const VerticalSlashBudgetedIndex* budget = result.vertical_slash_budget ? &*result.vertical_slash_budget : nullptr;
    AttentionLayerStats stats =
        vertical_slash_layer_stats(layer, result.vertical_slash_index, sequences, pairs, head_shard_sum_, budget, q.size(1));
    if (budget == nullptr) stats.reference_top_k = stats.top_k;  // the pattern's own rule: its kept keys are the reference
    stats_[layer] = std::move(stats);
  }
  return result.out;
}

std::vector<AttentionLayerStats> RingAttentionBackend::take_layer_stats() {
  std::vector<AttentionLayerStats> taken;
  for (auto& [layer, stats] : stats_) taken.push_back(std::move(stats));
  stats_.clear();
  return taken;
}

at::Tensor RingAttentionBackend::forward_cached(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  throw std::logic_error("ring attention backend: decoding with a cache runs on one rank; evaluate with cp = 1");
}

}  // namespace sb
