#include <gtest/gtest.h>

#include "harness/balance/batching_policy.h"

namespace sb {
namespace {

TEST(SequentialBatching, PacksInOrderUpToCapacity) {
  auto policy = make_batching_policy("sequential");
  MicroBatchPlan plan = policy->plan({4, 3, 5, 2, 2, 6}, 8);
  MicroBatchPlan expected = {{0, 1}, {2, 3}, {4, 5}};
  EXPECT_EQ(plan, expected);
}

TEST(SequentialBatching, ExactFitStaysTogether) {
  auto policy = make_batching_policy("sequential");
  EXPECT_EQ(policy->plan({4, 4, 8}, 8), (MicroBatchPlan{{0, 1}, {2}}));
}

TEST(SequentialBatching, OversizedSampleIsAnError) {
  auto policy = make_batching_policy("sequential");
  EXPECT_THROW(policy->plan({4, 9}, 8), std::invalid_argument);
}

TEST(BatchingPolicy, UnknownNameListsKnown) {
  try {
    make_batching_policy("lbb-typo");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sequential"), std::string::npos);
  }
}

}  // namespace
}  // namespace sb
