// The speedup's 95 % bootstrap interval (harness/report/speedup_interval.h) on made-up
// iteration times with known answers, and the report's sentences about it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/fnv1a.h"
#include "common/statistics.h"
#include "harness/report/report_writers.h"
#include "harness/report/speedup_interval.h"

namespace sb {
namespace {

TEST(Fnv1a64, PublishedValuesAndPieceByPiece) {
  // The reference implementation's test vectors (Fowler, Noll, Vo).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  // Fed in pieces (as a file read in buffers), the same hash.
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
  EXPECT_EQ(bootstrap_seed("sab__seed=1"), fnv1a64("sab__seed=1"));
}

TEST(MedianInPlace, EqualsMedianOfBitForBit) {
  // The bootstrap's median by selection against the sorting one: odd and even counts, ties,
  // awkward values.
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> ms(0.1, 1000.0);
  std::uniform_int_distribution<int> tie(0, 4);
  for (size_t n = 1; n <= 41; ++n) {
    std::vector<double> values(n);
    for (double& v : values) v = tie(rng) == 0 ? 123.456 : ms(rng) / 3.0;
    std::vector<double> selected = values;
    const double expected = median_of(values);
    EXPECT_EQ(median_in_place(selected), expected) << n << " values";
  }
  std::vector<double> none;
  EXPECT_TRUE(std::isnan(median_in_place(none)));
}

TEST(SpeedupInterval, ConstantIterationsGiveThePointItself) {
  const std::vector<double> baseline(20, 300.0), run(30, 200.0);
  const SpeedupInterval i = run_speedup_interval(baseline, run, false, 1);
  EXPECT_EQ(i.low, 1.5);
  EXPECT_EQ(i.high, 1.5);
}

TEST(SpeedupInterval, NoiseGivesTheMediansSamplingWidthAndCoverage) {
  // Run times N(100, 10) against a constant 150 ms baseline: the true speedup is 1.5. The
  // median of n = 50 normal draws has standard error about 1.2533 sigma / sqrt(n) =
  // 1.772 ms, so the ratio's 95 % interval spans about 150 / 100^2 x 2 x 1.96 x 1.772 =
  // 0.104. Over 200 measured runs: the mean width near that, and about 95 % of the
  // intervals hold 1.5 (a single run's bootstrap width varies by about n^(-1/4)).
  std::mt19937_64 rng(11);
  std::normal_distribution<double> ms(100.0, 10.0);
  const std::vector<double> baseline(50, 150.0);
  double width = 0;
  int holds = 0;
  constexpr int kRuns = 200;
  for (int r = 0; r < kRuns; ++r) {
    std::vector<double> run(50);
    for (double& v : run) v = ms(rng);
    const SpeedupInterval i = run_speedup_interval(baseline, run, false, static_cast<uint64_t>(r), 500);
    width += (i.high - i.low) / kRuns;
    holds += i.includes(1.5) ? 1 : 0;
  }
  EXPECT_NEAR(width, 0.104, 0.02);
  EXPECT_GE(holds, 176) << "fewer than 88 % of the intervals hold the true speedup";
  EXPECT_LE(holds, 199);
  // The same seed, the same interval.
  std::vector<double> run(50);
  for (double& v : run) v = ms(rng);
  const SpeedupInterval a = run_speedup_interval(baseline, run, false, 7), b = run_speedup_interval(baseline, run, false, 7);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
}

TEST(SpeedupInterval, PairedIterationsCancelWhatTheBatchDoesToBoth) {
  // Iteration i trains the same global batch in both runs: its time varies 100-1000 ms with
  // the batch, and the method is exactly twice as fast on every batch. Paired, every
  // resample gives 2; drawn apart, the batches' spread makes the interval wide.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> ms(100.0, 1000.0);
  std::vector<double> baseline(60), run(60);
  for (size_t i = 0; i < baseline.size(); ++i) {
    baseline[i] = ms(rng);
    run[i] = baseline[i] / 2.0;
  }
  const SpeedupInterval paired = run_speedup_interval(baseline, run, true, 4);
  EXPECT_EQ(paired.low, 2.0);
  EXPECT_EQ(paired.high, 2.0);
  const SpeedupInterval apart = run_speedup_interval(baseline, run, false, 4);
  EXPECT_GT(apart.high - apart.low, 0.5);
}

TEST(SpeedupInterval, SeveralRunsResampleTheRunsToo) {
  // Two seeds measured 2x and 1x, each without noise: resampled pairs of runs give medians
  // 2 (both the first), 1 (both the second) or 1.5, a quarter, a quarter and a half of the
  // time, so the 2.5 % and 97.5 % quantiles are 1 and 2.
  const std::vector<double> base(10, 200.0), fast(10, 100.0), same(10, 200.0);
  const SpeedupInterval i = method_speedup_interval({{&base, &fast}, {&base, &same}}, 3);
  EXPECT_EQ(i.low, 1.0);
  EXPECT_EQ(i.high, 2.0);
  EXPECT_TRUE(i.includes(1.0));
  EXPECT_TRUE(i.includes(1.5));
  EXPECT_FALSE(i.includes(2.01));
}

TEST(SpeedupInterval, EmptySamplesAreRejected) {
  const std::vector<double> some{1.0}, none;
  EXPECT_THROW(run_speedup_interval(none, some, false, 1), std::invalid_argument);
  EXPECT_THROW(run_speedup_interval(some, none, false, 1), std::invalid_argument);
  const std::vector<double> two{1.0, 2.0};
  EXPECT_THROW(run_speedup_interval(some, two, true, 1), std::invalid_argument) << "paired lists of two lengths";
  EXPECT_THROW(method_speedup_interval({}, 1), std::invalid_argument);
}

TEST(SpeedupInterval, TheReportSaysWhenAnIntervalIncludesOneAndWhenTwoOverlap) {
  const auto method = [](const std::string& label, bool baseline, double low, double high) {
    MethodAggregate g;
    g.label = label;
    g.is_baseline = baseline;
    g.speedup_interval = SpeedupInterval{low, high};
    return g;
  };
  const std::vector<std::string> notes = interval_notes({method("baseline", true, 1.0, 1.0),
                                                         method("dst", false, 0.97, 1.05),
                                                         method("sab", false, 1.18, 1.24),
                                                         method("sab_dst", false, 1.20, 1.27)});
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "dst: its speedup's 95 % interval [0.97, 1.05] includes 1.0: not distinguishable from the "
                      "baseline in these runs.");
  EXPECT_EQ(notes[1], "sab [1.18, 1.24] overlaps sab_dst [1.20, 1.27]: the speedup differences between them are "
                      "within the noise.");
}

}  // namespace
}  // namespace sb
