// The simulator's iteration overhead (simulation.iteration_overhead) and its fit to
// measured runs (harness/sim/fit/iteration_overhead_fit.h): which timeline events, gaps,
// iterations and pipeline stages the fit counts, its mean by hand, the overhead ending every rank's
// iteration in place of the optimizer model, the manifest block's checks. The fitted
// simulator against kept measured runs: test_simulator_against_measured.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/records/iteration_record.h"
#include "harness/sim/fit/iteration_overhead_fit.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"
#include "harness/trace/timeline.h"
#include "tests/support/manifest_error_path.h"
#include "tests/support/measured_run_folder.h"
#include "tests/support/run_command.h"
#include "tests/support/small_simulation.h"

namespace sb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// One rank's iteration with every kind of event the fit must tell apart, starting at
// 1000 ms, with a 0.5 ms untimed gap before the optimizer step (in the overhead).
RankTimeline rank_timeline(int64_t rank, int64_t dp_rank, int64_t stage, double data_ms, double optimizer_ms) {
  RankTimeline t;
  t.rank = rank;
  t.dp_rank = dp_rank;
  t.stage = stage;
  t.start_ms = 1000;
  double now = t.start_ms;
  const auto add = [&](EventKind kind, double ms) {
    t.events.push_back({kind, kind == EventKind::kForward || kind == EventKind::kBackward ? 0 : -1, now, now + ms});
    now += ms;
  };
  add(EventKind::kData, data_ms / 2);
  add(EventKind::kPlan, 5.0);  // timed by the simulator itself: not in the fit
  add(EventKind::kData, data_ms / 2);
  add(EventKind::kForward, 100.0);
  add(EventKind::kRecvWait, 9.0);
  add(EventKind::kBackward, 200.0);
  add(EventKind::kSendWait, 3.0);
  add(EventKind::kAllReduce, 7.0);
  now += 0.5;
  add(EventKind::kOptimizer, optimizer_ms);
  t.end_ms = now;
  return t;
}

// Iteration 0 is warm-up (wild values), iterations 1 and 2 are measured; iteration 3 has
// a timeline but no record (a run interrupted between the two writes). DP rank 0 has two
// pipeline stages (ranks 0 and 2), DP rank 1 one (rank 1).
void write_run(const fs::path& dir, bool simulated) {
  std::vector<IterationRecord> records;
  for (int64_t it = 0; it < 3; ++it) {
    IterationRecord r;
    r.iteration = it;
    r.warmup = it == 0;
    records.push_back(r);
  }
  test::write_measured_run_folder(dir, simulated, records);
  std::ofstream out(dir / "timeline_events.jsonl");
  const std::vector<std::pair<double, double>> rank0{{500, 500}, {1, 3}, {1, 10}, {900, 900}};
  const std::vector<std::pair<double, double>> rank1{{500, 500}, {2, 4}, {2, 4}, {900, 900}};
  const std::vector<std::pair<double, double>> rank2{{500, 500}, {5, 30}, {1, 2}, {900, 900}};
  for (int64_t it = 0; it < 4; ++it) {
    TimelineIteration iteration;
    iteration.iteration = it;
    iteration.ranks = {rank_timeline(0, 0, 0, rank0[it].first, rank0[it].second),
                       rank_timeline(1, 1, 0, rank1[it].first, rank1[it].second),
                       rank_timeline(2, 0, 1, rank2[it].first, rank2[it].second)};
    out << timeline_iteration_to_json(iteration).dump() << "\n";
  }
}

TEST(IterationOverheadFit, MeanOverMeasuredIterationsOfTheTimeOutsideModelledEvents) {
  const fs::path dir = test::fresh_temp_dir("iteration_overhead_fit");
  write_run(dir / "measured", false);
  // Per (iteration, DP rank): data + optimizer + the 0.5 ms gap, the least over the DP
  // rank's stages: iteration 1 min(4.5, 35.5), 6.5; iteration 2 min(11.5, 3.5), 6.5.
  std::vector<double> samples = iteration_overhead_samples(dir / "measured");
  std::sort(samples.begin(), samples.end());
  ASSERT_EQ(samples.size(), 4u);
  const std::vector<double> expected{3.5, 4.5, 6.5, 6.5};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(samples[i], expected[i], 1e-9);
  write_run(dir / "simulated", true);  // never fitted to: a model fitted to itself
  fs::create_directories(dir / "no_timeline");
  test::write_measured_run_folder(dir / "no_timeline", false, {IterationRecord{}});
  const IterationOverheadFit fit =
      fit_iteration_overhead_from_results(dir, "m.json", "$.simulation.iteration_overhead.fit_from");
  EXPECT_NEAR(fit.ms, (3.5 + 4.5 + 6.5 + 6.5) / 4, 1e-9);
  EXPECT_EQ(fit.samples, 4);
  EXPECT_EQ(fit.runs, (std::vector<std::string>{(dir / "measured").string()}));
  fs::remove_all(dir / "measured");
  try {
    fit_iteration_overhead_from_results(dir, "m.json", "$.simulation.iteration_overhead.fit_from");
    FAIL() << "only a simulated run and one without a timeline are left";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.simulation.iteration_overhead.fit_from");
  }
  EXPECT_THROW(fit_iteration_overhead_from_results(dir / "missing", "m.json", "$"), ConfigError);
  fs::remove_all(dir);
}

json overhead_manifest_json() { return test::small_simulation_manifest_json(); }

TEST(IterationOverhead, EndsEveryRanksIterationInPlaceOfTheOptimizer) {
  // DP2 x PP2: every rank adds the overhead after its all-reduce, so the iteration ends
  // exactly that much later and the plan, the compute and the communication stay.
  json with = overhead_manifest_json();
  with["simulation"].erase("optimizer_ms");
  with["simulation"]["iteration_overhead"] = {{"ms", 7.5}};
  RunSimulator plain = test::simulator_of(overhead_manifest_json()), loaded = test::simulator_of(with);
  for (int64_t it = 0; it < 3; ++it) {
    const SimulatedIteration x = plain.simulate_iteration(it), y = loaded.simulate_iteration(it);
    EXPECT_EQ(x.record.microbatch_lengths, y.record.microbatch_lengths);
    EXPECT_EQ(x.record.microbatch_ms, y.record.microbatch_ms);
    EXPECT_NEAR(y.record.iter_ms, x.record.iter_ms + 7.5, 1e-9);
    EXPECT_GT(y.record.bubble_fraction, x.record.bubble_fraction) << "the overhead is time the stages do not compute";
  }
}

TEST(SimulationManifest, IterationOverheadBlockIsCheckedAndRoundTrips) {
  const auto with_block = [](const json& block, bool keep_optimizer) {
    json j = overhead_manifest_json();
    if (!keep_optimizer) j["simulation"].erase("optimizer_ms");
    j["simulation"]["iteration_overhead"] = block;
    return j;
  };
  EXPECT_EQ(test::manifest_error_path(with_block({{"ms", -1}}, false)), "$.simulation.iteration_overhead.ms");
  EXPECT_EQ(test::manifest_error_path(with_block(json::object(), false)), "$.simulation.iteration_overhead.ms");
  EXPECT_EQ(test::manifest_error_path(with_block({{"ms", 3}, {"per", "rank"}}, false)),
            "$.simulation.iteration_overhead.per");
  EXPECT_EQ(test::manifest_error_path(with_block({{"ms", 3}}, true)), "$.simulation.optimizer_ms");
  const Manifest m = parse_manifest(with_block({{"ms", 3}}, false), "m.json");
  EXPECT_DOUBLE_EQ(m.simulation->iteration_overhead.ms, 3.0);
  EXPECT_EQ(manifest_to_json(parse_manifest(manifest_to_json(m), "m.json")), manifest_to_json(m));
  EXPECT_FALSE(manifest_to_json(m).at("simulation").contains("optimizer_ms"));
  // fit_from becomes an absolute path; ms stays unset until simulate fits it.
  const Manifest fitted = parse_manifest(with_block({{"fit_from", "measured"}}, false), "m.json");
  EXPECT_TRUE(fs::path(fitted.simulation->iteration_overhead.fit_from).is_absolute());
  EXPECT_EQ(fs::path(fitted.simulation->iteration_overhead.fit_from).filename(), "measured");
  EXPECT_LT(fitted.simulation->iteration_overhead.ms, 0);
  // Absent: the optimizer alone, and the resolved manifest does not invent the block.
  const Manifest none = parse_manifest(overhead_manifest_json(), "m.json");
  EXPECT_FALSE(none.simulation->iteration_overhead.enabled());
  EXPECT_FALSE(manifest_to_json(none).at("simulation").contains("iteration_overhead"));
}

}  // namespace
}  // namespace sb
