#include <gtest/gtest.h>

#include "harness/balance/batching_policy.h"

namespace sb {
namespace {

// [rank][micro-batch] -> sample positions, for compact expectations.
std::vector<std::vector<std::vector<int64_t>>> samples_of(const GlobalBatchPlan& plan) {
  std::vector<std::vector<std::vector<int64_t>>> out;
  for (const auto& rank : plan.ranks) {
    out.emplace_back();
    for (const auto& mb : rank) out.back().push_back(mb.samples);
  }
  return out;
}

TEST(SequentialBatching, PacksInOrderUpToCapacity) {
  auto policy = make_batching_policy(BatchingKind::kSequential);
  const BatchingInput input{{4, 3, 5, 2, 2, 6}, 1, 8};
  const GlobalBatchPlan plan = policy->plan(input);
  plan.validate(input.sample_lengths, input.max_tokens);
  EXPECT_EQ(samples_of(plan), (std::vector<std::vector<std::vector<int64_t>>>{
                                  {{0, 1}, {2, 3}, {4, 5}}}));
  EXPECT_EQ(plan.ranks[0][1].tokens, 7);
}

TEST(SequentialBatching, ExactFitStaysTogether) {
  auto policy = make_batching_policy(BatchingKind::kSequential);
  EXPECT_EQ(samples_of(policy->plan({{4, 4, 8}, 1, 8})),
            (std::vector<std::vector<std::vector<int64_t>>>{{{0, 1}, {2}}}));
}

TEST(SequentialBatching, DealsRoundRobinToDataParallelRanks) {
  auto policy = make_batching_policy(BatchingKind::kSequential);
  const BatchingInput input{{4, 3, 5, 2, 2, 6, 1}, 2, 8};
  const GlobalBatchPlan plan = policy->plan(input);
  plan.validate(input.sample_lengths, input.max_tokens);
  // rank 0: samples 0, 2, 4, 6 (4, 5, 2, 1 tokens); rank 1: 1, 3, 5 (3, 2, 6).
  EXPECT_EQ(samples_of(plan), (std::vector<std::vector<std::vector<int64_t>>>{
                                  {{0}, {2, 4, 6}}, {{1, 3}, {5}}}));
}

TEST(SequentialBatching, OversizedSampleIsAnErrorNamingIt) {
  auto policy = make_batching_policy(BatchingKind::kSequential);
  try {
    policy->plan({{4, 9}, 1, 8});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sample 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_tokens_per_microbatch"), std::string::npos);
  }
}

TEST(GlobalBatchPlan, ValidateCatchesMissingDuplicateAndOverfullMicroBatches) {
  GlobalBatchPlan plan;
  plan.ranks = {{PlannedMicroBatch{{0, 1}, 7}}};
  EXPECT_NO_THROW(plan.validate({3, 4}, 8));
  EXPECT_THROW(plan.validate({3, 4, 1}, 8), std::logic_error);  // sample 2 missing
  EXPECT_THROW(plan.validate({3, 4}, 6), std::logic_error);     // over capacity
  plan.ranks[0].push_back(PlannedMicroBatch{{1}, 4});
  EXPECT_THROW(plan.validate({3, 4}, 8), std::logic_error);  // sample 1 twice
  plan.ranks[0].pop_back();
  plan.ranks[0][0].tokens = 6;
  EXPECT_THROW(plan.validate({3, 4}, 8), std::logic_error);  // wrong token count
}

TEST(BatchingPolicy, UnknownNameListsKnown) {
  try {
    batching_kind_options().from_name("lbb-typo");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sequential"), std::string::npos);
  }
}

}  // namespace
}  // namespace sb
