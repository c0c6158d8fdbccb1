#pragma once
// Single key columns a selection keeps outside its key blocks (ring_pattern_selector.h),
// as a second partial result of each ring step, merged like the first: a pattern whose
// kept keys are not whole blocks runs its blocks as a RingBlockPattern and the rest here
// (docs/context_parallel.md).
//
// Shapes as ring_step_cpu.h: q [Tq, Hq, D] (the rank's queries), k, v [Tk, Hkv, D] (the
// visiting shard), contiguous, float32 or float64.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/ring/ring_step_cpu.h"

namespace sb {

// The kept columns outside the blocks. Each (sequence, query head)'s columns are kept
// once; query block b's columns are those of its sequence at or before its last query
// whose key block is not one of b's blocks (so memory is O(S x Hq x columns), not a list
// per query block). Every query block keeps its own key block among its blocks.
struct RingColumnLists {
  int64_t heads = 0, block_size = 1;
  std::vector<std::vector<int64_t>> head_columns;  // [S x Hq]: global token indices, ascending
  std::vector<int64_t> block_sequence;          // [NB]
  std::vector<int64_t> block_last;              // [NB]: global index of the block's last token
  std::vector<int64_t> sequence_offset;         // [S]: global index of the sequence's first token
  std::vector<int64_t> sequence_first_block;    // [S]
  at::Tensor selected, count;                   // the blocks (RingCallPattern::blocks)

  // Query block `block`'s columns for `head`, global indices ascending, into `out`.
  void of(int64_t head, int64_t block, std::vector<int64_t>& out) const;
  // Columns over every (head, query block): the column steps' share of the pattern.
  int64_t total() const;
};

// The columns' partial attention over the visiting shard (`keys`: its tiles): out_step
// [Tq, Hq, D] and lse_step [Tq, Hq] overwritten (-inf, with out 0, where a query keeps no
// column of the shard). Returns the kept (query, key) pairs summed over query heads.
int64_t ring_column_step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const RingShardTiles& queries, const RingShardTiles& keys,
                                 const RingColumnLists& columns, double scale, at::Tensor& out_step,
                                 at::Tensor& lse_step);

// Their gradients given the final lse and delta = rowsum(dO * O) [Tq, Hq]: adds into dq
// and into the visiting shard's dk, dv. Returns the kept pairs, as the forward.
int64_t ring_column_step_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v, const at::Tensor& lse, const at::Tensor& delta,
                                  const RingShardTiles& queries, const RingShardTiles& keys,
                                  const RingColumnLists& columns, double scale, at::Tensor& dq, at::Tensor& dk,
                                  at::Tensor& dv);

}  // namespace sb
