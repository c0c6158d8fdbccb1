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
// Patterns: dense causal, MoBA, or MTraining's vertical-slash. MoBA's gate needs every
// key block's mean and every query block's mean: each rank sums its own tokens per block
// (float64), one all-reduce over the CP group completes the sums, and every rank runs the
// same routing on the same numbers, so selections, budgets, DST floor and coverage are
// identical on all ranks. Vertical-slash's index is built the same way
// (ring_vertical_slash_index.h); its slash blocks run as a block pattern, its columns
// as a second partial per step (ring_column_step_cpu.h).

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention/moba/moba_attention.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_step_cpu.h"
#include "kernels/attention/vertical_slash/vertical_slash_budget.h"
#include "kernels/attention/vertical_slash/vertical_slash_index.h"

namespace sb {

// The step number of the pattern's shared statistics under CP (MoBA's block means,
// vertical-slash's index scores: their local sums, then the all-reduces).
inline constexpr int64_t kRingBlockMeansStep = -1;

// One step of one rank's ring, forward or backward; every wait of an attention call lies
// in one of its events (the last step's wait also holds the sends' delivery and, in the
// backward, the accumulator's way home; a round's last step the round's outer waits).
struct RingStepEvent {
  int64_t call = 0;         // the attention call (one per layer forward) it belongs to
  bool backward = false;
  int64_t step = 0;         // 0 .. W - 1 (outer round * inner size + inner step);
                            // kRingBlockMeansStep for MoBA's block means
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
  // Sums (or takes the max of) `tensor` over the CP group in place, within the timeout;
  // throws std::runtime_error naming this rank, `what` and the attention call otherwise.
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

struct RingAttentionSpec {
  int64_t block_size = 256;  // attention blocks: MoBA's key blocks, vertical-slash's blocks;
                             // dense: the compute tiles
  bool moba = false;
  MobaParams moba_params;    // moba: budget, floor, curve (block_size and scale taken from here)
  bool vertical_slash = false;
  VerticalSlashParams vertical_slash_params;  // its block_size must be the spec's
  VerticalSlashBudgetRequest vertical_slash_request;  // DST's budget and floor (empty: the params' rule)
  // vertical-slash under TP beside CP: sums over the TP ranks' head shards, for a budget's
  // level (null: this rank holds every head; MoBA's is moba_params.sum_over_head_shards)
  std::function<void(std::vector<double>&)> vertical_slash_head_shard_sum;
  double scale = 0.0;        // softmax scale (> 0)
};

struct RingAttentionResult {
  at::Tensor out;       // [n, Hq, D], differentiable with respect to q, k, v
  at::Tensor lse;       // [n, Hq]
  MobaRouting routing;  // moba: the micro-batch's routing (the same on every CP rank)
  // vertical-slash: [sequence][query head], the same on every CP rank
  std::vector<std::vector<VerticalSlashHeadIndex>> vertical_slash_index;
  // vertical-slash with a request: the search's levels and references (index moved out)
  std::optional<VerticalSlashBudgetedIndex> vertical_slash_budget;
};

// What every attention call of one micro-batch shares: its blocks, every rank's tiles,
// and (dense) the block pattern. Built once per micro-batch, not once per layer.
struct RingGeometry {
  int64_t cp = 1;
  PackedSequences sequences;  // the micro-batch's
  MobaLayout layout;
  std::vector<RingShardTiles> shards;  // per CP rank
  RingBlockPattern dense_pattern;      // built only for dense attention

  static std::shared_ptr<const RingGeometry> build(const CpSharding& sharding, int64_t block_size, bool dense);
};

// q [n, Hq, D], k, v [n, Hkv, D]: the tokens sharding.tokens_of(context.rank()) of the
// packed micro-batch, on the CPU, float32 or float64. Every rank of the group calls it
// with the same geometry and spec, in the same order as its other ring calls; the
// geometry's block size and pattern kind must be the spec's.
RingAttentionResult ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const std::shared_ptr<const RingGeometry>& geometry,
                                   const RingAttentionSpec& spec, const std::shared_ptr<RingContext>& context);
// The same, building the geometry for this one call.
RingAttentionResult ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const CpSharding& sharding, const RingAttentionSpec& spec,
                                   const std::shared_ptr<RingContext>& context);

}  // namespace sb
