#pragma once
// One step of ring attention on the CPU: the queries a rank holds against the key/value
// shard visiting it, under a block pattern (ring_pattern_selector.h). Work
// and memory follow the kept (query, key) pairs: the shards are cut into tiles (runs of
// consecutive tokens inside one attention block) and only tile pairs whose key block
// the pattern keeps are computed; no [Tq, Tk] matrix is formed.
//
// Shapes: q [Tq, Hq, D] (the rank's queries), k, v [Tk, Hkv, D] (the visiting shard),
// contiguous, float32 or float64; Hq % Hkv == 0.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/block_layout.h"

namespace sb {

// A run of a shard's tokens with consecutive global indices inside one attention block.
struct RingTile {
  int64_t local_start = 0;   // first row in the shard's tensors
  int64_t length = 0;
  int64_t global_start = 0;  // global token index (packed micro-batch) of the first
  int64_t block = 0;         // global attention block (BlockLayout numbering)
  int64_t sequence = 0;      // the packed sequence it belongs to
  int64_t position = 0;      // its first token's position in that sequence
};

struct RingShardTiles {
  std::vector<RingTile> tiles;                // ascending global order
  std::vector<int64_t> first_tile_of_block;  // size NB + 1: block j's tiles are [first[j], first[j + 1])
  int64_t tokens = 0;

  // tokens: a shard's global indices, ascending; layout: the micro-batch's blocks (keys
  // and queries are the same packed tokens).
  static RingShardTiles build(const std::vector<int64_t>& tokens, const BlockLayout& layout);

  // The row of global token `token` in the shard, or -1 where the shard does not hold it.
  int64_t row_of(int64_t token) const;
  // [tokens] the attention block of each row of the shard.
  std::vector<int64_t> block_of_rows() const;
};

// Which key blocks the queries of a block attend to: the selection of every (head,
// query block), global block ids ascending, the diagonal included (causal inside it).
struct RingBlockPattern {
  at::Tensor selected;  // [Hs, NB, kcap] int32, -1 padding; Hs = 1 (all heads alike) or Hq
  at::Tensor count;     // [Hs, NB] int32
  // A band inside the listed blocks (band_window empty: none): query position p of sequence
  // s keeps key position j (positions in the sequence) only when p - j < band_window[s] or
  // j < band_sinks, for a pattern whose kept keys end inside a block (a sliding window).
  // The CPU steps apply it; the GPU steps refuse it.
  std::vector<int64_t> band_window;
  int64_t band_sinks = 0;

  // Every block of the sequence up to the diagonal, all heads alike (causal attention
  // over the whole sequence).
  static RingBlockPattern causal(const BlockLayout& layout);
};

struct RingStepShapes {
  const RingShardTiles& queries;
  const RingShardTiles& keys;
  const RingBlockPattern& pattern;
  double scale;
};

// Partial attention of the queries over this shard's keys: out_step [Tq, Hq, D] and
// lse_step [Tq, Hq] (-inf, with out 0, where a query keeps no key of the shard), both
// overwritten. Returns the kept (query, key) pairs summed over query heads.
int64_t ring_step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const RingStepShapes& shapes, at::Tensor& out_step, at::Tensor& lse_step);

// The step's gradients, given the final (merged) lse [Tq, Hq] and delta = rowsum(dO * O)
// [Tq, Hq]: adds into dq [Tq, Hq, D] and into the visiting shard's dk, dv [Tk, Hkv, D].
// Deterministic for a given thread count. Returns the kept pairs, as the forward.
int64_t ring_step_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const at::Tensor& lse, const at::Tensor& delta,
                        const RingStepShapes& shapes, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv);

// Merges a step's partial result into the running one (online softmax):
// lse = logaddexp(lse, lse_step), out = out * exp(lse_old - lse) + out_step * exp(lse_step - lse),
// with -inf on both sides leaving out at 0.
void ring_merge_partial(at::Tensor& out, at::Tensor& lse, const at::Tensor& out_step, const at::Tensor& lse_step);

}  // namespace sb
