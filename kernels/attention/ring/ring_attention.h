#pragma once
// Ring attention over a context-parallel (CP) group (docs/context_parallel.md): each
// rank keeps its queries; key/value shards travel around the ring and every step merges
// the local queries' attention over the visiting shard into the running output with the
// log-sum-exp rule. The backward runs a second ring in which each shard's dK/dV
// accumulator travels with it and comes home at the end.
//
// Hierarchical ring (cp_inner = I < W): ranks form W / I groups of I consecutive ranks.
// Round o of the outer ring brings every rank the shard of the rank o groups before it;
// an inner ring then passes that shard through the group. The next round's outer
// transfer is posted before the inner ring starts, so it overlaps the whole inner ring
// (in the backward also the previous group's dK/dV accumulator). I = 1 or I = W is the
// flat ring, where each transfer overlaps one step.
//
// Patterns: the ring runs whatever the pattern's selector (ring_pattern_selector.h) keeps
// for the call: key blocks per (query head, query block), and single key columns outside
// them as a second partial per step (ring_column_step_cpu.h). A selector that reads the
// whole micro-batch completes its statistics with the CP group's all-reduces, so every
// rank runs the same selection (docs/attention_patterns.md).

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_pattern_selector.h"
#include "kernels/attention/ring/ring_step_cpu.h"

namespace sb {

// The step number of a pattern's selection under CP (its local statistics, then the
// all-reduces that complete them; ring_pattern_selector.h).
inline constexpr int64_t kRingSelectionStep = -1;

// One step of one rank's ring, forward or backward; every wait of an attention call lies
// in one of its events (the last step's wait also holds the sends' delivery and, in the
// backward, the accumulator's way home; a round's last step the round's outer waits).
struct RingStepEvent {
  int64_t call = 0;         // the attention call (one per layer forward) it belongs to
  bool backward = false;
  int64_t step = 0;         // 0 .. W - 1 (outer round * inner size + inner step);
                            // kRingSelectionStep for the pattern's selection
  int64_t source_rank = 0;  // the CP rank whose key/value shard was computed against
  double start_s = 0.0;     // steady-clock seconds at the start of the compute
  double compute_s = 0.0;   // the step's attention compute
  double wait_s = 0.0;      // waiting for the next shard (and, backward, dK/dV) afterwards
  int64_t kept_pairs = 0;   // (query, key) pairs computed in the step, summed over query heads
};

// The CP group and what one rank records about its rings.
class RingContext {
 public:
  // group: the CP group's process group (null for cp = 1), rank in it, its size; inner:
  // ranks per inner ring (0: flat). Throws std::invalid_argument unless inner divides size.
  RingContext(c10::intrusive_ptr<c10d::Backend> group, int64_t rank, int64_t size, int64_t inner,
              std::chrono::milliseconds timeout, std::function<std::string(int64_t)> describe = {});

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  int64_t inner() const { return inner_; }
  const c10::intrusive_ptr<c10d::Backend>& group() const { return group_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // "cp rank 2" unless the constructor was given a better description.
  std::string describe(int64_t cp_rank) const;

  int64_t next_call() { return calls_++; }
  // Sums (or takes the max of) `tensor` over the CP group in place, within the timeout,
  // and returns when the result is usable by the host and the compute stream; throws std::runtime_error naming this rank, `what` and the attention call otherwise.
  // A no-op for cp = 1.
  void all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op, const std::string& what, int64_t call);
  void record(const RingStepEvent& event);
  // The events since the last call, in the order they happened.
  std::vector<RingStepEvent> take_events();

 private:
  c10::intrusive_ptr<c10d::Backend> group_;
  int64_t rank_, size_, inner_;
  std::chrono::milliseconds timeout_;
  std::function<std::string(int64_t)> describe_;
  int64_t calls_ = 0;
  std::mutex mutex_;
  std::vector<RingStepEvent> events_;
};

// Records `event` with its compute from `start` to `computed` and its wait from
// `computed` to now (steady clock).
void ring_record_step(RingContext& context, RingStepEvent event, std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point computed);

struct RingAttentionResult {
  at::Tensor out;             // [n, Hq, D], differentiable with respect to q, k, v
  at::Tensor lse;             // [n, Hq]
  RingBlockPattern blocks;    // the call's key blocks (the selector's), the same on every CP rank
  AttentionLayerStats stats;  // the selector's (layer < 0: none), the same on every CP rank
};

// What every attention call of one micro-batch shares: its blocks and every rank's tiles.
// Built once per micro-batch, not once per layer.
struct RingGeometry {
  int64_t cp = 1;
  PackedSequences sequences;  // the micro-batch's
  BlockLayout layout;
  std::vector<RingShardTiles> shards;  // per CP rank

  static std::shared_ptr<const RingGeometry> build(const CpSharding& sharding, int64_t block_size);
  // Every block of each sequence up to the diagonal, all heads alike (dense causal
  // attention's selection): built at the first call, then kept.
  const RingBlockPattern& causal_pattern() const;

 private:
  mutable std::once_flag causal_once_;
  mutable RingBlockPattern causal_;
};

// q [n, Hq, D], k, v [n, Hkv, D]: the tokens sharding.tokens_of(context.rank()) of the
// packed micro-batch, on the CPU (float32 or float64) or a GPU (the fused block-sparse
// kernels). Every rank of the group calls it with the same geometry, selector and request,
// in the same order as its other ring calls; the geometry's block size must be the
// selector's. head_shard_sum: RingSelectionInputs::head_shard_sum.
RingAttentionResult ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const std::shared_ptr<const RingGeometry>& geometry, RingPatternSelector& selector,
                                   const AttentionBudgetRequest& request, double scale, int64_t layer,
                                   const std::shared_ptr<RingContext>& context,
                                   const std::function<void(std::vector<double>&)>& head_shard_sum = {});
// The same, building the geometry for this one call.
RingAttentionResult ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const CpSharding& sharding, RingPatternSelector& selector,
                                   const AttentionBudgetRequest& request, double scale,
                                   const std::shared_ptr<RingContext>& context);

}  // namespace sb
