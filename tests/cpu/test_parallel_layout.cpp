// Where ranks sit in a DP x PP job and which layers each stage holds.
#include <gtest/gtest.h>

#include "harness/parallel/parallel_layout.h"

namespace sb {
namespace {

TEST(ParallelLayout, RanksGroupsAndStageLayers) {
  const ParallelLayout layout(2, 3, 8);  // 8 layers over 3 stages: 3, 3, 2
  EXPECT_EQ(layout.world_size(), 6);
  EXPECT_EQ(layout.stage_layer_counts(), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(layout.layers_of_stage(1).first, 3);
  EXPECT_EQ(layout.layers_of_stage(1).end, 6);
  EXPECT_EQ(layout.layers_of_stage(2).end, 8);
  EXPECT_EQ(layout.rank_of(1, 2), 5);
  EXPECT_EQ(layout.dp_rank_of(4), 1);
  EXPECT_EQ(layout.stage_of(4), 1);
  EXPECT_EQ(layout.pipeline_group(1), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(layout.data_parallel_group(2), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(layout.embedding_group(0), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(layout.is_first_stage(3));
  EXPECT_TRUE(layout.is_last_stage(5));
  EXPECT_EQ(layout.describe_rank(4), "rank 4 (dp 1, stage 1)");
  EXPECT_THROW(layout.stage_of(6), std::out_of_range);
}

TEST(ParallelLayout, TensorParallelRanksAreInnermostThenContextParallel) {
  // dp 2 x pp 2 x cp 1 x tp 2: rank = ((dp * pp + stage) * cp + cp_rank) * tp + tp_rank.
  const ParallelLayout layout(2, 2, 4, {}, 1, 2);
  EXPECT_EQ(layout.world_size(), 8);
  EXPECT_EQ(layout.rank_of(1, 0, 0, 1), 5);
  EXPECT_EQ(layout.dp_rank_of(5), 1);
  EXPECT_EQ(layout.stage_of(5), 0);
  EXPECT_EQ(layout.tp_rank_of(5), 1);
  EXPECT_EQ(layout.cp_rank_of(5), 0);
  EXPECT_EQ(layout.tensor_parallel_group(1, 1), (std::vector<int64_t>{6, 7}));  // neighbours, on one node
  EXPECT_EQ(layout.pipeline_group(1, 0, 1), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(layout.data_parallel_group(1, 0), (std::vector<int64_t>{2, 6}));  // the same shard of stage 1
  EXPECT_EQ(layout.data_parallel_group(1, 1), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(layout.embedding_group(0, 0, 1), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(layout.describe_rank(7), "rank 7 (dp 1, stage 1, tp 1)");
  // With cp as well: cp 2 x tp 2 inside one stage.
  const ParallelLayout both(1, 1, 4, {}, 2, 2);
  EXPECT_EQ(both.rank_of(0, 0, 1, 0), 2);
  EXPECT_EQ(both.context_parallel_group(0, 0, 1), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(both.tensor_parallel_group(0, 0, 1), (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(ParallelLayout(1, 1, 4, {}, 1, 0), std::invalid_argument);
}

TEST(ParallelLayout, ContextParallelRanksAreInnermost) {
  // dp 2 x pp 2 x cp 2: rank = (dp * pp + stage) * cp + cp_rank.
  const ParallelLayout layout(2, 2, 4, {}, 2);
  EXPECT_EQ(layout.world_size(), 8);
  EXPECT_EQ(layout.rank_of(1, 0, 1), 5);
  EXPECT_EQ(layout.dp_rank_of(5), 1);
  EXPECT_EQ(layout.stage_of(5), 0);
  EXPECT_EQ(layout.cp_rank_of(5), 1);
  EXPECT_EQ(layout.pipeline_group(1, 1), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(layout.context_parallel_group(1, 1), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(layout.data_parallel_group(1), (std::vector<int64_t>{2, 3, 6, 7}));  // every DP and CP rank of stage 1
  EXPECT_EQ(layout.embedding_group(0, 1), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(layout.is_last_stage(7));
  EXPECT_EQ(layout.describe_rank(5), "rank 5 (dp 1, stage 0, cp 1)");
  EXPECT_THROW(ParallelLayout(1, 1, 4, {}, 0), std::invalid_argument);
  EXPECT_THROW(layout.rank_of(0, 0, 2), std::out_of_range);
}

TEST(ParallelLayout, ExplicitSplitIsCheckedAndKept) {
  EXPECT_EQ(ParallelLayout(1, 3, 4, {2, 1, 1}).layers_of_stage(0).end, 2);
  EXPECT_THROW(ParallelLayout(1, 2, 4, {3, 2}), std::invalid_argument);  // sums to 5
  EXPECT_THROW(ParallelLayout(1, 2, 4, {4, 0}), std::invalid_argument);  // empty stage
  EXPECT_THROW(ParallelLayout(1, 2, 4, {4}), std::invalid_argument);     // one count for two stages
  EXPECT_THROW(ParallelLayout(1, 5, 4), std::invalid_argument);          // more stages than layers
  EXPECT_EQ(even_stage_split(24, 4), (std::vector<int64_t>{6, 6, 6, 6}));
  EXPECT_EQ(even_stage_split(36, 8), (std::vector<int64_t>{5, 5, 5, 5, 4, 4, 4, 4}));
}

}  // namespace
}  // namespace sb
