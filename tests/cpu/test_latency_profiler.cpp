// The profiler's timing loop (interleaved rounds in shuffled orders, warm-up untimed, one
// statistic per point) and profile --check (held-out single and packed points).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/latency/latency_predictor.h"
#include "harness/latency/latency_profiler.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"

namespace sb {
namespace {

TEST(MeasureInterleaved, TimesEveryPointOncePerRoundInAShuffledOrderAfterTheWarmUpRounds) {
  std::vector<int> order;  // which point ran, in call order
  std::vector<int> calls(4, 0);
  // Point i returns 10 i + (its call number), so each statistic shows which calls were kept.
  std::vector<TimedPoint> points;
  for (int i = 0; i < 4; ++i) {
    points.push_back([i, &order, &calls] {
      order.push_back(i);
      return 10.0 * i + static_cast<double>(calls[static_cast<size_t>(i)]++);
    });
  }
  std::vector<std::string> heard;
  const std::vector<LatencyStat> stats = measure_interleaved(
      points, /*warmup=*/2, /*repetitions=*/6, /*seed=*/7, [&](const std::string& line) { heard.push_back(line); });

  // 2 warm-up rounds then 6 timed rounds; every round runs each point exactly once.
  ASSERT_EQ(order.size(), 8u * 4u);
  std::set<std::vector<int>> round_orders;
  for (size_t r = 0; r < 8; ++r) {
    std::vector<int> round(order.begin() + static_cast<std::ptrdiff_t>(4 * r),
                           order.begin() + static_cast<std::ptrdiff_t>(4 * r + 4));
    round_orders.insert(round);
    std::sort(round.begin(), round.end());
    EXPECT_EQ(round, (std::vector<int>{0, 1, 2, 3})) << "round " << r;
  }
  // The order changes between rounds: no point always follows the same one.
  EXPECT_GT(round_orders.size(), 1u);
  ASSERT_EQ(stats.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    // Calls 0 and 1 were the warm-up; 2..7 were timed, kept in the point's own order.
    const std::vector<double> kept{10.0 * i + 2, 10.0 * i + 3, 10.0 * i + 4, 10.0 * i + 5, 10.0 * i + 6, 10.0 * i + 7};
    EXPECT_EQ(stats[static_cast<size_t>(i)].samples, kept);
    EXPECT_DOUBLE_EQ(stats[static_cast<size_t>(i)].median, 10.0 * i + 4.5);
  }
  ASSERT_EQ(heard.size(), 6u);  // one line per timed round
  EXPECT_NE(heard.back().find("round 6/6"), std::string::npos) << heard.back();

  // The same seed gives the same orders; another seed, others.
  std::vector<int> first = order;
  order.clear();
  std::fill(calls.begin(), calls.end(), 0);
  measure_interleaved(points, 2, 6, 7);
  EXPECT_EQ(order, first);
  order.clear();
  measure_interleaved(points, 2, 6, 8);
  EXPECT_NE(order, first);
}

// profile --check on a tiny model: single sequences at the midpoints, and packed
// micro-batches whose prediction is the packing rule's.
TEST(ProfileCheck, ReMeasuresMidpointsAndPackedMicroBatches) {
  ProfileRequest request;
  request.model = "qwen2-test";
  request.config = profile_model_config(request.model);
  request.attention = moba_attention_options(8, 2);
  request.seq_lens = {16, 32, 64};
  request.budgets = {1, 2, 4};
  request.warmup = 0;
  request.repetitions = 1;
  const LatencyProfile profile = measure_latency_profile(request);
  // The packed point: 4 sequences of the shortest length.
  ASSERT_TRUE(profile.packed_ms.has_value());
  EXPECT_EQ(profile.packed_count, 4);
  EXPECT_GT(profile.packed_ms->median, 0.0);
  EXPECT_EQ(profile.packed_ms->samples.size(), 1u);
  const ProfileCheck check = check_latency_profile(profile, request.attention, /*warmup=*/0, /*repetitions=*/1);
  const LatencyPredictor predictor(profile);

  ASSERT_EQ(check.points.size(), 4u);  // lengths 24, 48 x budgets 1, 3
  double sum = 0;
  for (const ProfileCheckPoint& p : check.points) {
    EXPECT_TRUE(p.packed_lengths.empty());
    EXPECT_EQ(packed_lengths_text(p), "");
    EXPECT_TRUE(p.seq_len == 24 || p.seq_len == 48) << p.seq_len;
    EXPECT_DOUBLE_EQ(p.predicted_ms, predictor.layer_ms(p.seq_len, p.budget));
    EXPECT_GT(p.measured.median, 0.0);
    EXPECT_NEAR(p.abs_pct_error, 100.0 * std::abs(p.predicted_ms - p.measured.median) / p.measured.median, 1e-9);
    sum += p.abs_pct_error;
  }
  EXPECT_NEAR(check.mape, sum / 4, 1e-9);

  ASSERT_EQ(check.packed_points.size(), 2u);
  const std::vector<std::vector<int64_t>> parts{{12, 6, 6}, {24, 12, 12}};
  double packed_sum = 0;
  for (size_t i = 0; i < 2; ++i) {
    const ProfileCheckPoint& p = check.packed_points[i];
    EXPECT_EQ(p.packed_lengths, parts[i]);
    EXPECT_EQ(packed_lengths_text(p), i == 0 ? "12+6+6" : "24+12+12");
    EXPECT_EQ(p.seq_len, 2 * parts[i][0]);
    EXPECT_EQ(p.budget, 3);  // the middle held-out budget
    EXPECT_DOUBLE_EQ(p.predicted_ms, predictor.packed_layer_ms(parts[i], 3));
    packed_sum += p.abs_pct_error;
  }
  EXPECT_NEAR(check.packed_mape, packed_sum / 2, 1e-9);
}

// A vertical-slash profile: budgets are kept keys per query, each point's backend is asked
// for them, and the profile records the index's rules and the kept keys each point ran.
TEST(MeasureLatencyProfile, VerticalSlashPointsRunTheirKeptKeysAndRecordThem) {
  ProfileRequest request;
  request.model = "qwen2-test";
  request.config = profile_model_config(request.model);
  VerticalSlashParams v;
  v.block_size = 4;
  v.sink_tokens = 2;
  v.local_window = 4;
  v.last_queries = 8;
  request.attention = vertical_slash_attention_options(v);
  request.seq_lens = {32, 64};
  request.budgets = {1, 12, 1000};
  request.warmup = 0;
  request.repetitions = 1;
  const LatencyProfile profile = measure_latency_profile(request);
  EXPECT_EQ(profile.attention, "vertical_slash");
  EXPECT_EQ(profile.block_size(), 4);
  EXPECT_EQ(profile.attention_fields.at("last_queries"), 8);
  EXPECT_EQ(profile.attention_fields.at("sink_tokens"), 2);
  EXPECT_EQ(profile.attention_fields.at("local_window"), 4);
  const auto kept = profile.context.at("kept_keys_per_query").get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(kept.size(), 2u);
  for (size_t i = 0; i < kept.size(); ++i) {
    const int64_t length = profile.seq_lens[i];
    ASSERT_EQ(kept[i].size(), 3u);
    EXPECT_GT(kept[i][0], 1) << "1 key is below what the sinks and the window keep";
    EXPECT_LE(kept[i][1], 12) << "a budget within reach is not exceeded";
    EXPECT_LE(kept[i][0], kept[i][1]);
    // 1000 is above the dense mean: every key (rounded mean of 1 .. L).
    EXPECT_EQ(kept[i][2], (length + 1 + 1) / 2) << length;
  }
  // The file keeps what the run's check matches.
  const LatencyProfile read = latency_profile_from_json(latency_profile_to_json(profile), "<test>");
  EXPECT_EQ(read.attention_fields.at("sink_tokens"), 2);
  EXPECT_EQ(read.attention_fields.at("max_slashes"), v.max_slashes);
}

TEST(MeasureInterleaved, RefusesNoRepetitionsOrANegativeWarmUp) {
  const std::vector<TimedPoint> points{[] { return 1.0; }};
  EXPECT_THROW(measure_interleaved(points, 0, 0, 0), std::invalid_argument);
  EXPECT_THROW(measure_interleaved(points, -1, 3, 0), std::invalid_argument);
  EXPECT_EQ(measure_interleaved(points, 0, 1, 0).size(), 1u);
}

}  // namespace
}  // namespace sb
