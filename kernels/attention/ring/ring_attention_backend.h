#pragma once
// Attention under context parallelism as an attention backend: the model runs on this
// rank's tokens of a micro-batch (their global rotary positions in position_ids) and
// every attention call becomes a ring over the CP group (ring_attention.h) that runs what
// the pattern's selector keeps (ring_pattern_selector.h). The trainer tells the backend
// how the current micro-batch is dealt (set_context_parallel_sharding) before running it;
// budget requests and per-layer statistics behave as in the pattern's one-rank backend,
// the statistics the micro-batch's, the same on every CP rank. Under tensor parallelism as
// well, the ring carries this TP rank's heads only (its CP group is the ranks of its TP
// rank).

#include <functional>
#include <map>
#include <memory>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention.h"

namespace sb {

class RingAttentionBackend : public AttentionBackend {
 public:
  // selector: the pattern's (AttentionPattern::make_ring_selector).
  RingAttentionBackend(std::shared_ptr<RingPatternSelector> selector, std::shared_ptr<RingContext> context);

  std::string name() const override { return selector_->name(); }
  // The micro-batch the following forward calls belong to.
  void set_context_parallel_sharding(std::shared_ptr<const CpSharding> sharding) override;
  // sequences: this rank's tokens as the model saw them (their count is checked against
  // the sharding; the packing the ring uses is the sharding's).
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale, int64_t layer) override;
  void set_budget_request(const AttentionBudgetRequest& request) override { request_ = request; }
  // Tensor parallelism beside CP: this rank's ring runs its share of the heads; the
  // selector reads the layer's statistics over every head, as the one-rank backend does.
  void set_head_shard_sum(std::function<void(std::vector<double>&)> sum) override { head_shard_sum_ = std::move(sum); }
  std::vector<AttentionLayerStats> take_layer_stats() override;
  // Not supported: generation runs on one rank (std::logic_error).
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) override;

  RingContext& context() { return *context_; }

  // This rank's ring work per micro-batch since the last call, keyed by the micro-batch's
  // sharding (forward and backward steps, recomputations included): the attention
  // compute and the kept (query, key) pairs.
  struct Work {
    double compute_ms = 0.0;
    int64_t kept_pairs = 0;
    std::vector<RingStepEvent> steps;  // in the order they ran
  };
  std::map<const CpSharding*, Work> take_work();

 private:
  std::shared_ptr<RingPatternSelector> selector_;
  std::shared_ptr<RingContext> context_;
  std::shared_ptr<const CpSharding> sharding_;
  std::shared_ptr<const RingGeometry> geometry_;  // the sharding's, built at its first layer
  AttentionBudgetRequest request_;
  std::function<void(std::vector<double>&)> head_shard_sum_;  // null: this rank holds every head
  std::map<int64_t, AttentionLayerStats> stats_;
  std::map<const CpSharding*, Work> work_;

  // Adds the ring events recorded since the last drain to the current micro-batch.
  void drain_events();
};

}  // namespace sb
