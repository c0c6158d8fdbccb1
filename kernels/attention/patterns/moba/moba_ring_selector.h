#pragma once
// MoBA under context parallelism (docs/context_parallel.md, "MoBA under CP"): the gate
// needs every key block's mean and every query block's mean. Each rank sums its own
// tokens per block (float64), one all-reduce over the CP group completes the sums, and
// every rank routes the same numbers (moba_route_from_means), so selections, budgets,
// DST's floor and coverage are identical on all ranks. The sums and the all-reduce are the
// call's kRingSelectionStep event.

#include <cstdint>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/ring/ring_pattern_selector.h"

namespace sb {

class MobaRingSelector : public RingPatternSelector {
 public:
  // block_size >= 1, default_top_k >= 1 (the budget without a request).
  MobaRingSelector(int64_t block_size, int64_t default_top_k);
  std::string name() const override { return "moba"; }
  int64_t block_size() const override { return block_size_; }
  RingCallPattern select(const RingSelectionInputs& in) override;

 private:
  int64_t block_size_;
  int64_t default_top_k_;
};

// The gate's inputs over the whole micro-batch: this rank's tokens (q [n, Hq, D], k
// [n, Hkv, D], `mine` their tiles) summed per block, completed by one all-reduce over the
// CP group, divided by the block sizes. Returns [Hq, NB, D] and [Hkv, NB, D] float64 on
// the host; records the call's kRingSelectionStep event.
std::pair<at::Tensor, at::Tensor> moba_ring_block_means(const at::Tensor& q, const at::Tensor& k,
                                                        const RingShardTiles& mine, const BlockLayout& layout,
                                                        RingContext& context, int64_t call);

}  // namespace sb
