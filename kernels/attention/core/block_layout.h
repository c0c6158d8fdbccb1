#pragma once
// The block layout every block-sparse attention call shares (docs/attention_patterns.md,
// "The block-sparse core"): the keys of every sequence are cut into blocks of block_size
// tokens from the sequence's first token (the last block may be partial); blocks are
// numbered globally over the packed call. A pattern says which key blocks each query
// block reads (a routing, a pattern's index); the layout is the same for all of them.
//
// Queries are the LAST n_s of a sequence's L_s positions: n_s = L_s in training (q, k
// and v cover the same tokens); n_s < L_s when decoding with a key/value cache. A
// query at position p belongs to block p / block_size. Only blocks holding at least one
// query are "query blocks" (rows of a block selection).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

struct LayoutBlock {
  int64_t sequence = 0;
  int64_t index_in_sequence = 0;  // j: keys [j * block_size, ...) of the sequence
  int64_t key_start = 0;          // first token of the block in the packed k / v
  int64_t key_len = 0;            // 1 .. block_size
  int64_t query_start = 0;        // first query of the block in the packed q
  int64_t query_len = 0;          // queries of the call in this block (0: not a query block)
  int64_t query_pos0 = 0;         // position inside the block of the first of them
};

struct BlockLayout {
  int64_t block_size = 0;
  bool causal = true;
  std::vector<LayoutBlock> blocks;             // global block order: sequence, then index
  std::vector<int64_t> sequence_first_block;  // size num_sequences + 1
  int64_t max_blocks_per_sequence = 0;
  int64_t total_keys = 0;
  int64_t total_queries = 0;

  // keys: cu_seqlens of k / v; queries: cu_seqlens of q, with queries(s) <= keys(s).
  static BlockLayout build(const PackedSequences& keys, const PackedSequences& queries,
                          int64_t block_size, bool causal);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks.size()); }
  int64_t num_sequences() const { return static_cast<int64_t>(sequence_first_block.size()) - 1; }
  int64_t blocks_in_sequence(int64_t s) const {
    return sequence_first_block[s + 1] - sequence_first_block[s];
  }
  // Blocks a query of block b may route to: [first, end) in global numbering, the
  // diagonal b included. Causal: the sequence's blocks up to b; otherwise all of them.
  int64_t eligible_first(int64_t b) const { return sequence_first_block[blocks[b].sequence]; }
  int64_t eligible_end(int64_t b) const {
    return causal ? b + 1 : sequence_first_block[blocks[b].sequence + 1];
  }
};

// The blocks as a table the kernels read (it also travels through autograd):
// int64 [NB, kBlockFields] on the CPU, one row per block, columns in this order.
enum BlockField : int64_t {
  kBlockKeyStart = 0,
  kBlockKeyLen,
  kBlockQueryStart,
  kBlockQueryLen,
  kBlockQueryPos0,
  kBlockFields
};
at::Tensor block_layout_table(const BlockLayout& layout);

}  // namespace sb
