// The MoBA routing rules (docs: sparsebalance.md 1.1, 1.5) checked directly: the
// diagonal is always selected and nothing from the future or another sequence is;
// coverage is 1 at full budget and never decreases as k grows; equal gate scores go
// to the lower block index; the DST coverage floor is the smallest k it can be.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "tests/cpu/test_moba_support.h"

namespace sb {
namespace {

using test::moba_random_inputs;
using test::moba_selected_mask;

std::vector<int64_t> selected_row(const MobaResult& r, int64_t head, int64_t block) {
  return test::moba_row_blocks(r.routing, head, block);
}

MobaParams moba_params(int64_t block_size, std::vector<int64_t> top_k) {
  return test::moba_test_params(block_size, std::move(top_k), 0.25);
}

TEST(MobaRouting, DiagonalAlwaysNoFutureNoOtherSequenceAndBudgetRespected) {
  const std::vector<int64_t> lengths = {45, 8, 3, 64};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kFloat, 21);
  const BlockLayout layout = BlockLayout::build(packed, packed, 8, true);
  for (const int64_t k : {1, 2, 3, 5, 8, 50}) {
    const MobaResult r = moba_attention(in.q, in.k, in.v, packed, moba_params(8, {k}));
    const auto selected = r.routing.selected.accessor<int32_t, 3>();
    const auto count = r.routing.selected_count.accessor<int32_t, 2>();
    for (int64_t h = 0; h < 4; ++h) {
      for (int64_t b = 0; b < layout.num_blocks(); ++b) {
        const int64_t first = layout.eligible_first(b);
        ASSERT_EQ(count[h][b], std::min<int64_t>(k, b - first + 1)) << "h " << h << " b " << b;
        bool has_diagonal = false;
        for (int64_t i = 0; i < count[h][b]; ++i) {
          const int64_t j = selected[h][b][i];
          EXPECT_GE(j, first) << "block of another sequence";
          EXPECT_LE(j, b) << "future block";
          if (i > 0) EXPECT_LT(selected[h][b][i - 1], j) << "ascending, no repeats";
          has_diagonal = has_diagonal || j == b;
        }
        EXPECT_TRUE(has_diagonal) << "h " << h << " b " << b;
      }
    }
  }
}

TEST(MobaRouting, CoverageIsOneAtFullBudgetAndNeverDecreasesWithK) {
  const std::vector<int64_t> lengths = {77, 20, 130};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 1, 16, at::kFloat, 8);
  std::vector<double> previous(lengths.size(), 0.0);
  double previous_mean = 0.0;
  for (int64_t k = 1; k <= 18; ++k) {  // 17 blocks of 8 in the longest sequence
    const MobaResult r = moba_attention(in.q, in.k, in.v, packed, moba_params(8, {k}));
    for (size_t s = 0; s < lengths.size(); ++s) {
      EXPECT_GE(r.routing.coverage[s], previous[s]) << "k " << k << " sequence " << s;
      EXPECT_LE(r.routing.coverage[s], 1.0 + 1e-12);
      previous[s] = r.routing.coverage[s];
    }
    EXPECT_GE(r.routing.coverage_mean, previous_mean) << "k " << k;
    previous_mean = r.routing.coverage_mean;
    if (k == 1) EXPECT_LT(r.routing.coverage_mean, 0.9);  // the test is not vacuous
  }
  for (double c : previous) EXPECT_NEAR(c, 1.0, 1e-12);
  EXPECT_NEAR(previous_mean, 1.0, 1e-12);
}

TEST(MobaRouting, EqualGateScoresGoToTheLowerBlockIndex) {
  // Six blocks of 4 keys; blocks 0..4 hold the same keys, so their gate scores are
  // bitwise equal for every query: k = 3 must take blocks 0 and 1 besides the diagonal.
  const int64_t block = 4;
  at::manual_seed(2);
  at::Tensor k = at::randn({24, 1, 8}, at::kDouble);
  for (int64_t j = 1; j < 5; ++j) k.narrow(0, j * block, block).copy_(k.narrow(0, 0, block));
  const at::Tensor q = at::randn({24, 2, 8}, at::kDouble);
  const at::Tensor v = at::randn({24, 1, 8}, at::kDouble);
  const auto packed = PackedSequences::from_lengths({24});
  const MobaResult r = moba_attention(q, k, v, packed, moba_params(block, {3}));
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_EQ(selected_row(r, h, 5),
              (std::vector<int64_t>{0, 1, 5}));
    EXPECT_EQ(selected_row(r, h, 3),
              (std::vector<int64_t>{0, 1, 3}));
  }
  const MobaReferenceResult reference = moba_reference(q, k, v, packed, packed, moba_params(block, {3}));
  EXPECT_TRUE(at::equal(moba_selected_mask(r.routing.selected), reference.block_selected));

  // A tie below a better block: block 2 best, blocks 1 and 3 tied second -> {1, 2, diag}.
  at::Tensor k2 = k.clone();
  const at::Tensor query_mean = q.narrow(0, 20, 4).mean(0).sum(0);  // both heads' direction
  k2.narrow(0, 8, block).copy_(query_mean.view({1, 1, 8}).expand({block, 1, 8}) * 3.0);
  k2.narrow(0, 4, block).copy_(query_mean.view({1, 1, 8}).expand({block, 1, 8}) * 2.0);
  k2.narrow(0, 12, block).copy_(k2.narrow(0, 4, block));
  const MobaResult r2 = moba_attention(q, k2, v, packed, moba_params(block, {3}));
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_EQ(selected_row(r2, h, 5),
              (std::vector<int64_t>{1, 2, 5}))
        << "head " << h;
  }
}

// C over the call when every sequence uses budget k (no floor).
double call_coverage(const test::MobaInputs& in, const PackedSequences& packed, int64_t k) {
  return moba_attention(in.q, in.k, in.v, packed, moba_params(8, {k})).routing.coverage_mean;
}

TEST(MobaRouting, CoverageFloorIsTheSmallestKReachingTheRatio) {
  const std::vector<int64_t> lengths = {120, 64, 30};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kFloat, 13);
  for (const double ratio : {0.5, 0.8, 0.9, 0.97, 1.0}) {
    for (const int64_t k0 : {4, 8, 40}) {
      MobaParams params = moba_params(8, {1, 2, 6});  // per-sequence budgets below the floor
      params.coverage_floor_ratio = ratio;
      params.coverage_reference_k = k0;
      const MobaResult r = moba_attention(in.q, in.k, in.v, packed, params);
      const int64_t floor_k = r.routing.k_floor;
      const double target = ratio * call_coverage(in, packed, k0);
      SCOPED_TRACE("ratio " + std::to_string(ratio) + " k0 " + std::to_string(k0));
      ASSERT_GE(floor_k, 1);
      EXPECT_LE(floor_k, k0);
      EXPECT_GE(call_coverage(in, packed, floor_k), target);
      if (floor_k > 1) EXPECT_LT(call_coverage(in, packed, floor_k - 1), target);
      EXPECT_EQ(r.routing.top_k, (std::vector<int64_t>{std::max<int64_t>(1, floor_k),
                                                        std::max<int64_t>(2, floor_k),
                                                        std::max<int64_t>(6, floor_k)}));
      const MobaReferenceResult reference = moba_reference(in.q, in.k, in.v, packed, packed, params);
      EXPECT_EQ(reference.k_floor, floor_k);
      EXPECT_EQ(reference.top_k, r.routing.top_k);
      EXPECT_TRUE(at::equal(moba_selected_mask(r.routing.selected), reference.block_selected));
    }
  }
  // Non-vacuous: some setting moves a budget.
  MobaParams params = moba_params(8, {1});
  params.coverage_floor_ratio = 0.9;
  params.coverage_reference_k = 8;
  EXPECT_GT(moba_attention(in.q, in.k, in.v, packed, params).routing.k_floor, 1);
}

TEST(MobaRouting, CoverageCurveIsTheCallCoverageAtEachBudget) {
  const std::vector<int64_t> lengths = {120, 64, 30};  // most eligible blocks: 15
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kFloat, 21);
  MobaParams params = moba_params(8, {3, 1, 2});
  params.coverage_curve_up_to = 40;  // past K: the curve stops at K
  const MobaResult r = moba_attention(in.q, in.k, in.v, packed, params);
  ASSERT_EQ(r.routing.coverage_curve.size(), 15u);
  for (int64_t k = 1; k <= 15; ++k) {
    EXPECT_NEAR(r.routing.coverage_curve[k - 1], call_coverage(in, packed, k), 1e-12) << "k " << k;
  }
  EXPECT_NEAR(r.routing.coverage_curve.back(), 1.0, 1e-12);
  EXPECT_LT(r.routing.coverage_curve.front(), 0.9);  // non-vacuous: the curve rises
  // Asking for the curve changes nothing chosen.
  const MobaResult plain = moba_attention(in.q, in.k, in.v, packed, moba_params(8, {3, 1, 2}));
  EXPECT_TRUE(at::equal(plain.routing.selected, r.routing.selected));
  EXPECT_TRUE(plain.routing.coverage_curve.empty());
  params.coverage_curve_up_to = 4;
  EXPECT_EQ(moba_attention(in.q, in.k, in.v, packed, params).routing.coverage_curve,
            std::vector<double>(r.routing.coverage_curve.begin(), r.routing.coverage_curve.begin() + 4));
  params.coverage_curve_up_to = -1;
  EXPECT_THROW(moba_attention(in.q, in.k, in.v, packed, params), std::invalid_argument);
}

TEST(MobaRouting, FloorDisabledLeavesBudgetsAlone) {
  const std::vector<int64_t> lengths = {50, 50};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 2, 1, 8, at::kFloat, 4);
  const MobaResult r = moba_attention(in.q, in.k, in.v, packed, moba_params(8, {1, 3}));
  EXPECT_EQ(r.routing.k_floor, 0);
  EXPECT_EQ(r.routing.top_k, (std::vector<int64_t>{1, 3}));
}

TEST(BlockLayout, BlocksAlignPerSequenceAndQueriesAreTheLastPositions) {
  const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths({10, 0, 4}),
                                              PackedSequences::from_lengths({3, 0, 4}), 4, true);
  ASSERT_EQ(layout.num_blocks(), 4);  // 4 + 4 + 2 | (none) | 4
  EXPECT_EQ(layout.sequence_first_block, (std::vector<int64_t>{0, 3, 3, 4}));
  // Sequence 0: keys 0..9, queries at positions 7, 8, 9 (blocks 1 and 2).
  EXPECT_EQ(layout.blocks[0].query_len, 0);
  EXPECT_EQ(layout.blocks[1].query_len, 1);
  EXPECT_EQ(layout.blocks[1].query_pos0, 3);
  EXPECT_EQ(layout.blocks[1].query_start, 0);
  EXPECT_EQ(layout.blocks[2].key_start, 8);
  EXPECT_EQ(layout.blocks[2].key_len, 2);
  EXPECT_EQ(layout.blocks[2].query_start, 1);
  EXPECT_EQ(layout.blocks[2].query_len, 2);
  EXPECT_EQ(layout.blocks[3].key_start, 10);
  EXPECT_EQ(layout.blocks[3].query_start, 3);
  EXPECT_EQ(layout.eligible_first(2), 0);
  EXPECT_EQ(layout.eligible_end(2), 3);
}

// Tensor parallelism splits a layer's heads over ranks; with sum_over_head_shards each
// rank's call-wide coverage curve, and so DST's floor, is that of all heads. Two head
// shards (query heads 0-1 with KV head 0, 2-3 with KV head 1) stand for two TP ranks:
// a first pass records each shard's own sums, a second adds the other shard's.
TEST(MobaRouting, HeadShardsSharingTheirCoverageSumsChooseTheWholeLayersFloor) {
  const std::vector<int64_t> lengths = {120, 64, 30};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kFloat, 17);
  // Sharper gate scores on the second shard's heads, so that alone the two shards' curves
  // (and floors) differ.
  const at::Tensor q = in.q.clone();
  q.narrow(1, 2, 2).mul_(4.0);
  for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
    SCOPED_TRACE(test::moba_gate_name(gate));
    MobaParams params = moba_params(8, {1, 2, 3});
    params.gate = gate;
    params.coverage_floor_ratio = 0.9;
    params.coverage_reference_k = 8;
    params.coverage_curve_up_to = 6;
    const MobaResult whole = moba_attention(q, in.k, in.v, packed, params);
    ASSERT_GT(whole.routing.k_floor, 1) << "non-vacuous: the floor moves the budgets";

    const auto shard = [&](const at::Tensor& t, int64_t index) { return t.narrow(1, index * t.size(1) / 2, t.size(1) / 2).contiguous(); };
    std::vector<std::vector<double>> own(2);
    for (int64_t s = 0; s < 2; ++s) {
      MobaParams recording = params;
      recording.sum_over_head_shards = [&own, s](std::vector<double>& sums) { own[static_cast<size_t>(s)] = sums; };
      moba_attention(shard(q, s), shard(in.k, s), shard(in.v, s), packed, recording);
    }
    std::vector<int64_t> floors;
    for (int64_t s = 0; s < 2; ++s) {
      MobaParams sharing = params;
      const std::vector<double>& other = own[static_cast<size_t>(1 - s)];
      sharing.sum_over_head_shards = [&other](std::vector<double>& sums) {
        ASSERT_EQ(sums.size(), other.size());
        for (size_t i = 0; i < sums.size(); ++i) sums[i] += other[i];
      };
      const MobaResult r = moba_attention(shard(q, s), shard(in.k, s), shard(in.v, s), packed, sharing);
      EXPECT_EQ(r.routing.k_floor, whole.routing.k_floor) << "shard " << s;
      EXPECT_EQ(r.routing.top_k, whole.routing.top_k) << "shard " << s;
      ASSERT_EQ(r.routing.coverage_curve.size(), whole.routing.coverage_curve.size());
      for (size_t k = 0; k < r.routing.coverage_curve.size(); ++k) {
        EXPECT_NEAR(r.routing.coverage_curve[k], whole.routing.coverage_curve[k], 1e-12) << "shard " << s << " k " << k + 1;
      }
      // The shard's selections are the whole call's rows of its heads.
      EXPECT_TRUE(at::equal(moba_selected_mask(r.routing.selected),
                            moba_selected_mask(whole.routing.selected).narrow(0, 2 * s, 2)));
      floors.push_back(MobaResult(moba_attention(shard(q, s), shard(in.k, s), shard(in.v, s), packed, params)).routing.k_floor);
    }
    EXPECT_NE(floors[0], floors[1]) << "non-vacuous: alone, the two shards would choose different floors";
  }
}

}  // namespace
}  // namespace sb
