#pragma once
// Key blocks a selection keeps per query token rather than per query block
// (ring_pattern_selector.h): MoBA's token gate under context parallelism, where each
// query keeps its own block (causal, in the call's RingBlockPattern) and its own choice of
// earlier blocks, listed here and run as a further partial result of each ring step,
// merged like the others (docs/context_parallel.md, "MoBA's token gate under CP").
//
// Every listed block lies wholly before its query (an earlier block of the query's
// sequence), so no mask applies. Shapes as ring_step_cpu.h: q [Tq, Hq, D] (the rank's
// queries), k, v [Tk, Hkv, D] (the visiting shard), contiguous, float32 or float64.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/ring/ring_step_cpu.h"

namespace sb {

struct RingQueryBlockLists {
  // selected: int32 [Hq, Tq, cap] on the CPU, per (query head, row of the rank's queries)
  // the global key blocks kept besides the query's own, ascending, -1 padding.
  // num_blocks: the micro-batch's attention blocks. Throws c10::Error (TORCH_CHECK) for a
  // block id outside [0, num_blocks).
  RingQueryBlockLists(at::Tensor selected, int64_t num_blocks);

  at::Tensor selected;
  int64_t heads = 0, blocks = 0;
  // The rows reading each (head, block), ascending: rows [first[i], first[i + 1]) of
  // `readers` for i = head x blocks + block.
  std::vector<int64_t> first;
  std::vector<int64_t> readers;
};

// The lists' partial attention over the visiting shard (`keys`: its tiles): out_step
// [Tq, Hq, D] and lse_step [Tq, Hq] overwritten (-inf, with out 0, where a query keeps no
// key of the shard). Query heads run in parallel; each query's keys go in ascending
// order, so results repeat bit for bit. Returns the kept (query, key) pairs summed over
// query heads.
int64_t ring_query_block_step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const RingShardTiles& keys, const RingQueryBlockLists& lists, double scale,
                                      at::Tensor& out_step, at::Tensor& lse_step);

// Their gradients given the final lse and delta = rowsum(dO * O) [Tq, Hq]: adds into dq
// and into the visiting shard's dk, dv (key/value heads in parallel, each owning its
// rows). Returns the kept pairs, as the forward.
int64_t ring_query_block_step_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const at::Tensor& lse, const at::Tensor& delta,
                                       const RingShardTiles& keys, const RingQueryBlockLists& lists, double scale,
                                       at::Tensor& dq, at::Tensor& dk, at::Tensor& dv);

}  // namespace sb
