#pragma once
// One ring step as the fused block-sparse kernels read it (block_sparse_plan.h), so a
// step on a GPU runs the same kernels as a one-rank block-sparse pattern
// (docs/context_parallel.md, "On GPUs"). The kernels' blocks become "slots": slot t holds this rank's query tile t as
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
// A selection's columns outside its blocks (ring_column_step_cpu.h) become a second set
// of tables: queries head-major (q as [Hq x Tq, 1, D], head h's row i at h x Tq + i), one
// block per (query head, query tile) holding those queries and the columns of the
// visiting shard its block keeps, gathered into copies. A block's columns all lie before
// the block's first token (RingColumnLists: its own key block is always one of its
// blocks), so every query sees every one: each block lists itself, without a causal
// mask; one without columns lists nothing.
//
// Built on the host (O(Hq x query tiles x listed key tiles or columns)); the CUDA steps
// copy them to the device.

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/ring/ring_column_step_cpu.h"
#include "kernels/attention/ring/ring_step_cpu.h"

namespace sb {

struct RingStepTables {
  // NS = max(query tiles, key tiles) slots (at least 1); slot t's query fields are
  // query tile t's rows (empty past the last), its key fields key tile t's rows. causal:
  // the rank's own step.
  BlockLayout slots;
  at::Tensor selected;     // int32 [Hq, NS, capacity] on the CPU: key slots, ascending, -1 padding
  at::Tensor count;        // int32 [Hq, NS]
  int64_t kept_pairs = 0;  // (query, key) pairs the step keeps, summed over query heads
};

// The tables of the step `shapes` describes (its scale is not used) for q_heads query
// heads. The own step is recognised by the key tiles being the query tiles.
RingStepTables ring_step_tables(const RingStepShapes& shapes, int64_t q_heads);

struct RingColumnStepTables {
  // Hq x query tiles blocks, block h x tiles + t: query head h's rows of query tile t
  // (head-major rows), and its gathered columns. Not causal.
  BlockLayout blocks;
  at::Tensor selected;     // int32 [1, NB, 1] on the CPU: the block itself, or -1
  at::Tensor count;        // int32 [1, NB]
  at::Tensor key_rows;     // int64 [gathered] on the CPU: row r of the copies is row key_rows[r]
                           // of k taken as [Tk x Hkv, D] (token t's key/value head g at t x Hkv + g)
  int64_t kept_pairs = 0;  // summed over query heads, as ring_column_step_forward counts them
};

// The columns' tables of the step of `queries` against the visiting shard `keys`.
// Throws c10::Error (TORCH_CHECK) for a column at or after its block's first token, which
// the lists never hold.
RingColumnStepTables ring_column_step_tables(const RingShardTiles& queries, const RingShardTiles& keys,
                                             const RingColumnLists& columns, int64_t q_heads, int64_t kv_heads);

}  // namespace sb
