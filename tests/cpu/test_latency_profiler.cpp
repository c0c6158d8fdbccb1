// The profiler's timing loop: interleaved rounds, warm-up untimed, one statistic per point.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "harness/latency/latency_profiler.h"

namespace sb {
namespace {

TEST(MeasureInterleaved, TimesEveryPointOncePerRoundAfterTheWarmUpRounds) {
  std::vector<int> order;  // which point ran, in call order
  std::vector<int> calls(3, 0);
  // Point i returns 10 i + (its call number), so each statistic shows which calls were kept.
  std::vector<TimedPoint> points;
  for (int i = 0; i < 3; ++i) {
    points.push_back([i, &order, &calls] {
      order.push_back(i);
      return 10.0 * i + static_cast<double>(calls[static_cast<size_t>(i)]++);
    });
  }
  std::vector<std::string> heard;
  const std::vector<LatencyStat> stats =
      measure_interleaved(points, /*warmup=*/2, /*repetitions=*/3, [&](const std::string& line) { heard.push_back(line); });

  // 2 warm-up rounds then 3 timed rounds, each round 0, 1, 2: never one point back to back.
  const std::vector<int> expected{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2};
  EXPECT_EQ(order, expected);
  ASSERT_EQ(stats.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    // Calls 0 and 1 were the warm-up; 2, 3, 4 were timed: median is call 3.
    const std::vector<double> kept{10.0 * i + 2, 10.0 * i + 3, 10.0 * i + 4};
    EXPECT_EQ(stats[static_cast<size_t>(i)].samples, kept);
    EXPECT_DOUBLE_EQ(stats[static_cast<size_t>(i)].median, 10.0 * i + 3);
  }
  ASSERT_EQ(heard.size(), 3u);  // one line per timed round
  EXPECT_NE(heard.back().find("round 3/3"), std::string::npos) << heard.back();
}

TEST(MeasureInterleaved, RefusesNoRepetitionsOrANegativeWarmUp) {
  const std::vector<TimedPoint> points{[] { return 1.0; }};
  EXPECT_THROW(measure_interleaved(points, 0, 0), std::invalid_argument);
  EXPECT_THROW(measure_interleaved(points, -1, 3), std::invalid_argument);
  EXPECT_EQ(measure_interleaved(points, 0, 1).size(), 1u);
}

}  // namespace
}  // namespace sb
