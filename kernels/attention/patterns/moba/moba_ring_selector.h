#pragma once
// MoBA under context parallelism (docs/context_parallel.md, "MoBA under CP"). Each rank
// sums its own tokens per block (float64) and one all-reduce over the CP group completes
// the sums. The block gate then routes the same query-block and key-block means on every
// rank (moba_route_from_means), so selections, budgets, DST's floor and coverage are
// identical on all ranks. The token gate routes each rank's own queries against every
// key block's mean (moba_route_token_runs): the ring keeps each query's own block as the
// block pattern (causal) and its earlier blocks as per-query lists
// (ring_query_block_step_cpu.h), and the floor, curve and coverage are summed over the
// group. The selection, with its all-reduces as wait, is the call's kRingSelectionStep event.

#include <cstdint>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_gate.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/ring/ring_pattern_selector.h"
#include "kernels/attention/ring/ring_selection_timer.h"

namespace sb {

class MobaRingSelector : public RingPatternSelector {
 public:
  // block_size >= 1, default_top_k >= 1 (the budget without a request).
  MobaRingSelector(int64_t block_size, int64_t default_top_k, MobaGate gate = MobaGate::kBlock);
  std::string name() const override { return "moba"; }
  int64_t block_size() const override { return block_size_; }
  RingCallPattern select(const RingSelectionInputs& in) override;

 private:
  int64_t block_size_;
  int64_t default_top_k_;
  MobaGate gate_;
};

// The gate's inputs over the whole micro-batch: this rank's tokens (q [n, Hq, D], k
// [n, Hkv, D], `mine` their tiles) summed per block, completed by one all-reduce over the
// CP group (timed by `timer`), divided by the block sizes. Returns [NB, Hq, D] (empty
// without with_queries) and [NB, Hkv, D], float64 on q's device.
std::pair<at::Tensor, at::Tensor> moba_ring_block_means(const at::Tensor& q, const at::Tensor& k,
                                                        const RingShardTiles& mine, const BlockLayout& layout,
                                                        RingSelectionTimer& timer, bool with_queries);

}  // namespace sb
