#pragma once
// One ring step as the fused block-sparse kernels read it (block_sparse_plan.h), so a
// step on a GPU runs the same kernels as one-rank MoBA (docs/context_parallel.md, "On
// GPUs"). The kernels' blocks become "slots": slot t holds this rank's query tile t as
// its queries and the visiting shard's key tile t as its keys (RingShardTiles: runs of
// consecutive tokens inside one attention block). Each (query head, query slot) lists
// the key slots the step's pattern keeps, exactly as ring_step_cpu.cpp walks them:
//
// - a key tile of a block the pattern selects for the query tile's block, except one of
//   the same block that lies after the query tile;
// - two different tiles never overlap, so every listed tile is seen whole, except the
//   query tile's own tile on the rank's own step (source = this rank), whose mask is
//   causal with queries and keys aligned: that step's slots are a causal layout (the
//   kernels mask the diagonal slot), every other step's a non-causal one.
//
// Built on the host (O(Hq x query tiles x listed key tiles)); the CUDA step copies it to
// the device.

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "kernels/attention/moba/moba_layout.h"
#include "kernels/attention/ring/ring_step_cpu.h"

namespace sb {

struct RingStepTables {
  // NS = max(query tiles, key tiles) slots (at least 1); slot t's query fields are
  // query tile t's rows (empty past the last), its key fields key tile t's rows. causal:
  // the rank's own step.
  MobaLayout slots;
  at::Tensor selected;     // int32 [Hq, NS, capacity] on the CPU: key slots, ascending, -1 padding
  at::Tensor count;        // int32 [Hq, NS]
  int64_t kept_pairs = 0;  // (query, key) pairs the step keeps, summed over query heads
};

// The tables of the step `shapes` describes (its scale is not used) for q_heads query
// heads. The own step is recognised by the key tiles being the query tiles.
RingStepTables ring_step_tables(const RingStepShapes& shapes, int64_t q_heads);

}  // namespace sb
