#pragma once
// The vertical-slash pattern (vertical_slash_blocks.h) as two calls of the fused
// block-sparse kernels (docs/vertical_slash.md, "On GPUs"), built on the host from the index:
//
//   slash part     the key blocks the kept slashes reach, whole: a causal MoBA-shaped layout
//                  of index.block_size tokens over the packed sequences and a per-(query
//                  head, query block) list of key blocks. Offset 0 is always kept, so every
//                  query block lists its own (diagonal) block.
//   vertical part  the kept verticals outside those blocks: all lie in earlier key blocks,
//                  so every query of the block sees them. Queries are taken head-major
//                  (q as [Hq x T, 1, D]: head h's token t is row h x T + t); for sequence
//                  s, query head h and query block m (in that order) the layout has one
//                  block holding those queries together with their own key range: the
//                  head's verticals for that block, gathered into a separate key tensor
//                  (row r of it is row vertical_rows[r] of k taken key/value-head-major,
//                  [Hkv x T, D]). Each block lists itself, without a causal mask; a block
//                  with no verticals lists nothing. The rows are found with ATen ops on
//                  the device the plan is built for (one copy of the per-block counts to
//                  the host); the slash part's lists are built on the host.
//
// A slash d = e x B + r reaches from query block m (with `rows` queries) the key blocks
// m - e (when r < rows) and m - e - 1 (when r > 0): per head one set of block offsets for
// full query blocks and one for a sequence's last, partial one.
//
// The two parts' outputs merge by their log-sum-exps, and their backwards with the merged
// output and log-sum-exp give the pattern's gradients (the flash-attention identity
// dS = P (dP - rowsum(dO O)) holds per key subset when P uses the whole row's lse).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

struct VerticalSlashBlockSparsePlan {
  BlockLayout slash_layout;         // causal, index.block_size tokens per block
  at::Tensor slash_selected;       // int32 [Hq, NB, capacity] (host), -1 padding
  at::Tensor slash_count;          // int32 [Hq, NB] (host)
  BlockLayout vertical_layout;      // Hq x NB blocks (sequence, head, query block), not causal
  at::Tensor vertical_selected;    // int32 [1, Hq x NB, 1] (host): the block itself, or -1
  at::Tensor vertical_count;       // int32 [1, Hq x NB] (host)
  at::Tensor vertical_rows;        // int64 [gathered] on `device`: rows of k as [Hkv x T, D]
  int64_t kept_pairs = 0;          // the mask's (query, key) pairs over every query head
  std::vector<int64_t> kept_pairs_per_sequence;
};

// index [sequence][query head] with one block_size throughout; q_heads % kv_heads == 0;
// device: where vertical_rows is found and kept; max_batch_elements: the most (head, query
// block, vertical) entries of a sequence examined at once (heads are taken in batches
// within it: the search holds a few int64 tensors of that size). Throws
// std::invalid_argument when the index does not fit the packing.
VerticalSlashBlockSparsePlan vertical_slash_block_sparse_plan(
    const PackedSequences& sequences, const std::vector<std::vector<VerticalSlashHeadIndex>>& index, int64_t q_heads,
    int64_t kv_heads, const at::Device& device = at::Device(at::kCPU), int64_t max_batch_elements = int64_t{1} << 25);

}  // namespace sb
