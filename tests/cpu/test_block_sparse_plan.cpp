// The tables the fused block-sparse kernels read (block_sparse_plan.h), on the CPU:
// tiles counted by hand on a packed decoding layout, and the inverted lists against a
// plain loop over random routings with padding and empty rows.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention/core/block_sparse_plan.h"

namespace sb {
namespace {

std::vector<int32_t> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<int32_t>(c.const_data_ptr<int32_t>(), c.const_data_ptr<int32_t>() + c.numel());
}

TEST(BlockSparsePlan, TilesAndBlockTableOfAPackedDecodingLayout) {
  // Keys 150 and 70, queries the last 100 and 70; blocks of 64:
  //   sequence 0: blocks [0, 64) [64, 128) [128, 150); queries at positions 50 .. 149
  //   sequence 1: blocks [0, 64) [64, 70); every position a query
  const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths({150, 70}),
                                              PackedSequences::from_lengths({100, 70}), 64, true);
  ASSERT_EQ(layout.num_blocks(), 5);
  const at::Tensor selected = at::full({2, 5, 1}, -1, at::kInt);
  const at::Tensor count = at::zeros({2, 5}, at::kInt);
  const BlockSparseTables t = block_sparse_tables(layout, selected, count, 0.125);
  const std::vector<int32_t> expected_table = {
      // key start, keys, query start, queries, first query's position in the block
      0,   64, 0,   14, 50,  //
      64,  64, 14,  64, 0,   //
      128, 22, 78,  22, 0,   //
      150, 64, 100, 64, 0,   //
      214, 6,  164, 6,  0};
  EXPECT_EQ(values(t.block_table), expected_table);
  // One query tile per block here (no block holds more than 64 queries); a key tile each.
  EXPECT_EQ(values(t.query_tiles), (std::vector<int32_t>{0, 0, 1, 0, 2, 0, 3, 0, 4, 0}));
  EXPECT_EQ(values(t.key_tiles), (std::vector<int32_t>{0, 0, 1, 0, 2, 0, 3, 0, 4, 0}));
  EXPECT_EQ(t.num_queries, 170);
  EXPECT_EQ(t.num_keys, 220);
  EXPECT_TRUE(t.causal);
  EXPECT_DOUBLE_EQ(t.scale, 0.125);
}

TEST(BlockSparsePlan, BlocksLargerThanATileGetSeveralTiles) {
  // One sequence of 300 tokens in blocks of 256: tiles at 0, 64, 128, 192 of block 0 and
  // 0 of block 1 (44 tokens).
  const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths({300}),
                                              PackedSequences::from_lengths({300}), 256, true);
  const BlockSparseTables t =
      block_sparse_tables(layout, at::full({1, 2, 1}, -1, at::kInt), at::zeros({1, 2}, at::kInt), 1.0);
  const std::vector<int32_t> tiles = {0, 0, 0, 64, 0, 128, 0, 192, 1, 0};
  EXPECT_EQ(values(t.query_tiles), tiles);
  EXPECT_EQ(values(t.key_tiles), tiles);
}

TEST(BlockSparsePlan, RejectsARoutingOfAnotherShape) {
  const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths({100}),
                                              PackedSequences::from_lengths({100}), 64, true);
  EXPECT_THROW(block_sparse_tables(layout, at::zeros({1, 3, 1}, at::kInt), at::zeros({1, 3}, at::kInt), 1.0),
               c10::Error);
  EXPECT_THROW(block_sparse_tables(layout, at::zeros({1, 2, 1}, at::kLong), at::zeros({1, 2}, at::kInt), 1.0),
               c10::Error);
}

TEST(BlockSparsePlan, InverseListsEqualAPlainLoop) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t heads = 1 + rng() % 4, blocks = 1 + rng() % 9, capacity = 1 + rng() % 5;
    at::Tensor selected = at::full({heads, blocks, capacity}, -1, at::kInt);
    int32_t* s = selected.mutable_data_ptr<int32_t>();
    for (int64_t row = 0; row < heads * blocks; ++row) {
      // A random subset of the blocks (size 0 .. capacity), ascending, padded with -1.
      std::vector<int32_t> all(blocks);
      for (int64_t j = 0; j < blocks; ++j) all[j] = static_cast<int32_t>(j);
      std::shuffle(all.begin(), all.end(), rng);
      const int64_t n = std::min<int64_t>(blocks, rng() % (capacity + 1));
      std::sort(all.begin(), all.begin() + n);
      for (int64_t i = 0; i < n; ++i) s[row * capacity + i] = all[i];
    }
    const BlockSparseInverse inverse = block_sparse_inverse(selected);
    const std::vector<int32_t> offsets = values(inverse.offsets), listed = values(inverse.blocks);
    ASSERT_EQ(static_cast<int64_t>(offsets.size()), heads * blocks + 1);
    EXPECT_EQ(offsets.front(), 0);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < blocks; ++j) {
        std::vector<int32_t> expected;  // query blocks b whose row (h, b) lists j, ascending
        for (int64_t b = 0; b < blocks; ++b) {
          for (int64_t i = 0; i < capacity; ++i) {
            if (s[(h * blocks + b) * capacity + i] == j) expected.push_back(static_cast<int32_t>(b));
          }
        }
        const int64_t r = h * blocks + j;
        const std::vector<int32_t> got(listed.begin() + offsets[r], listed.begin() + offsets[r + 1]);
        EXPECT_EQ(got, expected) << "trial " << trial << " head " << h << " key block " << j;
      }
    }
  }
}

}  // namespace
}  // namespace sb
