// MoBA's own routing, per query token (MobaGate::kToken), against what MoBA defines
// rather than against another implementation of this project: hand-built gates where a
// block's mean query and its tokens disagree, ties, decoding with a cache routing as
// training does, and the call-wide coverage curve and floor against the oracle run at
// each budget; which context-parallel setting trains it.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"
#include "tests/cpu/test_moba_support.h"

namespace sb {
namespace {

using test::moba_max_abs_diff;
using test::moba_random_inputs;

// One head, blocks of 2, one sequence of 6 tokens. Block 0's keys point along x, block
// 1's along y; the queries of block 2 point one along x, one along y. MoBA routes each by
// itself: query 4 reads block 0, query 5 block 1 (k = 2: one block besides its own). The
// block's mean query (x + y) / 2 scores both blocks equally, so the block gate sends
// both queries to block 0 (the tie rule).
TEST(MobaTokenGate, EachQueryRoutesByItsOwnScores) {
  const at::Tensor q = at::tensor(std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 3}, at::kDouble).view({6, 1, 2});
  const at::Tensor k = at::tensor(std::vector<double>{1, 0, 1, 0, 0, 1, 0, 1, 0.5, 0.5, 0.5, 0.5}, at::kDouble)
                           .view({6, 1, 2});
  const at::Tensor v = at::arange(12, at::kDouble).view({6, 1, 2});
  const auto packed = PackedSequences::from_lengths({6});
  MobaParams params = test::moba_test_params(2, {2}, 0.5, MobaGate::kToken);
  const MobaResult token = moba_attention(q, k, v, packed, params);
  EXPECT_EQ(test::moba_row_blocks(token.routing, 0, 4), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(test::moba_row_blocks(token.routing, 0, 5), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(test::moba_row_blocks(token.routing, 0, 2), (std::vector<int64_t>{0, 1}));  // block 1: block 0 is all it has
  EXPECT_EQ(test::moba_row_blocks(token.routing, 0, 0), (std::vector<int64_t>{0}));
  // Query 5's output: softmax over keys 2, 3 (block 1) and 4, 5 (its own block, causal).
  const at::Tensor keys = at::tensor(std::vector<int64_t>{2, 3, 4, 5}, at::kLong);
  const at::Tensor scores = k.index_select(0, keys).squeeze(1).mv(q[5][0]) * 0.5;
  const at::Tensor expected = at::softmax(scores, 0).unsqueeze(0).mm(v.index_select(0, keys).squeeze(1)).squeeze(0);
  EXPECT_TRUE(at::allclose(token.out[5][0], expected, 1e-12, 1e-12));

  params.gate = MobaGate::kBlock;
  const MobaResult block = moba_attention(q, k, v, packed, params);
  const at::Tensor block_ids = block.routing.selected.to(at::kLong)[0][2];  // query block 2
  EXPECT_EQ(block_ids[0].item<int64_t>(), 0);
  EXPECT_FALSE(at::allclose(block.out[5][0], expected, 1e-6, 1e-6)) << "the gates differ on this input";
}

// Equal gate scores: the lower block index wins, per token as per block.
TEST(MobaTokenGate, EqualScoresGoToTheLowerBlock) {
  at::manual_seed(3);
  const at::Tensor block_keys = at::randn({4, 2, 8}, at::kDouble);
  const at::Tensor k = at::cat({block_keys, block_keys, block_keys, block_keys, at::randn({4, 2, 8}, at::kDouble)});
  const at::Tensor q = at::randn({20, 4, 8}, at::kDouble);
  const auto packed = PackedSequences::from_lengths({20});
  const MobaResult r = moba_attention(q, k, k, packed, test::moba_test_params(4, {3}, 0.3, MobaGate::kToken));
  for (int64_t h = 0; h < 4; ++h) {
    for (int64_t t = 16; t < 20; ++t) EXPECT_EQ(test::moba_row_blocks(r.routing, h, t), (std::vector<int64_t>{0, 1, 4}));
  }
}

// The CPU's partial sort ranks as the stable sort other devices use: rows with many equal
// scores (and -inf for non-candidates), every column count.
TEST(MobaTokenGate, PartialSortRanksAsTheStableSort) {
  at::manual_seed(8);
  at::Tensor scores = at::randint(0, 4, {3, 50, 17}, at::kLong).to(at::kDouble);  // ties everywhere
  scores.masked_fill_(at::rand({3, 50, 17}).lt(0.3), -std::numeric_limits<double>::infinity());
  for (int64_t columns = 0; columns <= 17; ++columns) {
    EXPECT_TRUE(at::equal(moba_best_blocks(scores, columns), moba_best_blocks_by_sort(scores, columns)))
        << columns << " columns";
  }
}

// With a cache, the new queries at the last n positions route exactly as the same
// positions do in training (the blocks before a query's own are complete in both), so
// a decode step's output is the training output's row.
TEST(MobaTokenGate, DecodingRoutesEachQueryAsTraining) {
  const std::vector<int64_t> lengths = {77};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kDouble, 21);
  const MobaParams params = test::moba_test_params(8, {3}, 0.3, MobaGate::kToken);
  const MobaResult training = moba_attention(in.q, in.k, in.v, packed, params);
  for (const int64_t n : {1, 6, 20}) {
    const MobaResult step = moba_attention_packed(in.q.narrow(0, 77 - n, n).contiguous(), in.k, in.v,
                                                  PackedSequences::from_lengths({n}), packed, params);
    EXPECT_LT(moba_max_abs_diff(step.out, training.out.narrow(0, 77 - n, n)), 1e-12) << n << " new queries";
    EXPECT_TRUE(at::equal(step.routing.selected, training.routing.selected.narrow(1, 77 - n, n)
                                                     .narrow(2, 0, step.routing.selected.size(2))));
  }
}

// The call-wide curve C(k) is the coverage the oracle reports when every sequence gets
// budget k; the floor is the smallest k whose C reaches ratio x C(k0).
TEST(MobaTokenGate, CoverageCurveAndFloorAreTheOraclesAtEachBudget) {
  const std::vector<int64_t> lengths = {90, 33, 7, 61};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kDouble, 31);
  const at::Tensor q = in.q * 3.0;  // sharper gates: the curve rises over several k
  MobaParams params = test::moba_test_params(8, {1, 2, 3, 2}, 0.3, MobaGate::kToken);
  params.coverage_curve_up_to = 14;  // past the longest sequence's 12 blocks
  params.coverage_floor_ratio = 0.8;
  params.coverage_reference_k = 6;
  const MobaResult r = moba_attention(q, in.k, in.v, packed, params);
  ASSERT_EQ(r.routing.coverage_curve.size(), 12u);
  for (int64_t kk = 1; kk <= 12; ++kk) {
    MobaParams at_k = test::moba_test_params(8, {kk}, 0.3, MobaGate::kToken);
    const MobaReferenceResult reference = moba_reference(q, in.k, in.v, packed, packed, at_k);
    EXPECT_NEAR(r.routing.coverage_curve[kk - 1], reference.coverage_mean, 1e-12) << "k " << kk;
  }
  EXPECT_NEAR(r.routing.coverage_curve.back(), 1.0, 1e-12);
  const MobaReferenceResult reference = moba_reference(q, in.k, in.v, packed, packed, params);
  EXPECT_EQ(r.routing.k_floor, reference.k_floor);
  EXPECT_GT(r.routing.k_floor, 1) << "non-vacuous: the floor moves some budgets";
  EXPECT_LT(r.routing.k_floor, 6);
  EXPECT_EQ(r.routing.top_k, reference.top_k);
  for (size_t s = 0; s < lengths.size(); ++s) EXPECT_NEAR(r.routing.coverage[s], reference.coverage[s], 1e-12);
  test::expect_selection_is_the_oracles(r.routing, reference, params);
}

// The CPU ring runs the token gate (per-query key blocks); the GPU ring does not yet.
TEST(MobaTokenGate, ContextParallelTrainingRunsOnTheCpuRingOnly) {
  const MobaPattern token(MobaOptions{64, 8, MobaGate::kToken});
  EXPECT_FALSE(token.training_problem({false, false, 64, "fp32", "methods[0]", 2}).has_value());
  EXPECT_FALSE(token.training_problem({true, true, 64, "bf16-mixed", "methods[0]", 1}).has_value());
  const auto problem = token.training_problem({true, true, 64, "bf16-mixed", "methods[1]", 2});
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->key, "attention");
  EXPECT_NE(problem->fix.find("\"block\""), std::string::npos) << problem->fix;
  EXPECT_FALSE(MobaPattern(MobaOptions{64, 8, MobaGate::kBlock})
                   .training_problem({true, true, 64, "bf16-mixed", "methods[0]", 2})
                   .has_value());
  // The ring selection's all-reduces: the key sums only (no query sums), the floor's
  // curve with a floor, the coverage per sequence.
  const auto with_floor = token.ring_selection_allreduces({128, 64}, true, true, 4, 2, 16);
  ASSERT_EQ(with_floor.size(), 3u);
  EXPECT_EQ(with_floor[0].bytes, 2.0 * 3 * 16 * 8);
  EXPECT_EQ(token.ring_selection_allreduces({128, 64}, false, false, 4, 2, 16).size(), 2u);
}

}  // namespace
}  // namespace sb
