// Learning-rate schedules against values worked out by hand: linear warm-up, then
// constant, or cosine down to lr * min_lr_ratio at the last iteration.

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "harness/train/lr_schedule.h"

namespace sb {
namespace {

TrainSection schedule(const std::string& kind) {
  TrainSection t;
  t.iterations = 11;
  t.lr = 0.5;
  t.lr_warmup_fraction = 0.2;  // round(2.2) = 2 warm-up iterations
  t.min_lr_ratio = 0.1;
  t.lr_schedule = lr_schedule_options().from_name(kind);
  return t;
}

TEST(LrSchedule, WarmupRampsLinearlyToLr) {
  for (const char* kind : {"cosine", "constant"}) {
    const TrainSection t = schedule(kind);
    EXPECT_DOUBLE_EQ(learning_rate_at(0, t), 0.25) << kind;
    EXPECT_DOUBLE_EQ(learning_rate_at(1, t), 0.5) << kind;
  }
}

TEST(LrSchedule, ConstantHoldsLrAfterWarmup) {
  const TrainSection t = schedule("constant");
  for (int64_t i = 2; i < t.iterations; ++i) EXPECT_DOUBLE_EQ(learning_rate_at(i, t), 0.5) << i;
}

TEST(LrSchedule, CosineDecaysToMinRatioAtTheLastIteration) {
  const TrainSection t = schedule("cosine");
  // Decay over iterations 2..10 (8 steps): lr * (0.1 + 0.9 * (1 + cos(pi * k / 8)) / 2).
  EXPECT_DOUBLE_EQ(learning_rate_at(2, t), 0.5);
  EXPECT_NEAR(learning_rate_at(6, t), 0.5 * (0.1 + 0.9 * 0.5), 1e-15);  // halfway
  EXPECT_NEAR(learning_rate_at(4, t), 0.5 * (0.1 + 0.45 * (1 + std::cos(M_PI / 4))), 1e-15);
  EXPECT_NEAR(learning_rate_at(10, t), 0.05, 1e-15);
  for (int64_t i = 3; i < t.iterations; ++i) {
    EXPECT_LT(learning_rate_at(i, t), learning_rate_at(i - 1, t)) << i;
  }
}

TEST(LrSchedule, NoWarmupStartsAtLrAndUnknownScheduleIsAnError) {
  TrainSection t = schedule("constant");
  t.lr_warmup_fraction = 0;
  EXPECT_DOUBLE_EQ(learning_rate_at(0, t), 0.5);
  EXPECT_THROW(lr_schedule_options().from_name("linear"), std::invalid_argument);
  EXPECT_EQ(lr_schedule_options().names(), (std::vector<std::string>{"cosine", "constant"}));
}

}  // namespace
}  // namespace sb
