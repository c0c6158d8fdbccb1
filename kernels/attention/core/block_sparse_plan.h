#pragma once
// What the fused block-sparse attention kernels read (docs/block_sparse_attention.md):
// the block layout, a per-(query head, query block) list of key blocks, and the tiles
// the kernels' thread blocks take. Built on the host from the layout (no device work
// besides copies) and, for the backward, the inverted list on the device with ATen ops
// (sort + searchsorted: no host synchronisation), so it also runs on the CPU where
// tests check it against a plain loop.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "kernels/attention/core/block_layout.h"

namespace sb {

// Rows of query and keys one thread block takes (a query tile: its rows of one query
// block; a key tile: its keys of one key block).
constexpr int64_t kBlockSparseTile = 64;

// Columns of BlockSparseTables::block_table (int32), one row per block: the layout's block
// table (block_layout_table), under the names the kernels use.
enum BlockSparseBlockField : int64_t {
  kBsKeyStart = kBlockKeyStart,
  kBsKeyLen = kBlockKeyLen,
  kBsQueryStart = kBlockQueryStart,
  kBsQueryLen = kBlockQueryLen,
  kBsQueryPos0 = kBlockQueryPos0,  // position inside the block of its first query (decoding: > 0)
  kBsBlockFields = kBlockFields
};

struct BlockSparseTables {
  at::Tensor block_table;     // int32 [NB, kBsBlockFields]
  // Key blocks per routing row (query head h, query block b), row h * NB + b: global
  // block ids, any order, no repeats, -1 padding after selected_count entries. A
  // causal layout masks the diagonal block (j == b) bottom-right aligned: the query at
  // in-block position p sees its keys 0 .. p; every other listed block is seen whole.
  at::Tensor selected;        // int32 [Hq, NB, capacity]
  at::Tensor selected_count;  // int32 [Hq, NB]
  at::Tensor query_tiles;     // int32 [n, 2]: (block, first query row in the block)
  at::Tensor key_tiles;       // int32 [m, 2]: (block, first key in the block)
  int64_t num_queries = 0, num_keys = 0;  // Tq, Tk the block table indexes
  bool causal = true;
  double scale = 1.0;
};

// The tables for a layout and a routing on `device` (selected and selected_count are
// taken as they are: int32, on that device). Host tables travel through pinned memory
// without waiting for the device.
BlockSparseTables block_sparse_tables(const BlockLayout& layout, const at::Tensor& selected,
                                      const at::Tensor& selected_count, double scale);

// The inverted lists the key/value-gradient kernel walks: for routing row r = h * NB + j
// (query head h, KEY block j), the query blocks b whose row (h, b) lists j, ascending,
// are blocks[offsets[r] .. offsets[r + 1]). offsets int32 [Hq * NB + 1], blocks int32
// (entries past offsets[Hq * NB] are unused). On selected's device; no host sync.
struct BlockSparseInverse {
  at::Tensor offsets, blocks;
};
BlockSparseInverse block_sparse_inverse(const at::Tensor& selected);

}  // namespace sb
