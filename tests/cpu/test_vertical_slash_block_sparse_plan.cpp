// The vertical-slash pattern as two block-sparse calls (vertical_slash_block_sparse_plan.h):
// the pairs the two calls' tables reach, rebuilt here pair by pair, are exactly the
// pattern's mask (vertical_slash_mask, the oracle the CPU kernel is tested against), with
// no pair reached twice, for indexes chosen by top-p, top-k and by hand, GQA 7:1 and 4:2,
// blocks of 1, 5, 16 and 64 tokens, and packed sequences with an empty and a one-token one.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_block_sparse_plan.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_reference.h"
#include "tests/cpu/vertical_slash_index_cases.h"

namespace sb {
namespace {

// How often each (query, key) pair of sequence s and query head h is reached by the plan's
// two calls: [L, L] int counts.
at::Tensor reached_pairs(const VerticalSlashBlockSparsePlan& plan, const PackedSequences& sequences, int64_t s,
                         int64_t h, int64_t group) {
  const int64_t length = sequences.length(s), offset = sequences.offsets[static_cast<size_t>(s)];
  const int64_t tokens = sequences.total_tokens();
  at::Tensor counts = at::zeros({length, length}, at::kInt);
  auto c = counts.accessor<int32_t, 2>();
  const BlockLayout& layout = plan.slash_layout;
  const int64_t blocks = layout.num_blocks();
  const auto selected = plan.slash_selected.accessor<int32_t, 3>();
  const auto count = plan.slash_count.accessor<int32_t, 2>();
  const auto rows = plan.vertical_rows.accessor<int64_t, 1>();
  for (int64_t b = layout.sequence_first_block[static_cast<size_t>(s)];
       b < layout.sequence_first_block[static_cast<size_t>(s) + 1]; ++b) {
    const LayoutBlock& qb = layout.blocks[static_cast<size_t>(b)];
    for (int64_t r = 0; r < qb.query_len; ++r) {
      const int64_t i = qb.query_start + r - offset;  // query position
      // Slash part: listed key blocks whole, the diagonal up to the query.
      for (int32_t e = 0; e < count[h][b]; ++e) {
        const LayoutBlock& kb = layout.blocks[static_cast<size_t>(selected[h][b][e])];
        EXPECT_EQ(kb.sequence, s);
        for (int64_t j = kb.key_start - offset; j < kb.key_start - offset + kb.key_len; ++j) {
          if (selected[h][b][e] != b || j <= i) ++c[i][j];
        }
      }
      // Vertical part: the block of (s, h, query block) lists itself; its gathered rows,
      // every one seen.
      const int64_t first = layout.sequence_first_block[static_cast<size_t>(s)];
      const int64_t q_heads = plan.vertical_layout.num_blocks() / blocks;
      const int64_t vertical_block = first * q_heads + h * layout.blocks_in_sequence(s) + (b - first);
      const LayoutBlock& vb = plan.vertical_layout.blocks[static_cast<size_t>(vertical_block)];
      EXPECT_EQ(plan.vertical_selected[0][vertical_block][0].item<int32_t>(), vb.key_len > 0 ? vertical_block : -1);
      EXPECT_EQ(vb.query_start, h * tokens + qb.query_start);
      EXPECT_EQ(vb.query_len, qb.query_len);
      for (int64_t g = vb.key_start; g < vb.key_start + vb.key_len; ++g) {
        const int64_t kv = rows[g] / tokens, j = rows[g] % tokens - offset;
        EXPECT_EQ(kv, h / group) << "a vertical of head " << h << " from another key/value head";
        EXPECT_LT(j, qb.key_start - offset) << "a vertical at or after its query block";
        ++c[i][j];
      }
    }
  }
  return counts;
}

TEST(VerticalSlashBlockSparsePlan, TheTwoCallsReachExactlyThePatternsPairsOnce) {
  at::manual_seed(5);
  const std::vector<int64_t> lengths{70, 5, 0, 1, 33, 129};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const int64_t tokens = sequences.total_tokens();
  int64_t verticals_seen = 0;
  for (const auto& [hq, hkv, block] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {7, 1, 1}, {4, 2, 5}, {7, 1, 16}, {4, 2, 64}}) {
    const at::Tensor q = at::randn({tokens, hq, 8}, at::kDouble) * 2, k = at::randn({tokens, hkv, 8}, at::kDouble);
    for (const auto& [name, index] : test::vertical_slash_index_cases(q, k, sequences, block, 0.35)) {
      SCOPED_TRACE(name + " GQA " + std::to_string(hq) + ":" + std::to_string(hkv) + " block " + std::to_string(block));
      const VerticalSlashBlockSparsePlan plan = vertical_slash_block_sparse_plan(sequences, index, hq, hkv);
      // Heads taken one at a time (the batches long sequences need) give the same plan.
      const VerticalSlashBlockSparsePlan one_head_at_a_time =
          vertical_slash_block_sparse_plan(sequences, index, hq, hkv, at::Device(at::kCPU), 1);
      EXPECT_TRUE(at::equal(one_head_at_a_time.vertical_rows, plan.vertical_rows));
      EXPECT_TRUE(at::equal(one_head_at_a_time.vertical_count, plan.vertical_count));
      EXPECT_EQ(plan.vertical_layout.total_queries, hq * tokens);
      EXPECT_EQ(plan.vertical_layout.total_keys, plan.vertical_rows.numel());
      verticals_seen += plan.vertical_rows.numel();
      int64_t mask_pairs = 0;
      for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
        int64_t sequence_pairs = 0;
        for (int64_t h = 0; h < hq; ++h) {
          const at::Tensor counts = reached_pairs(plan, sequences, s, h, hq / hkv);
          if (lengths[static_cast<size_t>(s)] == 0) continue;
          const at::Tensor mask = vertical_slash_mask(index[static_cast<size_t>(s)][static_cast<size_t>(h)],
                                                      lengths[static_cast<size_t>(s)]);
          EXPECT_TRUE(at::equal(counts, mask.to(at::kInt))) << "sequence " << s << " head " << h;
          sequence_pairs += mask.sum().item<int64_t>();
        }
        EXPECT_EQ(plan.kept_pairs_per_sequence[static_cast<size_t>(s)], sequence_pairs) << "sequence " << s;
        mask_pairs += sequence_pairs;
      }
      EXPECT_EQ(plan.kept_pairs, mask_pairs);
    }
  }
  EXPECT_GT(verticals_seen, 0) << "no case put a vertical outside the slash blocks";
}

TEST(VerticalSlashBlockSparsePlan, RejectsAnIndexItCannotSplit) {
  const PackedSequences sequences = PackedSequences::from_lengths({10});
  const std::vector<std::vector<VerticalSlashHeadIndex>> no_diagonal{{{{0}, {1, 2}, 1.0, 4}}};
  EXPECT_THROW(vertical_slash_block_sparse_plan(sequences, no_diagonal, 1, 1), std::invalid_argument);
  const std::vector<std::vector<VerticalSlashHeadIndex>> two_blocks{{{{0}, {0}, 1.0, 4}, {{0}, {0}, 1.0, 8}}};
  EXPECT_THROW(vertical_slash_block_sparse_plan(sequences, two_blocks, 2, 1), std::invalid_argument);
  EXPECT_THROW(vertical_slash_block_sparse_plan(sequences, two_blocks, 2, 3), std::invalid_argument);
}

}  // namespace
}  // namespace sb
