// A ring step as the fused block-sparse kernels' tables (ring_step_tables.h): the mask the
// kernels read from the tables (block_sparse_plan.h: every listed key slot whole, the
// diagonal slot of a causal layout bottom-right aligned) equals the step's mask written
// from global positions, and the kept pairs equal the CPU step's, for every layout, CP
// size, dense, MoBA and vertical-slash's columns; one step worked out by hand. The CUDA step itself:
// tests/cuda/test_ring_attention_cuda.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_column_step_cpu.h"
#include "kernels/attention/ring/ring_step_cpu.h"
#include "kernels/attention/ring/ring_step_tables.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_pattern.h"
#include "tests/support/ring_attention_cases.h"

namespace sb {
namespace {

// [Hq, Tq, Tk]: what the kernels compute from the tables.
at::Tensor mask_the_kernels_read(const RingStepTables& t, int64_t q_heads) {
  at::Tensor mask = at::zeros({q_heads, t.slots.total_queries, t.slots.total_keys}, at::kBool);
  const auto selected = t.selected.accessor<int32_t, 3>();
  const auto count = t.count.accessor<int32_t, 2>();
  for (int64_t h = 0; h < q_heads; ++h) {
    for (int64_t b = 0; b < t.slots.num_blocks(); ++b) {
      const LayoutBlock& query = t.slots.blocks[b];
      for (int64_t n = 0; n < count[h][b]; ++n) {
        const int64_t j = selected[h][b][n];
        if (n > 0) EXPECT_LT(selected[h][b][n - 1], j) << "key slots ascending, no repeats";
        const LayoutBlock& key = t.slots.blocks[j];
        for (int64_t i = 0; i < query.query_len; ++i) {
          for (int64_t c = 0; c < key.key_len; ++c) {
            const bool seen = !(t.slots.causal && j == b) || c <= query.query_pos0 + i;
            if (seen) mask[h][query.query_start + i][key.key_start + c] = true;
          }
        }
      }
    }
  }
  return mask;
}

// [Hq, Tq, Tk]: the step's mask from global positions: same sequence, causal, and the
// key's block selected for the query's block.
at::Tensor mask_by_the_rule(const CpSharding& sharding, int64_t rank, int64_t source, const BlockLayout& layout,
                            const RingBlockPattern& pattern, int64_t q_heads) {
  const std::vector<int64_t> queries = sharding.tokens_of(rank), keys = sharding.tokens_of(source);
  std::vector<int64_t> block_of(static_cast<size_t>(layout.total_keys));
  for (int64_t b = 0; b < layout.num_blocks(); ++b) {
    for (int64_t t = 0; t < layout.blocks[b].key_len; ++t) block_of[layout.blocks[b].key_start + t] = b;
  }
  const auto selected = pattern.selected.accessor<int32_t, 3>();
  const auto count = pattern.count.accessor<int32_t, 2>();
  at::Tensor mask = at::zeros({q_heads, static_cast<int64_t>(queries.size()), static_cast<int64_t>(keys.size())}, at::kBool);
  for (int64_t h = 0; h < q_heads; ++h) {
    const int64_t ph = pattern.selected.size(0) == 1 ? 0 : h;
    for (size_t i = 0; i < queries.size(); ++i) {
      const int64_t qb = block_of[queries[i]];
      for (size_t c = 0; c < keys.size(); ++c) {
        const int64_t kb = block_of[keys[c]];
        if (keys[c] > queries[i] || layout.blocks[kb].sequence != layout.blocks[qb].sequence) continue;
        for (int64_t n = 0; n < count[ph][qb]; ++n) {
          if (selected[ph][qb][n] == kb) mask[h][static_cast<int64_t>(i)][static_cast<int64_t>(c)] = true;
        }
      }
    }
  }
  return mask;
}

TEST(RingStepTables, TheKernelsMaskIsTheStepsForEveryLayout) {
  for (int64_t cp : {1, 2, 3, 4}) {
    for (const test::RingCase& c : test::ring_cases(2)) {
      // The patterns the GPU tables take: dense and MoBA's block gate.
      if (c.vertical_slash || c.gate == MobaGate::kToken || c.dtype != at::kDouble) continue;
      const PackedSequences sequences = PackedSequences::from_lengths(c.lengths);
      const BlockLayout layout = BlockLayout::build(sequences, sequences, test::kRingBlock, true);
      const test::RingInputs in = test::ring_inputs(c.dtype, 11, c.lengths);
      const RingBlockPattern pattern = [&] {
        if (!c.moba) return RingBlockPattern::causal(layout);
        const MobaRouting routing = moba_route_cpu(in.q, in.k, layout, test::ring_moba_params());
        return RingBlockPattern{routing.selected, routing.selected_count};
      }();
      const CpSharding sharding = CpSharding::build(sequences, cp, c.layout);
      std::vector<RingShardTiles> shards;
      for (int64_t r = 0; r < cp; ++r) shards.push_back(RingShardTiles::build(sharding.tokens_of(r), layout));
      for (int64_t r = 0; r < cp; ++r) {
        const at::Tensor q = sharding.shard(in.q, r).contiguous();
        for (int64_t s = 0; s < cp; ++s) {
          const std::string what = c.name + " cp " + std::to_string(cp) + " rank " + std::to_string(r) + " shard " +
                                   std::to_string(s);
          const RingStepShapes shapes{shards[r], shards[s], pattern, test::ring_scale()};
          const RingStepTables tables = ring_step_tables(shapes, test::kRingQHeads);
          // Two empty shards look alike (and list nothing); any other pair is the own step only when r = s.
          if (!shards[r].tiles.empty()) EXPECT_EQ(tables.slots.causal, r == s) << what;
          const at::Tensor expected = mask_by_the_rule(sharding, r, s, layout, pattern, test::kRingQHeads);
          EXPECT_TRUE(at::equal(mask_the_kernels_read(tables, test::kRingQHeads), expected)) << what;
          EXPECT_EQ(tables.kept_pairs, expected.sum().item<int64_t>()) << what;
          const at::Tensor k = sharding.shard(in.k, s).contiguous();
          at::Tensor out = at::empty_like(q), lse = at::empty({q.size(0), q.size(1)}, q.options());
          EXPECT_EQ(tables.kept_pairs, ring_step_forward(q, k, k, shapes, out, lse)) << what;
        }
      }
    }
  }
}

// Vertical-slash's columns outside its slash blocks: the pairs the column tables give the
// kernels (each (head, query tile) block over its gathered rows) are the column step's, from
// global positions, and their count the CPU column step's.
TEST(RingStepTables, TheColumnTablesKeepTheColumnStepsPairs) {
  const int64_t q_heads = test::kRingQHeads, kv_heads = test::kRingKvHeads, group = q_heads / kv_heads;
  int64_t columns_seen = 0;
  for (int64_t cp : {1, 2, 3, 4}) {
    for (const test::RingCase& c : test::ring_cases(2)) {
      if (!c.vertical_slash || c.dtype != at::kDouble) continue;
      const PackedSequences sequences = PackedSequences::from_lengths(c.lengths);
      const BlockLayout layout = BlockLayout::build(sequences, sequences, test::kRingBlock, true);
      const test::RingInputs in = test::ring_inputs(c.dtype, 11, c.lengths);
      const RingCallPattern pattern = vertical_slash_ring_pattern(test::ring_vertical_slash_index_oracle(in), layout);
      const CpSharding sharding = CpSharding::build(sequences, cp, c.layout);
      std::vector<RingShardTiles> shards;
      for (int64_t r = 0; r < cp; ++r) shards.push_back(RingShardTiles::build(sharding.tokens_of(r), layout));
      for (int64_t r = 0; r < cp; ++r) {
        const std::vector<int64_t> queries = sharding.tokens_of(r);
        const at::Tensor q = sharding.shard(in.q, r).contiguous();
        for (int64_t s = 0; s < cp; ++s) {
          const std::string what = c.name + " cp " + std::to_string(cp) + " rank " + std::to_string(r) + " shard " +
                                   std::to_string(s);
          const std::vector<int64_t> keys = sharding.tokens_of(s);
          const RingColumnStepTables tables = ring_column_step_tables(shards[r], shards[s], *pattern.columns, q_heads, kv_heads);
          EXPECT_FALSE(tables.blocks.causal);
          const int64_t tq = static_cast<int64_t>(queries.size()), tk = static_cast<int64_t>(keys.size());
          // The kernels' pairs: block b lists itself; its queries (head-major rows) see its gathered rows.
          at::Tensor got = at::zeros({q_heads, tq, tk}, at::kBool);
          const auto rows = tables.key_rows.accessor<int64_t, 1>();
          for (int64_t b = 0; b < tables.blocks.num_blocks(); ++b) {
            const LayoutBlock& block = tables.blocks.blocks[b];
            if (tables.count[0][b].item<int32_t>() == 0) continue;
            EXPECT_EQ(tables.selected[0][b][0].item<int32_t>(), b) << what;
            const int64_t h = block.query_start / tq;
            for (int64_t i = 0; i < block.query_len; ++i) {
              for (int64_t c2 = 0; c2 < block.key_len; ++c2) {
                const int64_t row = rows[block.key_start + c2];
                EXPECT_EQ(row % kv_heads, h / group) << what;
                got[h][block.query_start - h * tq + i][row / kv_heads] = true;
              }
            }
          }
          // From global positions: the key is one of the query block's columns.
          at::Tensor expected = at::zeros_like(got);
          std::vector<int64_t> list;
          for (int64_t h = 0; h < q_heads; ++h) {
            for (const RingTile& tile : shards[r].tiles) {
              pattern.columns->of(h, tile.block, list);
              for (int64_t i = 0; i < tile.length; ++i) {
                for (size_t c2 = 0; c2 < keys.size(); ++c2) {
                  if (keys[c2] <= tile.global_start + i && std::binary_search(list.begin(), list.end(), keys[c2])) {
                    expected[h][tile.local_start + i][static_cast<int64_t>(c2)] = true;
                  }
                }
              }
            }
          }
          EXPECT_TRUE(at::equal(got, expected)) << what;
          EXPECT_EQ(tables.kept_pairs, expected.sum().item<int64_t>()) << what;
          const at::Tensor k = sharding.shard(in.k, s).contiguous();
          at::Tensor out = at::empty_like(q), lse = at::empty({q.size(0), q.size(1)}, q.options());
          EXPECT_EQ(tables.kept_pairs, ring_column_step_forward(q, k, k, shards[r], shards[s], *pattern.columns,
                                                                test::ring_scale(), out, lse))
              << what;
          columns_seen += tables.kept_pairs;
        }
      }
    }
  }
  EXPECT_GT(columns_seen, 0);  // the cases keep columns outside their slash blocks
}

// One sequence of 6 tokens, blocks of 4, stripes of 2 over 2 ranks: rank 0 holds tokens
// 0-1 (block 0) and 4-5 (block 1), rank 1 tokens 2-3 (block 0). Dense, one head.
TEST(RingStepTables, OneStepByHand) {
  const PackedSequences sequences = PackedSequences::from_lengths({6});
  const BlockLayout layout = BlockLayout::build(sequences, sequences, 4, true);
  const CpSharding sharding = CpSharding::build(sequences, 2, {CpLayoutKind::kStriped, 2});
  const RingShardTiles rank0 = RingShardTiles::build(sharding.tokens_of(0), layout);
  const RingShardTiles rank1 = RingShardTiles::build(sharding.tokens_of(1), layout);
  const RingBlockPattern dense = RingBlockPattern::causal(layout);
  const auto lists = [](const RingStepTables& t) {
    std::vector<std::vector<int32_t>> out;
    for (int64_t b = 0; b < t.count.size(1); ++b) {
      const at::Tensor row = t.selected[0][b].narrow(0, 0, t.count[0][b].item<int32_t>());
      out.emplace_back(row.data_ptr<int32_t>(), row.data_ptr<int32_t>() + row.numel());
    }
    return out;
  };
  using Lists = std::vector<std::vector<int32_t>>;
  // Rank 0's own step: tile 0 sees itself (causal: 3 pairs), tile 1 sees tile 0 whole and
  // itself causally (4 + 3).
  const RingStepTables own = ring_step_tables({rank0, rank0, dense, 1.0}, 1);
  EXPECT_TRUE(own.slots.causal);
  EXPECT_EQ(lists(own), (Lists{{0}, {0, 1}}));
  EXPECT_EQ(own.kept_pairs, 10);
  // Rank 0's queries against rank 1's tokens 2-3: tile 0 (tokens 0-1) lies before them,
  // tile 1 (tokens 4-5) sees them whole.
  const RingStepTables visiting = ring_step_tables({rank0, rank1, dense, 1.0}, 1);
  EXPECT_FALSE(visiting.slots.causal);
  EXPECT_EQ(lists(visiting), (Lists{{}, {0}}));
  EXPECT_EQ(visiting.kept_pairs, 4);
  EXPECT_EQ(visiting.slots.blocks[1].key_len, 0);  // rank 1 has one tile: slot 1 has no keys
  // Rank 1's tokens 2-3 against rank 0's: tokens 0-1 whole; 4-5 are in block 1, after block 0.
  const RingStepTables back = ring_step_tables({rank1, rank0, dense, 1.0}, 1);
  EXPECT_EQ(lists(back), (Lists{{0}, {}}));
  EXPECT_EQ(back.slots.blocks[1].query_len, 0);
  EXPECT_EQ(back.slots.blocks[1].key_start, 2);  // rank 0's second tile: rows 2-3 of its shard
  EXPECT_EQ(back.kept_pairs, 4);
}

}  // namespace
}  // namespace sb
