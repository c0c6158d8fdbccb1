// Online calibration of predicted latency: prior 1, ratio of sums per token bucket and
// overall, new buckets start from the global factor, state round trip.
#include <gtest/gtest.h>

#include <stdexcept>

#include "harness/latency/latency_calibration.h"

namespace sb {
namespace {

TEST(LatencyCalibration, StartsAtOneAndLearnsTheRatioOfSumsPerBucket) {
  LatencyCalibration c(0.5);
  EXPECT_DOUBLE_EQ(c.factor(100), 1.0);
  // Bucket 6 (64..127 tokens): measured 30 against predicted 20 -> r = 1.5.
  // Bucket 10 (1024..2047): measured 90 against 100 -> r = 0.9. Overall 120 / 120 = 1.
  c.observe({{64, 10, 12}, {100, 10, 18}, {1500, 100, 90}});
  EXPECT_DOUBLE_EQ(c.factor(127), 0.5 * 1.0 + 0.5 * 1.5);
  EXPECT_DOUBLE_EQ(c.factor(1024), 0.5 * 1.0 + 0.5 * 0.9);
  EXPECT_DOUBLE_EQ(c.factor(300), 1.0);  // never observed: the global factor
  // A machine twice as slow everywhere: the global factor and the observed bucket move.
  c.observe({{1500, 100, 200}});
  EXPECT_DOUBLE_EQ(c.factor(300), 0.5 * 1.0 + 0.5 * 2.0);
  EXPECT_DOUBLE_EQ(c.factor(1024), 0.5 * 0.95 + 0.5 * 2.0);
  EXPECT_DOUBLE_EQ(c.factor(64), 1.25);  // not observed this time: unchanged
  // A bucket seen for the first time starts from the global factor it had.
  c.observe({{300, 10, 30}});
  EXPECT_DOUBLE_EQ(c.factor(300), 0.5 * 1.5 + 0.5 * 3.0);
}

TEST(LatencyCalibration, SkipsEntriesWithoutPredictionOrMeasurement) {
  LatencyCalibration c(1.0);
  c.observe({{100, -1, 50}, {100, 10, 0}, {0, 10, 10}});
  EXPECT_DOUBLE_EQ(c.factor(100), 1.0);
  c.observe({{100, -1, 50}, {100, 10, 20}});
  EXPECT_DOUBLE_EQ(c.factor(100), 2.0);
}

TEST(LatencyCalibration, StateRoundTripsAndBadStatesAreRefused) {
  LatencyCalibration c(0.3);
  c.observe({{64, 10, 13}, {2000, 50, 40}});
  LatencyCalibration restored(0.3);
  restored.load_json(c.to_json());
  for (int64_t tokens : {64, 2000, 500}) EXPECT_DOUBLE_EQ(restored.factor(tokens), c.factor(tokens));
  EXPECT_THROW(restored.load_json({{"buckets", nlohmann::json::object()}}), std::invalid_argument);
  EXPECT_THROW(restored.load_json({{"global", 1.0}, {"buckets", {{"6", -1.0}}}}), std::invalid_argument);
  EXPECT_THROW(restored.load_json({{"global", 0.0}, {"buckets", nlohmann::json::object()}}), std::invalid_argument);
  EXPECT_THROW(LatencyCalibration(0.0), std::invalid_argument);
  EXPECT_THROW(LatencyCalibration(1.5), std::invalid_argument);
}

}  // namespace
}  // namespace sb
