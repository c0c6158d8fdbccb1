#include "kernels/attention/ring/ring_attention_backend.h"

#include <stdexcept>
#include <utility>


namespace sb {

RingAttentionBackend::RingAttentionBackend(std::shared_ptr<RingPatternSelector> selector,
                                           std::shared_ptr<RingContext> context)
    : selector_(std::move(selector)), context_(std::move(context)) {
  if (!context_) throw std::invalid_argument("ring attention backend: no CP context");
  if (!selector_) throw std::invalid_argument("ring attention backend: no pattern selector");
  if (selector_->block_size() < 1) {
    throw std::invalid_argument("ring attention backend: block_size must be >= 1, got " +
                                std::to_string(selector_->block_size()));
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
  if (!geometry_) geometry_ = RingGeometry::build(*sharding_, selector_->block_size());
  RingAttentionResult result =
      ring_attention(q, k, v, geometry_, *selector_, request_, scale, layer, context_, head_shard_sum_);
  drain_events();
  if (result.stats.layer >= 0) stats_[layer] = std::move(result.stats);
  return result.out;
}

std::vector<AttentionLayerStats> RingAttentionBackend::take_layer_stats() { return take_stats_by_layer(stats_); }

at::Tensor RingAttentionBackend::forward_cached(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  throw std::logic_error("ring attention backend: decoding with a cache runs on one rank; evaluate with cp = 1");
}

}  // namespace sb
