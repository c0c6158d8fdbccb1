// Synthetic data: a pure function of (seed, sample id); lengths follow the mixture;
// the task is the arithmetic sequence the manifest describes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "harness/data/deterministic_rng.h"
#include "harness/data/packed_microbatch.h"
#include "harness/data/synthetic_dataset.h"
#include "tests/support/batch_shape_check.h"

namespace sb {
namespace {

SyntheticDataSection bimodal() {
  SyntheticDataSection s;
  s.vocab_size = 50;
  s.prompt_tokens = 3;
  s.max_stride = 4;
  s.length_mixture = {{3.0, 10, 20}, {1.0, 100, 120}};
  return s;
}

TEST(DeterministicRng, KnownFirstOutputs) {
  // SplitMix64 reference values for seed 0 (Vigna's splitmix64.c).
  DeterministicRng rng(0);
  EXPECT_EQ(rng.next_u64(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.next_u64(), 0x6e789e6aa1b965f4ULL);
}

TEST(DeterministicRng, UniformIntCoversRangeInclusive) {
  DeterministicRng rng(7);
  std::map<int64_t, int> seen;
  for (int i = 0; i < 4000; ++i) seen[rng.uniform_int(-2, 2)]++;
  ASSERT_EQ(seen.size(), 5u);
  for (auto& [value, count] : seen) EXPECT_GT(count, 600) << value;  // ~800 expected each
}

TEST(SyntheticDataset, SameSeedSameSamplesDifferentSeedDifferent) {
  SyntheticDataset a(bimodal(), 11), b(bimodal(), 11), c(bimodal(), 12);
  int differing = 0;
  for (int64_t id = 0; id < 50; ++id) {
    EXPECT_EQ(a.sample(id).tokens, b.sample(id).tokens);
    differing += a.sample(id).tokens != c.sample(id).tokens;
  }
  EXPECT_GT(differing, 45);
}

TEST(SyntheticDataset, GlobalBatchIsSamplesByConsecutiveIds) {
  SyntheticDataset d(bimodal(), 3);
  auto batch = d.global_batch(/*iteration=*/2, /*global_batch_size=*/4);
  ASSERT_EQ(batch.size(), 4u);
  for (int64_t slot = 0; slot < 4; ++slot) {
    EXPECT_EQ(batch[slot].id, 8 + slot);
    EXPECT_EQ(batch[slot].tokens, d.sample(8 + slot).tokens);
  }
}

TEST(SyntheticDataset, ShapesWithoutTokensAreTheDrawnSamplesOfEveryTask) {
  for (SyntheticTask task : {SyntheticTask::kArithmetic, SyntheticTask::kRetrieval, SyntheticTask::kCopy}) {
    SyntheticDataSection config = bimodal();
    config.task = task;
    config.length_mixture = {{3.0, 40, 60}, {1.0, 100, 120}};
    config.lag = 5;
    SCOPED_TRACE(synthetic_task_options().name_of(task));
    expect_shapes_are_the_drawn_batches(SyntheticDataset(config, 9), /*iterations=*/3, /*global_batch_size=*/16);
  }
  SyntheticDataSection no_prompt = bimodal();
  no_prompt.prompt_tokens = 0;  // token 0 still carries no loss
  expect_shapes_are_the_drawn_batches(SyntheticDataset(no_prompt, 2), 2, 8);
}

TEST(SyntheticDataset, LengthsFollowTheMixture) {
  SyntheticDataset d(bimodal(), 5);
  int short_count = 0, long_count = 0;
  for (int64_t id = 0; id < 4000; ++id) {
    const int64_t n = d.sample(id).length();
    if (n >= 10 && n <= 20) {
      ++short_count;
    } else {
      ASSERT_TRUE(n >= 100 && n <= 120) << n;
      ++long_count;
    }
  }
  // Weights 3:1 -> 75% short; 4000 draws put the share within +-3% with overwhelming odds.
  EXPECT_NEAR(short_count / 4000.0, 0.75, 0.03);
  EXPECT_GT(long_count, 0);
}

TEST(SyntheticDataset, TokensFormAnArithmeticSequenceModVocab) {
  SyntheticDataset d(bimodal(), 9);
  for (int64_t id = 0; id < 20; ++id) {
    Sample s = d.sample(id);
    EXPECT_EQ(s.prompt_tokens, 3);
    const int64_t stride = (s.tokens[1] - s.tokens[0] + 50) % 50;
    EXPECT_GE(stride, 1);
    EXPECT_LE(stride, 4);
    for (size_t t = 1; t < s.tokens.size(); ++t) {
      EXPECT_EQ(s.tokens[t], (s.tokens[t - 1] + stride) % 50);
      EXPECT_LT(s.tokens[t], 50);
    }
  }
}

TEST(SyntheticDataset, CopyTaskRepeatsTheTokenLagPositionsBackAndTrainsOnlyThoseTokens) {
  SyntheticDataSection s;
  s.task = SyntheticTask::kCopy;
  s.vocab_size = 40;
  s.lag = 12;
  s.length_mixture = {{1.0, 5, 60}};  // below lag + 1 = 13 is raised to 13
  EXPECT_EQ(synthetic_min_length(s), 13);
  SyntheticDataset d(s, 4);
  int64_t shortest = 1000;
  std::map<int64_t, int> first_tokens;
  for (int64_t id = 0; id < 200; ++id) {
    const Sample sample = d.sample(id);
    shortest = std::min(shortest, sample.length());
    ASSERT_GE(sample.length(), 13);
    ASSERT_LE(sample.length(), 60);
    EXPECT_EQ(sample.prompt_tokens, 12);
    for (int64_t t = 0; t < sample.length(); ++t) {
      ASSERT_GE(sample.tokens[t], 0);
      ASSERT_LT(sample.tokens[t], 40);
      if (t >= 12) ASSERT_EQ(sample.tokens[t], sample.tokens[t - 12]) << "id " << id << " t " << t;
      EXPECT_EQ(sample.is_target(t), t >= 12);
    }
    ++first_tokens[sample.tokens[0]];
  }
  EXPECT_EQ(shortest, 13);
  EXPECT_GT(first_tokens.size(), 30u) << "the prompt is drawn from the whole vocabulary";
}

TEST(PackedMicroBatch, PositionsRestartAndOnlyResponseTokensCarryLabels) {
  Sample a{0, {5, 6, 7, 8, 9}, 2};
  Sample b{1, {1, 3, 5}, 2};
  PackedMicroBatch mb = pack_microbatch({&a, &b});
  EXPECT_EQ(mb.sequences.offsets, (std::vector<int64_t>{0, 5, 8}));
  auto positions = std::vector<int64_t>(mb.position_ids.data_ptr<int64_t>(),
                                        mb.position_ids.data_ptr<int64_t>() + 8);
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  auto labels = std::vector<int64_t>(mb.labels.data_ptr<int64_t>(), mb.labels.data_ptr<int64_t>() + 8);
  // Sequence a: prompt is 5, 6; position 1 predicts 7, ..., position 3 predicts 9.
  EXPECT_EQ(labels, (std::vector<int64_t>{-100, 7, 8, 9, -100, -100, 5, -100}));
  EXPECT_EQ(mb.loss_tokens, a.loss_tokens() + b.loss_tokens());
}

}  // namespace
}  // namespace sb
